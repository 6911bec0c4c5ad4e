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
        r = xp(t.pid, "command", "mod_inject.so")
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
        assert t.hit() == "hit 1"
    finally:
        t.close()
