# SPDX-License-Identifier: MIT
"""Helpers for the xprobes-dtrace and `xprobes list` tests: real processes,
real compilers, no sleeps (every wait is on a pipe line or a process exit,
with a generous timeout only as a safety bound)."""
import os
import select
import shutil
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
REPO = os.path.dirname(os.path.dirname(HERE))
INCLUDE = os.path.join(REPO, "include")
BUILD = os.environ.get("XPROBES_BUILD") or os.path.join(REPO, "build")
XPROBES = os.path.join(BUILD, "xprobes")
DTRACE = os.path.join(BUILD, "xprobes-dtrace")
LIBDIR = BUILD  # libxprobes.so

TIMEOUT = 60

# memcached's rewrite of the generated header (its Makefile.am), verbatim.
MEMCACHED_REWRITE = ("sed -e 's,void \\*,const void \\*,' | "
                     "sed -e 's,char \\*,const char \\*,g' | tr '\\t' ' '")

# memcached's warning flags (configure.ac, gcc branch), plus more.
STRICT = ["-O2", "-g", "-Wall", "-Wextra", "-Werror", "-pedantic",
          "-Wmissing-prototypes", "-Wmissing-declarations", "-Wredundant-decls",
          "-Wstrict-prototypes", "-Wshadow"]


def env(**extra):
    e = dict(os.environ)
    for var in ("XPROBES_AGENT", "LD_PRELOAD", "CC", "CFLAGS", "CPP"):
        e.pop(var, None)
    e.update(extra)
    return e


def dtrace(*args, cwd, extra_env=None, timeout=TIMEOUT):
    """Run xprobes-dtrace to completion."""
    return subprocess.run([DTRACE, *args], cwd=cwd, capture_output=True, text=True,
                          env=env(**(extra_env or {})), timeout=timeout)


def xprobes(*args, cwd="/", timeout=TIMEOUT):
    return subprocess.run([XPROBES, *[str(a) for a in args]], cwd=cwd,
                          capture_output=True, text=True, env=env(), timeout=timeout)


def ok(r):
    """A CompletedProcess that must have succeeded; returns its stdout."""
    assert r.returncode == 0, f"{r.args}: status {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def run(argv, cwd=None, **kw):
    """A build step that must succeed."""
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env(),
                       timeout=TIMEOUT, **kw)
    assert r.returncode == 0, f"{argv}: status {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def have(tool):
    return shutil.which(tool) is not None


class LineReader:
    """Lines from a pipe, read with os.read so nothing hides from select()."""

    def __init__(self, fd, what):
        self.fd, self.what, self.buf, self.eof = fd, what, b"", False

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{self.what}: nothing within {TIMEOUT}s; had {self.buf!r}")
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
            self._fill(deadline)
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def read_until_eof(self, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while not self.eof:
            self._fill(deadline)
        rest, self.buf = self.buf, b""
        return rest.decode(errors="replace")


class Prog:
    """The test program (data/prog.c): "ready PID", then one reply line per
    command on stdin."""

    def __init__(self, path):
        self.proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env(), cwd="/")
        self.out = LineReader(self.proc.stdout.fileno(), path)
        self.pid = self.proc.pid
        line = self.out.readline()
        assert line == f"ready {self.pid}", line

    def ask(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()
        return self.out.readline()

    def enabled(self):
        """{"tick": bool, "lib": bool} from the _ENABLED() macros."""
        words = self.ask("enabled").split()
        assert words[0] == "enabled", words
        return {k: v == "1" for k, v in (w.split("=") for w in words[1:])}

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=TIMEOUT)
        self.proc.stdin.close()
        self.proc.stdout.close()


def parse_listing(text):
    """`xprobes list` / `sites` output -> {object: [lines without indent]}."""
    objs, cur = {}, None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" ") and line.endswith(":"):
            cur = line[:-1]
            objs[cur] = []
        else:
            assert cur is not None, line
            objs[cur].append(line.strip())
    return objs


def skip_unless_root_bpftrace():
    if not have("bpftrace"):
        pytest.skip("bpftrace is not installed")
    if os.geteuid() != 0:
        pytest.skip("bpftrace needs root")
