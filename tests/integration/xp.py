# SPDX-License-Identifier: MIT
"""Helpers for the integration tests: real processes only.

Every process a test starts goes through a Procs (the `procs` fixture of
conftest.py), which kills and reaps it afterwards, whatever the test did.
Fixture programs (see tests/fixtures/) print "ready PID" when they can
take commands on stdin; every wait here is on a line from a pipe or on a
process exit, with a generous timeout only as a safety bound.
"""
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD") or os.path.join(REPO, "build")
XPROBES = os.path.join(BUILD, "xprobes")
FIXTURES = os.path.join(BUILD, "tests", "fixtures")

# A bound on every wait, never a synchronisation: tests do not sleep.
TIMEOUT = 60

NOBODY = 65534


def fixture(name):
    """Absolute path of a built fixture (program, lib*.so or mod_*.so)."""
    path = os.path.join(FIXTURES, name)
    if not os.path.exists(path):
        pytest.fail(f"fixture {path} is missing: run `make fixtures`")
    return path


def base_env(**extra):
    """The environment for targets and the tool: no inherited switch that
    would turn the agent off or inject anything."""
    env = dict(os.environ)
    for var in ("XPROBES_AGENT", "LD_PRELOAD"):
        env.pop(var, None)
    env.update(extra)
    return env


def socket_path(pid, uid=None):
    """Where the agent of pid (owned by uid, default ours) listens."""
    if uid is None:
        uid = os.geteuid()
    base = os.environ.get("XPROBES_RUNDIR") or "/tmp"
    return os.path.join(base, f".xprobes-{uid}", f"{pid}.sock")


def as_user(uid, argv, caps=()):
    """argv run as uid (and gid uid) with no supplementary groups; caps are
    capabilities kept as ambient ones (e.g. "dac_override")."""
    pre = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    if caps:
        spec = ",".join("+" + c for c in caps)
        pre += [f"--inh-caps={spec}", f"--ambient-caps={spec}"]
    return pre + list(argv)


def needs_root_and_setpriv(why):
    """pytestmark for tests that hand processes to uid 65534 (why: for what
    root is needed)."""
    return [
        pytest.mark.skipif(os.geteuid() != 0, reason=f"needs root: {why}"),
        pytest.mark.skipif(shutil.which("setpriv") is None,
                           reason="needs setpriv (util-linux) to run as uid 65534"),
    ]


