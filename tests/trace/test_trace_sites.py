"""XProbes site hits inside traced functions appear in `trace cat`'s graph
at the place they happened, as /* name */ comments (lib/trace_sitehits.c):
prog_sites's outer() calls inner() three times and each inner() hits the
site tracetest_inner_hit once.  Stopped, hits are not recorded; started
again, the same handlers are put back."""
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
        started = xp(p.pid, "trace", "start")
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
        xp(p.pid, "trace", "start")
        p.say("run")
        assert p.line() == "done"
        xp(p.pid, "trace", "stop")
        assert xp(p.pid, "trace", "cat").count("/* tracetest_inner_hit */") == 3
    finally:
        p.close()
