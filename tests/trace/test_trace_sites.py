# SPDX-License-Identifier: MIT
"""XProbes site hits inside traced functions appear in `trace cat`'s graph
at the place they happened, as /* name */ comments (lib/trace/trace_sitehits.c):
prog_sites's outer() calls inner() three times and each inner() hits the
site tracetest_inner_hit once.  Stopped, hits are not recorded; started
again, the same handlers are put back."""
import os
import re
import select
import shutil
import subprocess

import pytest

from tracefix import TIMEOUT, XPROBES, LineProgram, env, fixture


def xp(pid, *args):
    r = subprocess.run([XPROBES, str(pid), *args], capture_output=True, text=True,
                       timeout=TIMEOUT, env=env())
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_site_hits_in_the_graph(cc):
    p = LineProgram([fixture(f"prog_sites-{cc}")])
    try:
        started = xp(p.pid, "trace", "start", "--no-libcall")
        assert started.splitlines() == ["tracing 3 functions", "and the hits of 1 XProbes site"]
        p.say("run")
        assert p.line() == "done"
        xp(p.pid, "trace", "stop")
        graph = [line.split("|", 1)[1].rstrip() for line in
                 xp(p.pid, "trace", "cat").splitlines() if "|" in line]
        body = [line for line in graph if line.strip() and "Function Graph" not in line]
        assert body == ["  outer() {"] + [
            "    inner() {", "      /* tracetest_inner_hit */", "    }"] * 3 + ["  }"], graph
        # Stopped: hits are not recorded; started again, they are.
        xp(p.pid, "trace", "clear")
        p.say("run")
        assert p.line() == "done"
        assert "tracetest_inner_hit" not in xp(p.pid, "trace", "cat")
        xp(p.pid, "trace", "start", "--no-libcall")
        p.say("run")
        assert p.line() == "done"
        xp(p.pid, "trace", "stop")
        assert xp(p.pid, "trace", "cat").count("/* tracetest_inner_hit */") == 3
    finally:
        p.close()


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_bpftrace_usdt_survives_the_page_swaps(cc):
    """trace start and stop swap the pages holding inner() (lib/trace/trace_patch.c)
    while bpftrace has a uprobe on the USDT site inside it: the copy maps the
    same file and offset, so the kernel keeps the uprobe and bpftrace counts
    every hit, before, during and after tracing.  bpftrace exits by itself
    at the count expected; a hit lost would leave it waiting (the timeout)."""
    if os.geteuid() != 0 or not shutil.which("bpftrace"):
        pytest.skip("needs root and bpftrace")
    prog = fixture(f"prog_sites-{cc}")
    p = LineProgram([prog])
    runs = 5 * 3
    bt = subprocess.Popen(
        ["bpftrace", "-B", "line", "-p", str(p.pid), "-e",
         'BEGIN { printf("ready\\n"); } '
         f"usdt:{prog}:tracetest_inner_hit {{ @hits = count(); @n++; "
         f"if (@n == {runs * 3}) {{ exit(); }} }}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # "Attaching N probes..." comes first; BEGIN runs once all are attached.
        while True:
            ready, _, _ = select.select([bt.stdout], [], [], TIMEOUT)
            line = bt.stdout.readline() if ready else ""
            assert line, "bpftrace did not start"
            if line.strip() == "ready":
                break

        def run(n):
            for _ in range(n):
                p.say("run")
                assert p.line() == "done"

        run(5)
        xp(p.pid, "trace", "start", "--no-libcall")
        run(5)
        xp(p.pid, "trace", "stop")
        run(5)
        out, err = bt.communicate(timeout=TIMEOUT)
        assert re.search(rf"^@hits: {runs * 3}$", out, re.M), out + err
        assert "inner() {" in xp(p.pid, "trace", "cat")
    finally:
        if bt.poll() is None:
            bt.kill()
            bt.wait()
        p.close()