def wait_until(cond, what, timeout=TIMEOUT):
    """Poll cond() until it holds (the agent has no way to tell us when);
    fail after timeout, a bound and never a timer."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout}s")
        time.sleep(0.01)  # the polling interval only


def in_pid_namespace(procs, prefix, name, env, what):
    """Fixture program name run as pid 1 of a pid namespace of its own,
    started by the unshare command prefix (which forks it): the Target
    (talking to it through unshare) and its pid as we number it."""
    path = fixture(name)
    p = procs.popen([*prefix, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                    cwd="/")
    t = Target(p, what)
    assert t.expect("ready ") == "ready 1"
    with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
        (pid,) = [int(c) for c in f.read().split()]
    procs.adopt(pid, os.path.realpath(path))
    return t, pid


def run_as_nobody(argv, caps=()):
    """argv run to completion as uid 65534 (see as_user)."""
    return subprocess.run(as_user(NOBODY, argv, caps), capture_output=True, text=True,
                          cwd="/", env=base_env(), timeout=TIMEOUT)


class LineReader:
    """Lines from a pipe, read with os.read so that nothing is buffered
    out of sight of select()."""

    def __init__(self, fd, what):
        self.fd = fd
        self.what = what
        self.buf = b""
        self.eof = False

    def _fill(self, deadline, what):
        """Read one chunk (or EOF) before the deadline."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{self.what}: {what}; had {self.buf!r}")
        ready, _, _ = select.select([self.fd], [], [], left)
        if ready:
            chunk = os.read(self.fd, 65536)
            if chunk:
                self.buf += chunk
            else:
                self.eof = True

    def readline(self, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            if self.eof:
                raise EOFError(f"{self.what}: end of output; had {self.buf!r}")
            self._fill(deadline, f"no line within {timeout}s")
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def read_until_eof(self, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while not self.eof:
            self._fill(deadline, f"output not closed within {timeout}s")
        rest, self.buf = self.buf, b""
        return rest.decode(errors="replace")


class Target:
    """A fixture program speaking the line protocol of tests/fixtures/fixture.h."""

    def __init__(self, proc, name):
        self.proc = proc
        self.name = name
        self.out = LineReader(proc.stdout.fileno(), name)
        self.pid = proc.pid

    def send(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def readline(self, timeout=TIMEOUT):
        return self.out.readline(timeout)

    def expect(self, prefix, timeout=TIMEOUT):
        line = self.readline(timeout)
        assert line.startswith(prefix), f"{self.name}: expected {prefix!r}, got {line!r}"
        return line

    def ask(self, line, reply=None):
        """Send a command and return its one reply line (checked if given)."""
        self.send(line)
        got = self.readline()
        if reply is not None:
            assert got == reply, f"{self.name}: {line!r} -> {got!r}, wanted {reply!r}"
        return got

    def hit(self, n):
        self.ask(f"hit {n}", f"hit {n} done")

    def alive(self):
        return self.proc.poll() is None

    def assert_healthy(self):
        """Still running and still serving its own commands."""
        assert self.alive(), f"{self.name} died: status {self.proc.returncode}"
        self.ask("ping", "pong")


class Procs:
    def __init__(self):
        self.popens = []
        self.pids = []  # descendants we only know by pid (fork tests)

    def popen(self, argv, **kw):
        p = subprocess.Popen(argv, **kw)
        self.popens.append(p)
        return p

    def target(self, name, *args, env=None, cwd=None, ready=True):
        """Start a fixture program; wait for its "ready PID" line."""
        path = fixture(name)
        p = self.popen([path, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       env=env or base_env(), cwd=cwd or "/")
        t = Target(p, name)
        if ready:
            line = t.expect("ready ")
            assert int(line.split()[1]) == p.pid
        return t

    def adopt(self, pid, exe):
        """Kill pid at teardown if it is still exe (pids can be reused)."""
        self.pids.append((pid, exe))

    def cleanup(self):
        for pid, exe in self.pids:
            try:
                if os.readlink(f"/proc/{pid}/exe") == exe:
                    os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for p in self.popens:
            if p.poll() is None:
                p.kill()
            try:
                p.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                continue
            # A killed agent cannot remove its socket: do it for it.
            if p.returncode == -signal.SIGKILL:
                try:
                    os.unlink(socket_path(p.pid))
                except OSError:
                    pass
            for f in (p.stdin, p.stdout, p.stderr):
                if f:
                    try:
                        f.close()
                    except OSError:
                        pass


def xprobes(*args, input="", user=None, caps=(), cwd=None, env=None, timeout=TIMEOUT):
    """Run the xprobes tool to completion; returns the CompletedProcess.
    `timeout` is a safety bound: a hang fails the test."""
    argv = [XPROBES, *[str(a) for a in args]]
    if user is not None:
        argv = as_user(user, argv, caps)
    return subprocess.run(argv, input=input, capture_output=True, text=True,
                          cwd=cwd or "/", env=env or base_env(), timeout=timeout)


def ok(*args, **kw):
    """xprobes that must succeed; returns its stdout."""
    r = xprobes(*args, **kw)
    assert r.returncode == 0, f"xprobes {args}: status {r.returncode}\n{r.stdout}{r.stderr}"
    return r.stdout


def fails(*args, status=1, **kw):
    """xprobes that must fail with `status`; returns (stdout, stderr)."""
    r = xprobes(*args, **kw)
    assert r.returncode == status, (
        f"xprobes {args}: status {r.returncode}, wanted {status}\n{r.stdout}{r.stderr}")
    return r.stdout, r.stderr


def parse_sites(text):
    """`sites` output -> {object path: [site lines without the indent]}."""
    objs, cur = {}, None
    for line in text.splitlines():
        if not line:
            continue
        if line.endswith(":") and not line.startswith((" ", "*", "-")):
            cur = line[:-1]
            objs[cur] = []
        else:
            assert cur is not None, f"site line before any object: {line!r}"
            objs[cur].append(line[2:] if line.startswith("  ") else line)
    return objs


def module_count(pid, module, what="count"):
    """A counting fixture module's reply to `command MODULE count`, as int."""
    out = ok(pid, "command", module, what).strip()
    word, value = out.split()
    assert word == what, out
    return int(value)


# ---- the control protocol, spoken directly (lib/base/base.h) -------------------

def send_frame(sock, payload):
    sock.sendall(struct.pack("<I", len(payload)) + payload)


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError(f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def recv_frame(sock):
    """One reply: (status, text)."""
    (n,) = struct.unpack("<I", recv_exact(sock, 4))
    body = recv_exact(sock, n)
    assert n >= 1, "reply without a status byte"
    return body[0], body[1:].decode(errors="replace")


def connect_agent(pid):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(TIMEOUT)
    s.connect(socket_path(pid))
    return s


def closed_by_peer(sock):
    """True once the agent has closed the connection (EOF or reset)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


class Screen:
    """What a program writes to a pty, searched as it arrives."""

    def __init__(self, fd):
        self.fd = fd
        self.seen = ""

    def wait_for(self, text):
        """Wait until text appears; forget everything up to its end."""
        deadline = time.monotonic() + TIMEOUT
        while text not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"pty: {text!r} not seen; had {self.seen!r}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # EIO: the other side is gone
                    chunk = b""
                if not chunk:
                    raise EOFError(f"pty closed; had {self.seen!r}")
                self.seen += chunk.decode(errors="replace")
        self.seen = self.seen[self.seen.index(text) + len(text):]
