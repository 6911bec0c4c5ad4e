# SPDX-License-Identifier: MIT
"""A library dlopen()ed while tracing: with every function
traced (no -F/-N), its functions are patched by the time dlopen returns,
as ftrace enables a module's functions when it loads, and its calls appear
in the graph under their names; with a -F selection (resolved to addresses
at start) they stay NOPs until the next start, as trace(1) says.

Every wait is on a line from the program or on a command's exit."""
import os
import re
import subprocess
import time

import pytest

from tracefix import TIMEOUT, XPROBES, LineProgram, env, fixture


class Late(LineProgram):
    def __init__(self, cc, lib="libtracee"):
        super().__init__([fixture(f"prog_late-{cc}"), fixture(f"{lib}-{cc}.so")])

    def xp(self, *args):
        r = subprocess.run([XPROBES, str(self.pid), *args], capture_output=True, text=True,
                           timeout=TIMEOUT, env=env())
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r.stdout

    def load(self, how="load"):
        self.say(how)
        assert self.line() == "loaded"

    def call(self):
        self.say("call")
        assert self.line() == "sum=14"  # 0 + 1 + 4 + 9


@pytest.mark.parametrize("cc,how", [("gcc", "load"), ("clang", "load"),
                                    ("gcc", "load-masked")])
def test_library_loaded_while_tracing_everything_is_traced(cc, how):
    """load-masked: the thread calling dlopen() blocks every signal, SIGTRAP
    included; it patches and meets no site meanwhile, so that is no reason
    to refuse."""
    t = Late(cc)
    try:
        t.xp("trace", "start")
        t.load(how)
        # Patched as it loaded; had the agent been busy just then, by its
        # next command at the latest (every command rescans first): so by
        # this status, whatever the timing.
        status = t.xp("trace", "status")
        t.call()
        t.xp("trace", "stop")
        graph = t.xp("trace", "cat")
        assert "late_caller() {" in graph, graph
        assert "tracee_sum_squares() {" in graph, graph
        assert graph.count("tracee_square();") == 4, graph
        assert "tracee_untraced" not in graph  # opted out, in the library too
        # While tracing, every function of both objects was patched...
        m = re.search(r"^functions: (\d+) patched of (\d+) in (\d+) objects$", status, re.M)
        assert m and m.group(1) == m.group(2) and int(m.group(3)) >= 2, status
        # ...and after the stop none is.
        assert re.search(r"^functions: 0 patched of", t.xp("trace", "status"), re.M)
    finally:
        t.close()


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_library_loaded_under_a_selection_is_not_traced(cc):
    t = Late(cc)
    try:
        t.xp("trace", "start", "-F", "late_*")
        t.load()
        t.xp("trace", "status")  # the agent has seen the library
        t.call()
        t.xp("trace", "stop")
        graph = t.xp("trace", "cat")
        assert "late_caller();" in graph, graph  # a leaf now: its callee is untraced
        assert "tracee_" not in graph, graph
        # The next start traces it.
        t.xp("trace", "start")
        t.call()
        t.xp("trace", "stop")
        assert "tracee_sum_squares() {" in t.xp("trace", "cat")
    finally:
        t.close()


def test_a_look_while_the_library_is_still_loading_does_not_lose_it(tmp_path, monkeypatch):
    """The agent looks at the objects (a command's rescan) while dlopen() is
    still running the constructor of a library the traced one needs: the
    traced library is mapped, its gcc entries not yet NOPs, so nothing of it
    can be patched then.  The rescan at the end of dlopen() patches it."""
    flag = tmp_path / "slow"
    flag.write_text("")
    monkeypatch.setenv("XP_SLOW_FILE", str(flag))
    t = Late("gcc", "libtracee_dep")
    try:
        t.xp("trace", "start")
        t.say("load")  # dlopen() waits in libslowdep's constructor
        deadline = time.monotonic() + 60  # catches a hang only
        while not os.path.exists(str(flag) + ".in"):
            assert time.monotonic() < deadline, "the constructor never ran"
            time.sleep(0.01)  # polling a file's existence
        during = t.xp("trace", "status")
        m = re.search(r"^functions: (\d+) patched of (\d+)", during, re.M)
        assert m and m.group(1) == m.group(2), during  # the new entries are not counted yet
        flag.unlink()
        assert t.line() == "loaded"
        status = t.xp("trace", "status")
        m = re.search(r"^functions: (\d+) patched of (\d+) in (\d+) objects$", status, re.M)
        assert m and m.group(1) == m.group(2) and int(m.group(3)) >= 2, status
        t.call()
        t.xp("trace", "stop")
        assert "tracee_sum_squares() {" in t.xp("trace", "cat")
    finally:
        t.close()
