# SPDX-License-Identifier: MIT
"""Programs built with plain -fpatchable-function-entry=5:
no note, no archive, no agent linked; `xprobes --inject PID trace
start` finds their entries by section header (lib/trace/trace_plain.c).
clang's entries (one 5-byte NOP) are traced; gcc's (five 1-byte NOPs)
cannot be switched while threads run, and start says exactly what the
object lacks; a file whose build id is not the mapping's is not used.
Waits are on lines from the program and on exits."""
import os
import re
import subprocess

import pytest

from tracefix import TIMEOUT, XPROBES, LineProgram

HERE = os.path.dirname(os.path.abspath(__file__))


def build(tmp_path, cc, *flags):
    out = str(tmp_path / f"prog_plain-{cc}")
    subprocess.run([cc, "-O2", "-g", "-fpatchable-function-entry=5", *flags, "-o", out,
                    os.path.join(HERE, "prog_plain.c")], check=True)
    return out


def xp(pid, *args):
    return subprocess.run([XPROBES, "--inject", str(pid), *args], capture_output=True,
                          text=True, timeout=TIMEOUT)


@pytest.mark.parametrize("pie", [[], ["-fno-pie", "-no-pie"]], ids=["pie", "no-pie"])
def test_clang_plain_build_is_traced_after_inject(tmp_path, pie):
    p = LineProgram([build(tmp_path, "clang", *pie)])
    try:
        r = xp(p.pid, "trace", "start")
        assert r.returncode == 0 and "tracing 3 functions" in r.stdout, r.stdout + r.stderr
        p.say("run")
        assert p.line() == "sum 320"
        cat = subprocess.run([XPROBES, str(p.pid), "trace", "cat"], capture_output=True,
                             text=True, timeout=TIMEOUT)
        assert cat.returncode == 0, cat.stderr
        assert len(re.findall(r"\|  mid\(\) \{", cat.stdout)) == 10, cat.stdout
        assert len(re.findall(r"\|    leaf\(\);", cat.stdout)) == 20, cat.stdout
        stop = subprocess.run([XPROBES, str(p.pid), "trace", "stop"], capture_output=True,
                              text=True, timeout=TIMEOUT)
        assert "3 functions unpatched" in stop.stdout, stop.stdout + stop.stderr
        p.say("run")  # untraced again, and right
        assert p.line() == "sum 320"
    finally:
        p.close()


def test_gcc_plain_build_says_what_it_lacks(tmp_path):
    prog = build(tmp_path, "gcc")
    p = LineProgram([prog])
    try:
        r = xp(p.pid, "trace", "start")
        assert r.returncode != 0
        assert f"3 functions of {os.path.realpath(prog)} start with gcc's five one-byte NOPs" \
            in r.stderr, r.stderr
        assert "libxprobes_trace.a" in r.stderr and "clang" in r.stderr
        p.say("run")
        assert p.line() == "sum 320"
    finally:
        p.close()


def test_plain_build_without_build_id_is_not_read(tmp_path):
    """Nothing tells that the file is still the one mapped: not used."""
    p = LineProgram([build(tmp_path, "clang", "-Wl,--build-id=none")])
    try:
        r = xp(p.pid, "trace", "start")
        assert r.returncode != 0 and "no instrumented function" in r.stderr, r.stderr
        p.say("run")
        assert p.line() == "sum 320"
    finally:
        p.close()
