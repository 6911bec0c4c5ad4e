# SPDX-License-Identifier: MIT
"""The agent holds no descriptor between switches (prog_fds): a program that
closes descriptors 3-99, as daemons do, and opens its log at 3 keeps its
log as it wrote it through the next `trace start` (the agent's
/proc/self/mem descriptor used to be there, and machine code went into
the log); a child that drops its uid after fork finds no /proc/PID/mem
descriptor and cannot change its parent's memory; a thread that closes
descriptors and opens its own at the numbers freed, over and over, while
tracing starts and stops, never has anything written into its file, and
the program runs on (a switch the race disturbs fails cleanly).

Every wait is on a line from the program or on a command's exit."""
import os
import re

import pytest

from tracefix import LineProgram, fixture, xprobes


def start_stop(pid):
    r = xprobes(pid, "trace start -b 64\n")
    assert r.returncode == 0 and re.search(r"^tracing \d+ functions$", r.stdout, re.M), \
        r.stdout + r.stderr
    r = xprobes(pid, "trace stop\n")
    assert r.returncode == 0 and "tracing stopped" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_log_at_a_reused_number_untouched(cc, tmp_path):
    t = LineProgram([fixture(f"prog_fds-{cc}")])
    try:
        start_stop(t.pid)  # any descriptor the agent would keep exists by now
        log = tmp_path / "prog.log"
        t.say(f"log {log}")
        assert t.line() == "log fd=3"
        start_stop(t.pid)
        start_stop(t.pid)
        assert log.read_bytes() == b"log\n"
        t.say("call")
        assert t.line() == "sum 8"
    finally:
        t.close()


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_child_cannot_write_into_its_parent(cc):
    t = LineProgram([fixture(f"prog_fds-{cc}")])
    try:
        start_stop(t.pid)
        r = xprobes(t.pid, "trace start -b 64\n")  # and while traced
        assert r.returncode == 0, r.stdout + r.stderr
        for traced in (True, False):
            t.say("fork")  # as root the child drops to 65534; else keeps its uid
            line = t.line()
            m = re.fullmatch(r"child mem=(-?\d+) wrote=(-?\d+) secret=0x([0-9a-f]+)", line)
            assert m, line
            assert m.group(1) == "0", line  # no /proc/PID/mem descriptor inherited
            assert m.group(2) == "0", line
            assert m.group(3) == "1122334455667788", line
            if traced:
                r = xprobes(t.pid, "trace stop\n")
                assert r.returncode == 0, r.stdout + r.stderr
    finally:
        t.close()


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_descriptor_churn_during_switches(cc, tmp_path):
    t = LineProgram([fixture(f"prog_fds-{cc}")])
    try:
        log = tmp_path / "churn.log"
        t.say(f"churn {log}")
        assert t.line() == "churning"
        outcomes = []
        for _ in range(40):
            for cmd in ("trace start -b 64\n", "trace stop\n"):
                r = xprobes(t.pid, cmd)
                outcomes.append((r.returncode, (r.stdout + r.stderr).strip()[:160]))
                assert t.p.poll() is None, outcomes[-1]
        t.say("unchurn")
        m = re.fullmatch(r"churned (\d+)", t.line())
        assert m and int(m.group(1)) > 0
        data = log.read_bytes()
        assert data and set(data) == {ord("x")}, data[:200]  # nothing of ours in it
        r = xprobes(t.pid, "trace stop\n")  # a stop the churn made fail works now
        assert r.returncode == 0, (r.stdout + r.stderr, outcomes)
        start_stop(t.pid)  # and switching works
        t.say("call")
        assert t.line() == "sum 8"
    finally:
        t.close()
