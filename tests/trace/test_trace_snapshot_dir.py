# SPDX-License-Identifier: MIT
"""`trace snapshot -o DIR` (tools/xprobes/trace_snapshot_dir.c): a flight
recorder's content as a uftrace data directory, which uftrace replay and
`xprobes trace cat -d DIR` read; tracing goes on."""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from tests.integration.xp import BUILD, TIMEOUT  # noqa: E402
from tests.trace.test_trace_record import CALLS, FLOATS, Prog  # noqa: E402

UFTRACE = shutil.which("uftrace")
XPROBES = os.path.join(BUILD, "xprobes")


@pytest.fixture(params=["gcc", "clang"])
def prog(request):
    p = Prog(os.path.join(BUILD, "tests", "trace", f"prog_record-{request.param}"))
    yield p
    p.close()


def snapshot(pid, *args):
    return subprocess.run([XPROBES, str(pid), "trace", "snapshot", *args],
                          capture_output=True, text=True, timeout=TIMEOUT)


def test_snapshot_dir_holds_the_newest_calls(prog, tmp_path):
    prog.trace("start --overwrite -b 1")  # 64 records: the floats go
    prog.ask("floats")
    for _ in range(10):
        assert prog.ask("calls") == "calls 11"
    out = tmp_path / "snap"
    r = snapshot(prog.pid, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "records of 1 thread in" in r.stderr, r.stderr
    assert prog.status()["tracing"] == "on"  # a snapshot does not stop it
    # Our reader: the last calls, nested, and none of the overwritten floats.
    cat = subprocess.run([XPROBES, "trace", "cat", "-d", str(out)], capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert cat.returncode == 0, cat.stderr
    assert "calls_top() {" in cat.stdout and "calls_leaf();" in cat.stdout, cat.stdout
    assert not [f for f in FLOATS if f + "()" in cat.stdout], cat.stdout
    # uftrace's: the same functions, named.
    if UFTRACE:
        rep = subprocess.run([UFTRACE, "replay", "-d", str(out)], capture_output=True,
                             text=True, timeout=TIMEOUT)
        assert rep.returncode == 0, rep.stderr
        names = {n for _, n in CALLS}
        for n in names:
            assert n + "()" in rep.stdout, rep.stdout
        assert "calls_top() {" in rep.stdout, rep.stdout
    # An existing non-empty directory is not written over.
    again = snapshot(prog.pid, "-o", str(out))
    assert again.returncode != 0 and again.stderr.startswith("xprobes: "), again.stderr
    prog.trace("stop")


def test_snapshot_dir_usage(prog, tmp_path):
    prog.trace("start --overwrite -b 1")
    r = snapshot(prog.pid, "-o", str(tmp_path / "x"), "-F", "calls_*")
    assert r.returncode == 1 and r.stderr.startswith("xprobes: trace snapshot: -o DIR takes"), r.stderr
    assert not (tmp_path / "x").exists()
    # --format keeps -o a file of the printed view, as before.
    f = tmp_path / "graph.txt"
    prog.ask("calls")
    r = snapshot(prog.pid, "--format", "graph", "-o", str(f))
    assert r.returncode == 0 and "calls_top() {" in f.read_text(), r.stderr
    prog.trace("stop")
