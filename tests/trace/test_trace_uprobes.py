# SPDX-License-Identifier: MIT
"""bpftrace's uprobes on the functions the tracer switches (tests/trace/
prog_uprobe.c, gcc and clang builds with the trace flags).

A uprobe decodes the instruction from the file, not the process: gcc's
file holds five 1-byte NOPs where the constructor joined one 5-byte NOP in
memory, and the kernel resumes one byte on.  The join (66 66 66 66 90) is
a NOP from every byte, so the program lives and bpftrace counts every
call.  With tracing on: a site carrying another tool's int3 is never
switched (start says so), and `trace status` says which switched sites
are no longer the tracer's call (a uprobe's removal puts clang's file NOP
back).  Waits are on lines from the programs and on process exits."""
import os
import re
import shutil
import subprocess

import pytest

from tracefix import TIMEOUT, XPROBES, LineProgram, fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("bpftrace"),
                                reason="needs root and bpftrace")


def xp(pid, *args):
    return subprocess.run([XPROBES, str(pid), *args], capture_output=True, text=True,
                          timeout=TIMEOUT)


def expected_sum(n):
    return sum(2 * (i & 7) + 1 for i in range(n))


def run(p, n):
    p.say(f"run {n}")
    assert p.line() == f"ran {n} sum {expected_sum(n)}"


class Bpftrace:
    """bpftrace counting hot() in p until it has seen n calls, then exiting
    (which removes the uprobe)."""

    def __init__(self, prog, pid, n):
        self.n = n
        self.p = subprocess.Popen(
            ["bpftrace", "-B", "line", "-p", str(pid), "-e",
             'BEGIN { printf("ready\\n"); } '
             f"uprobe:{prog}:hot {{ @hits = count(); @c++; if (@c == {n}) {{ exit(); }} }}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # "Attaching 1 probe..." comes first; BEGIN runs once it is attached.
        while True:
            line = self.p.stdout.readline()
            assert line, "bpftrace did not start: " + self.p.stderr.read()
            if line.strip() == "ready":
                break

    def finish(self):
        """Its exit, and the count it printed: every call seen."""
        out, err = self.p.communicate(timeout=TIMEOUT)
        assert re.search(rf"^@hits: {self.n}$", out, re.M), out + err

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_uprobe_on_an_untraced_build(cc):
    """Tracing off: gcc's build died of SIGILL at the first hit."""
    prog = fixture(f"prog_uprobe-{cc}")
    p = LineProgram([prog])
    bt = Bpftrace(prog, p.pid, 1000)
    try:
        run(p, 1000)
        bt.finish()
        run(p, 10)  # after the uprobe's removal too
    finally:
        bt.kill()
        p.close()


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_start_leaves_a_site_under_a_uprobe(cc):
    """bpftrace first, then trace start: hot() carries the uprobe's int3
    and is not switched, start and status say so, the program lives and
    bpftrace counts every call.  After the uprobe's removal, clang's entry
    is its NOP again and is traced at the next start; gcc's is 90 66 66 66
    90 (the kernel puts the file's one byte back), two instructions, and
    is never switched."""
    prog = fixture(f"prog_uprobe-{cc}")
    p = LineProgram([prog])
    bt = Bpftrace(prog, p.pid, 1000)
    try:
        r = xp(p.pid, "trace", "start")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "tracing 1 function\n" in r.stdout, r.stdout
        assert "(not traced: 1 function carrying another tool's int3 or call" in r.stdout
        st = xp(p.pid, "trace", "status").stdout
        assert "functions: 1 patched of 1 in 1 object" in st, st
        assert "1 function carrying another tool's int3" in st, st
        run(p, 1000)
        bt.finish()
        assert "hot()" not in xp(p.pid, "trace", "cat").stdout
        assert "1 function unpatched" in xp(p.pid, "trace", "stop").stdout
        r = xp(p.pid, "trace", "start")
        assert r.returncode == 0, r.stdout + r.stderr
        if cc == "clang":
            assert "tracing 2 functions" in r.stdout, r.stdout
            assert "not traced" not in r.stdout, r.stdout
        else:
            assert "tracing 1 function\n" in r.stdout, r.stdout
            assert "(not traced: 1 gcc-built function from which a uprobe was removed" \
                in r.stdout, r.stdout
        run(p, 10)
        calls = len(re.findall(r"\bhot\(\);", xp(p.pid, "trace", "cat").stdout))
        assert calls == (10 if cc == "clang" else 0)
    finally:
        bt.kill()
        p.close()


def test_a_glob_naming_only_a_function_under_a_uprobe_says_why():
    """-F or -A naming only hot(), which carries bpftrace's uprobe: nothing
    starts, and the message says such a function is not traced, rather
    than leaving the user to think the name is wrong."""
    prog = fixture("prog_uprobe-gcc")
    p = LineProgram([prog])
    bt = Bpftrace(prog, p.pid, 10)
    try:
        for args in (["-F", "hot"], ["-A", "hot@arg1"]):
            r = xp(p.pid, "trace", "start", *args)
            assert r.returncode == 1, r
            assert "no traced function" in r.stderr, r.stderr
            assert "xprobes: trace start: (not traced: 1 function carrying another tool's " \
                "int3 or call, a uprobe" in r.stderr, r.stderr
            assert "tracing: off" in xp(p.pid, "trace", "status").stdout
        run(p, 10)
        bt.finish()
    finally:
        bt.kill()
        p.close()


def test_status_sees_a_switched_site_undone_by_a_uprobe():
    """clang, tracing on, then bpftrace on hot(): the kernel runs the file's
    NOP instead of the tracer's call while the uprobe is there, and its
    removal puts the file's NOP back.  The program lives, bpftrace counts
    every call, and status never counts hot() as traced."""
    prog = fixture("prog_uprobe-clang")
    p = LineProgram([prog])
    bt = None
    try:
        r = xp(p.pid, "trace", "start")
        assert "tracing 2 functions" in r.stdout, r.stdout + r.stderr
        bt = Bpftrace(prog, p.pid, 1000)
        st = xp(p.pid, "trace", "status").stdout
        assert "functions: 1 patched of 1 in 1 object" in st, st
        assert re.search(r"^not traced: 1 function switched on, the first at 0x[0-9a-f]+: "
                         r"another tool's int3 or call is on it", st, re.M), st
        run(p, 1000)
        bt.finish()
        st = xp(p.pid, "trace", "status").stdout
        assert "functions: 1 patched of 2 in 1 object" in st, st
        assert re.search(r"^not traced: 1 function switched on, the first at 0x[0-9a-f]+: "
                         r"the NOP is back", st, re.M), st
        # Stop and start switch it again; status has nothing to say then.
        xp(p.pid, "trace", "stop")
        assert "tracing 2 functions" in xp(p.pid, "trace", "start").stdout
        run(p, 10)
        st = xp(p.pid, "trace", "status").stdout
        assert "functions: 2 patched of 2" in st and "not traced" not in st, st
        assert len(re.findall(r"\bhot\(\);", xp(p.pid, "trace", "cat").stdout)) == 10
    finally:
        if bt:
            bt.kill()
        p.close()
