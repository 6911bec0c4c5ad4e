# SPDX-License-Identifier: MIT
"""A big program (tests/trace/gen_bigprog.py: 2,000 functions, one a page,
the worst case for switching by pages): starting and stopping every
function leaves the process with the mappings it had (the text's own
lines the same before, while traced and after; nothing more after each
of several cycles), computes the same throughout, and a start that would
pass vm.max_map_count is refused before anything changes (the program
itself maps pages until few are left: the limit is global, not ours to
lower).  The 20,000-function figures are bench/trace_big.py's.

Every wait is on a line from the program or on a command's exit."""
import os
import re
import subprocess
import sys

import pytest

from tracefix import BUILD, HERE, LineProgram, xprobes

sys.path.insert(0, HERE)
from gen_bigprog import expected_sum, source  # noqa: E402

N = 2000


def build(tmp_path, cc, n=N):
    src = tmp_path / "big.c"
    src.write_text(source(n))
    out = tmp_path / f"big-{cc}"
    cmd = [cc, "-std=gnu11", "-O1", "-I" + os.path.join(os.path.dirname(os.path.dirname(HERE)),
                                                         "include"),
           "-fpatchable-function-entry=5", "-o", str(out), str(src),
           "-Wl,-u,__xprobes_trace_anchor", os.path.join(BUILD, "libxprobes_trace.a"),
           "-L" + BUILD, "-Wl,-rpath," + BUILD, "-Wl,--no-as-needed", "-lxprobes",
           "-lpthread", "-ldl"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return str(out)


class Big(LineProgram):
    def maps(self, cmd="maps"):
        self.say(cmd)
        m = re.fullmatch(r"maps (\d+) (\d+)", self.line())
        assert m
        return int(m.group(1)), int(m.group(2))

    def total(self):
        self.say("call")
        m = re.fullmatch(r"sum (\d+)", self.line())
        assert m
        return int(m.group(1))

    def own_lines(self, path):
        """Its mappings of its own file, but a spare (---p)."""
        with open(f"/proc/{self.pid}/maps") as f:
            return [line for line in f if line.rstrip().endswith(path) and " ---p " not in line]


def start(pid):
    return xprobes(pid, "trace start --no-libcall -b 64\n")  # the functions: what switching changes


def stop(pid):
    r = xprobes(pid, "trace stop\n")
    assert r.returncode == 0 and "tracing stopped" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_mappings_kept_over_cycles(cc, tmp_path):
    path = build(tmp_path, cc)
    t = Big([path])
    try:
        before, _ = t.maps()
        own = t.own_lines(path)
        afters = []
        for _ in range(4):
            r = start(t.pid)
            m = re.search(r"^tracing (\d+) functions$", r.stdout, re.M)
            assert r.returncode == 0 and m and int(m.group(1)) >= N, r.stdout + r.stderr
            during, _ = t.maps()
            assert t.own_lines(path) == own  # the text is one mapping, as it was
            assert t.total() == expected_sum(N)
            stop(t.pid)
            after, _ = t.maps()
            assert t.own_lines(path) == own
            assert t.total() == expected_sum(N)
            assert during <= after + 2, (before, during, after)  # a spare; a page swapped each
            afters.append(after)                                 # was N more
        # A trampoline, the agent's thread arena and a ring: a few, once.
        assert afters[0] <= before + 6, (before, afters)
        assert max(afters[1:]) <= afters[0], (before, afters)
    finally:
        t.close()


def test_refused_near_the_map_limit(tmp_path):
    path = build(tmp_path, "gcc")
    t = Big([path])
    try:
        own = t.own_lines(path)
        count, limit = t.maps("fill 6")
        assert count >= limit - 8, (count, limit)
        r = start(t.pid)
        assert "vm.max_map_count" in r.stdout + r.stderr, r.stdout + r.stderr
        assert "nothing is traced" in r.stdout + r.stderr
        assert t.total() == expected_sum(N)
        assert t.own_lines(path) == own
        count, limit = t.maps("unfill")
        assert count < limit // 2
        r = start(t.pid)
        assert r.returncode == 0 and re.search(r"^tracing \d+ functions$", r.stdout, re.M), \
            r.stdout + r.stderr
        assert t.total() == expected_sum(N)
        stop(t.pid)
    finally:
        t.close()
