"""Switching a live program's patch sites through the agent: prog_flip
(gcc and clang builds, with a traced library of the same compiler
dlopen()ed) has two threads calling traced functions flat out (recursion,
floats, a variadic function, the library's functions) while `trace start`
and `trace stop` alternate 1,000 times: it must neither crash nor compute
a wrong result, and every switch must answer.

Every wait is on a line from the program or on a command's exit."""
import os
import re
import select
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD") or os.path.join(REPO, "build")
XPROBES = os.path.join(BUILD, "xprobes")
TIMEOUT = 120  # a bound on every wait, never a synchronisation


def fixture(name):
    path = os.path.join(BUILD, "tests", "trace", name)
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: run `make fixtures`")
    return path


def env():
    e = dict(os.environ)
    e.pop("XPROBES_AGENT", None)
    e.pop("LD_PRELOAD", None)
    return e


class Flip:
    def __init__(self, cc):
        self.p = subprocess.Popen([fixture(f"prog_flip-{cc}"), fixture(f"libtracee-{cc}.so")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=env())
        line = self.line()
        assert line.startswith("ready "), line
        self.pid = int(line.split()[1])

    def line(self):
        ready, _, _ = select.select([self.p.stdout], [], [], TIMEOUT)
        assert ready, "no line from the program"
        return self.p.stdout.readline().strip()

    def check(self):
        self.p.stdin.write("check\n")
        self.p.stdin.flush()
        m = re.fullmatch(r"rounds=(\d+) bad=(\d+)", self.line())
        assert m
        return int(m.group(1)), int(m.group(2))

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
        assert self.p.wait(timeout=TIMEOUT) == 0


def xprobes(pid, script):
    return subprocess.run([XPROBES, str(pid)], input=script, capture_output=True, text=True,
                          timeout=TIMEOUT, env=env())


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_objects_listed(cc):
    t = Flip(cc)
    try:
        r = xprobes(t.pid, "trace objects\n")
        assert r.returncode == 0, r.stdout + r.stderr
        objs = {m.group(2): int(m.group(1))
                for m in re.finditer(r"^object base=0x[0-9a-f]+ sites=(\d+) table=0x[0-9a-f]+ "
                                     r"path=(\S+)$", r.stdout, re.M)}
        lib = [p for p in objs if p.endswith(f"libtracee-{cc}.so")]
        prog = [p for p in objs if p.endswith(f"prog_flip-{cc}")]
        assert lib and objs[lib[0]] == 2, r.stdout  # tracee_untraced opted out
        assert prog and objs[prog[0]] >= 4, r.stdout  # fib, blend, variadic_sum, caller, main
    finally:
        t.close()


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_start_stop_1000_times_under_load(cc):
    t = Flip(cc)
    try:
        rounds0, bad0 = t.check()
        r = xprobes(t.pid, "trace start -b 64\ntrace stop\n" * 1000)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        started = re.findall(r"^tracing (\d+) functions$", r.stdout, re.M)
        stopped = re.findall(r"^tracing stopped \((\d+) functions unpatched\)$", r.stdout, re.M)
        assert len(started) == 1000 and len(stopped) == 1000, r.stdout[-2000:]
        assert all(int(n) >= 6 for n in started)
        assert started == stopped  # every site patched was patched back
        rounds1, bad1 = t.check()
        assert bad0 == 0 and bad1 == 0
        assert rounds1 > rounds0  # the threads ran through the switches
        assert t.p.poll() is None
    finally:
        t.close()
