# SPDX-License-Identifier: MIT
"""-A/-R/-a across xprobes invocations: `xprobes PID trace start -A ...` in
one, `xprobes PID trace cat` (or `trace snapshot -o DIR`) in another.  The
start leaves its options with the agent (`trace args --options`); the
later session asks for them (`trace args show`) and binds them as the
start did, so it shows the values the start's own session would.  A /p
value pointing into a known function shows as &name, as uftrace replay
shows it.

Every wait is on a line from the program or a command's exit."""
import re
import subprocess

from tracefix import TIMEOUT, XPROBES, LineProgram, env, fixture
from test_trace_args import EXPECTED, SPECS, cat_lines, needs_uftrace, replay


def xp(pid, *args):
    r = subprocess.run([XPROBES, str(pid), *args], capture_output=True, text=True,
                       timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    return r


def started(opts, prog="prog_args-gcc"):
    """The fixture waiting, traced with opts by one invocation, run once."""
    prog = LineProgram([fixture(prog), "wait"])
    r = xp(prog.pid, "trace", "start", *opts)
    assert "with the arguments or return values of" in r.stdout, r.stdout
    prog.say("run")
    assert prog.line().startswith("done ")
    return prog


def test_later_cat_shows_the_values():
    prog = started(SPECS)
    try:
        assert cat_lines(xp(prog.pid, "trace", "cat").stdout) == EXPECTED
        # The live chrome view carries them too.
        chrome = xp(prog.pid, "trace", "cat", "--format", "chrome").stdout
        assert '"args":{"arguments":"(0xdeadbeef, 0xff, 0x1234)","retval":"0xdeadbfef"}' in chrome \
            or '"arguments":"(0xdeadbeef, 0xff, 0x1234)"' in chrome, chrome[:2000]
        xp(prog.pid, "trace", "stop")
    finally:
        prog.close()


@needs_uftrace
def test_later_snapshot_dir_replays_the_values(tmp_path):
    prog = started(SPECS)
    try:
        d = str(tmp_path / "snap")
        xp(prog.pid, "trace", "snapshot", "-o", d)
        assert replay(d) == EXPECTED
        xp(prog.pid, "trace", "stop")
    finally:
        prog.close()


@needs_uftrace
def test_later_session_with_auto_args(tmp_path):
    """-a: the later session reads the objects' DWARF as the start did
    (str's string, many's longs), and writes the .dbg files."""
    prog = started(["-a", "-R", "neg@retval"])
    try:
        lines = cat_lines(xp(prog.pid, "trace", "cat").stdout)
        assert '1 str("hello", 1) = 1;' in lines, lines
        assert "1 many(1, -2, 3, -4, 5, -6, 7) = -4;" in lines, lines  # 8 items at most
        assert "1 neg() = -42;" in lines, lines
        d = str(tmp_path / "snap")
        xp(prog.pid, "trace", "snapshot", "-o", d)
        assert replay(d) == lines
        xp(prog.pid, "trace", "stop")
    finally:
        prog.close()


def test_a_start_without_specs_forgets_them():
    prog = started(SPECS)
    try:
        xp(prog.pid, "trace", "stop")
        xp(prog.pid, "trace", "start", "-F", "hexes")
        assert xp(prog.pid, "trace", "args", "show").stdout == "options: none\n"
        prog.say("run")
        assert prog.line().startswith("done ")
        lines = cat_lines(xp(prog.pid, "trace", "cat", "-F", "calls", "-F", "hexes").stdout)
        assert "1 hexes();" in lines, lines
        xp(prog.pid, "trace", "stop")
    finally:
        prog.close()


def test_glob_options_travel_whole():
    """A glob pattern comes back as given, and matches as it did."""
    prog = LineProgram([fixture("prog_args-gcc"), "wait"])
    try:
        xp(prog.pid, "trace", "start", "-A", "hex*@arg1/x", "-R", "neg@retval")
        shown = xp(prog.pid, "trace", "args", "show").stdout
        assert shown == "options: -A hex*@arg1/x -R neg@retval\n", shown
        prog.say("run")
        assert prog.line().startswith("done ")
        lines = cat_lines(xp(prog.pid, "trace", "cat").stdout)
        assert "1 hexes(0xdeadbeef);" in lines, lines
        assert "1 neg() = -42;" in lines, lines
        xp(prog.pid, "trace", "stop")
    finally:
        prog.close()


@needs_uftrace
def test_function_pointer_shows_as_its_name(tmp_path):
    """/p: a pointer to a known function (or into one) is &name, as
    uftrace replay shows it; another pointer stays hex."""
    prog = LineProgram([fixture("prog_args-gcc"), "wait"])
    try:
        xp(prog.pid, "trace", "start", "-A", "fnptr@arg1/p,arg2")
        prog.say("fp")
        assert prog.line().startswith("done ")
        cat = xp(prog.pid, "trace", "cat").stdout
        got = re.findall(r"fnptr\((.*)\);", cat)
        assert got[:2] == ["&ints, 1", "&ints, 2"], cat
        assert re.fullmatch(r"0x[0-9a-f]+, 3", got[2]), cat
        d = str(tmp_path / "snap")
        xp(prog.pid, "trace", "snapshot", "-o", d)
        r = subprocess.run(["uftrace", "replay", "-d", d], capture_output=True, text=True,
                           timeout=TIMEOUT)
        theirs = re.findall(r"fnptr\((.*)\);", r.stdout)
        assert theirs == got, r.stdout
        xp(prog.pid, "trace", "stop")
    finally:
        prog.close()
