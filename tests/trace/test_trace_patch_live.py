# SPDX-License-Identifier: MIT
"""Switching a live program's patch sites through the agent: prog_flip
(gcc and clang builds, with a traced library of the same compiler
dlopen()ed) has two threads calling traced functions flat out (recursion,
floats, a variadic function, the library's functions) while `trace start`
and `trace stop` alternate 1,000 times: it must neither crash nor compute
a wrong result, and every switch must answer.

Every wait is on a line from the program or on a command's exit."""
import re

import pytest

from tracefix import LineProgram, fixture, xprobes


class Flip(LineProgram):
    def __init__(self, cc):
        super().__init__([fixture(f"prog_flip-{cc}"), fixture(f"libtracee-{cc}.so")])

    def check(self):
        self.say("check")
        m = re.fullmatch(r"rounds=(\d+) bad=(\d+)", self.line())
        assert m
        return int(m.group(1)), int(m.group(2))


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


class Masked(LineProgram):
    def __init__(self, cc):
        super().__init__([fixture(f"prog_masked-{cc}")])

    def check(self):
        self.say("check")
        m = re.fullmatch(r"rounds=(\d+) handled=(\d+) bad=(\d+)", self.line())
        assert m
        return tuple(int(g) for g in m.groups())


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_start_stop_while_signals_blocked(cc):
    """A thread that blocks every signal around traced calls, and
    a handler with a full mask that calls traced code, survive 300 starts
    and stops (the int3 scheme killed it within two), and are traced."""
    t = Masked(cc)
    try:
        r = xprobes(t.pid, "trace start -b 64\ntrace stop\n" * 300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert len(re.findall(r"^tracing (\d+) functions$", r.stdout, re.M)) == 300, r.stdout[-2000:]
        rounds0, handled0, bad0 = t.check()
        r = xprobes(t.pid, "trace start -F work -F other -b 64\n")
        assert r.returncode == 0, r.stdout + r.stderr
        rounds1, handled1, _ = t.check()
        while rounds1 == rounds0 or handled1 == handled0:  # a round and a signal, traced
            rounds1, handled1, _ = t.check()
        r = xprobes(t.pid, "trace stop\ntrace cat\n")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "work();" in r.stdout and "other();" in r.stdout, r.stdout[-2000:]
        assert bad0 == 0 and t.check()[2] == 0
        assert t.p.poll() is None
    finally:
        t.close()
