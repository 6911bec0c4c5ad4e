# SPDX-License-Identifier: MIT
"""Agent injection into processes that never linked libxprobes."""
import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
XPROBES = os.path.join(BUILD, "xprobes")
CFLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2", "-g",
          "-I" + os.path.join(ROOT, "include")]


@pytest.fixture(scope="module")
def bins(tmp_path_factory):
    d = tmp_path_factory.mktemp("inject")
    out = {}
    out["target"] = str(d / "target")
    subprocess.run(["gcc", *CFLAGS, "-o", out["target"], os.path.join(HERE, "target.c"),
                    "-lpthread"], check=True)
    out["static"] = str(d / "target-static")
    subprocess.run(["gcc", *CFLAGS, "-static", "-o", out["static"],
                    os.path.join(HERE, "target.c"), "-lpthread"], check=True)
    out["mod"] = str(d / "mod_inject.so")
    subprocess.run(["gcc", *CFLAGS, "-shared", "-fPIC", "-o", out["mod"],
                    os.path.join(HERE, "mod_inject.c")], check=True)
    return out


class Target:
    def __init__(self, argv, env=None):
        e = dict(os.environ)
        e.pop("LD_PRELOAD", None)
        e.pop("XPROBES_AGENT", None)
        e.update(env or {})
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, env=e)
        line = self.p.stdout.readline().split()
        assert line and line[0] == "ready", line
        self.pid = int(line[-1])

    def hit(self):
        self.p.stdin.write("x\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def xp(*args):
    return subprocess.run([XPROBES, *map(str, args)], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def test_no_agent_is_explained_with_the_inject_hint(bins):
    t = Target([bins["target"]])
    try:
        r = xp(t.pid, "sites")
        assert r.returncode == 1
        assert "has no XProbes agent" in r.stderr
        assert "--inject %d" % t.pid in r.stderr
        assert t.hit() == "hit 1"
    finally:
        t.close()


def test_inject_then_everything_works(bins):
    t = Target([bins["target"]])
    try:
        assert t.hit() == "hit 1"
        r = xp("--inject", t.pid, "sites")
        assert r.returncode == 0, r.stderr
        assert "inject_conn_release(const struct conn*)" in r.stdout
        # The main thread was blocked in read() when we borrowed it: it must
        # still read its input correctly afterwards.
        assert t.hit() == "hit 2"
        r = xp(t.pid, "load", bins["mod"])
        assert r.returncode == 0, r.stderr
        assert t.hit() == "hit 3"
        assert t.hit() == "hit 4"
        r = xp(t.pid, "command", "mod_inject.so")
        assert r.stdout.strip() == "releases=2 last_served=4 spins_seen=no"
        # Injecting again finds the agent already there.
        r = xp("--inject", t.pid, "modules")
        assert r.returncode == 0 and "mod_inject.so" in r.stdout
        assert xp(t.pid, "unload", "mod_inject.so").returncode == 0
        assert t.hit() == "hit 5"
    finally:
        t.close()


def test_inject_into_busy_multithreaded_process(bins):
    t = Target([bins["target"], "4"])
    try:
        r = xp("--inject", t.pid, "load", bins["mod"])
        assert r.returncode == 0, r.stderr
        assert t.hit() == "hit 1"
        # The spinners hit their site as soon as they next run: on a loaded
        # machine that may be after the first look, so look until they have
        # (a bound, not a wait: each look is a round trip to the agent).
        for _ in range(1000):
            r = xp(t.pid, "command", "mod_inject.so")
            if "spins_seen=yes" in r.stdout:
                break
        assert "releases=1" in r.stdout and "spins_seen=yes" in r.stdout
        assert t.p.poll() is None
    finally:
        t.close()


def test_static_binary_is_refused_clearly(bins):
    t = Target([bins["static"]])
    try:
        r = xp("--inject", t.pid, "sites")
        assert r.returncode == 1
        assert "statically linked" in r.stderr
        assert t.hit() == "hit 1"
    finally:
        t.close()


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
def test_already_traced_process_is_refused_clearly(bins):
    # strace is the tracer: ptrace(SEIZE) must fail, with the tracer named.
    p = subprocess.Popen(["strace", "-f", "-o", "/dev/null", bins["target"]],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().split()
        pid = int(line[-1])
        r = xp("--inject", pid, "sites")
        assert r.returncode == 1
        assert "ptrace(%d) refused" % pid in r.stderr
        assert "already traced by process" in r.stderr
        assert "LD_PRELOAD=libxprobes.so" in r.stderr
        p.stdin.write("x\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "hit 1"
    finally:
        p.kill()
        p.wait()


def test_agent_off_in_target_is_explained(bins):
    t = Target([bins["target"]], env={"XPROBES_AGENT": "off"})
    try:
        r = xp("--inject", t.pid, "sites")
        assert r.returncode == 1
        assert "did not start" in r.stderr and "XPROBES_AGENT=off" in r.stderr
        assert t.hit() == "hit 1"
    finally:
        t.close()


def test_bad_agent_path_is_reported_with_dlerror(bins, tmp_path):
    bogus = tmp_path / "notalib.so"
    bogus.write_text("not an ELF file\n")
    t = Target([bins["target"]])
    try:
        r = xp("--inject", "--agent", str(bogus), t.pid, "sites")
        assert r.returncode == 1
        assert "the agent did not load in process %d" % t.pid in r.stderr
        assert "notalib.so" in r.stderr  # dlerror names the file
        # The failed load leaves no page (code and verdict) behind.
        with open(f"/proc/{t.pid}/maps") as f:
            assert not [m for m in f if m.split()[1].startswith("rwx")], "an RWX page is left"
        assert t.hit() == "hit 1"
    finally:
        t.close()


class Pty:
    """xprobes on a pseudo-terminal, so it believes a person is typing."""

    def __init__(self, argv, env):
        import pty
        self.master, slave = pty.openpty()
        self.p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                  start_new_session=True, close_fds=True)
        os.close(slave)
        self.seen = b""

    def expect(self, text, timeout=60):
        """Read until TEXT appears; the timeout only bounds a hang."""
        import select
        import time
        text = text.encode()
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, "never saw %r in %r" % (text, self.seen)
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # EIO: the slave side is closed (xprobes exited)
                    chunk = b""
                assert chunk, "xprobes exited before %r; output %r" % (text, self.seen)
                self.seen += chunk
        out, self.seen = self.seen.split(text, 1)
        return out.decode(errors="replace") + text.decode()

    def send(self, line):
        os.write(self.master, line.encode() + b"\r")

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        os.close(self.master)


def pty_env(tmp_path):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e["HOME"] = str(tmp_path)  # the shell's history file goes here
    e["TERM"] = "dumb"
    return e


def test_interactive_prompt_yes_injects_then_the_shell_works(bins, tmp_path):
    t = Target([bins["target"]])
    x = Pty([XPROBES, str(t.pid)], pty_env(tmp_path))
    try:
        out = x.expect("Inject one now? [y/N] ")
        assert "Process %d has no XProbes agent" % t.pid in out
        x.send("y")
        x.expect("done")
        x.expect("xprobes> ")
        x.send("sites")
        out = x.expect("xprobes> ")
        assert "inject_conn_release(const struct conn*)" in out, out
        x.send("load " + bins["mod"])
        x.expect("xprobes> ")
        assert t.hit() == "hit 1"
        x.send("command mod_inject.so")
        out = x.expect("xprobes> ")
        assert "releases=1 last_served=1" in out, out
        x.send("quit")
        assert x.p.wait(timeout=60) == 0
        # The agent stays: a later non-interactive session needs no injection.
        r = xp(t.pid, "modules")
        assert r.returncode == 0 and "mod_inject.so" in r.stdout, r.stderr
        assert t.hit() == "hit 2"
    finally:
        x.close()
        t.close()


@pytest.mark.parametrize("answer", ["", "n"])
def test_interactive_prompt_default_is_no(bins, tmp_path, answer):
    t = Target([bins["target"]])
    x = Pty([XPROBES, str(t.pid)], pty_env(tmp_path))
    try:
        x.expect("Inject one now? [y/N] ")
        x.send(answer)
        out = x.expect("failed")
        assert "has no XProbes agent" in out, out
        assert x.p.wait(timeout=60) == 1
        # Nothing was injected: the process still has no agent.
        r = xp(t.pid, "sites")
        assert r.returncode == 1 and "has no XProbes agent" in r.stderr
        assert t.hit() == "hit 1"
    finally:
        x.close()
        t.close()
