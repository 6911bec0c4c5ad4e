# SPDX-License-Identifier: MIT
"""Arguments and return values (-A/-R, uftrace's syntax) on
tests/trace/prog_args.c: integers of each size and signedness, hex,
chars, strings (empty, NULL, a pointer to nowhere, one longer than any
recorder keeps, one with quotes and a newline), float arguments and a
float return, eight arguments (two on the stack), a library call's string
and result, return values.

- `xprobes trace -o DIR` must read back in `uftrace replay`, `report` and
  `dump --chrome` as uftrace's own recording of the -pg build with the
  same options does, times and tids aside;
- `xprobes trace cat -d` shows both recordings as uftrace replay does;
- the run form's printed trace, and a session's `trace cat` and `trace
  snapshot -o DIR` after its `trace start -A`, show them;
- bad specs are usage errors (exit 2, the program not run); a pattern that
  names nothing is said.

Every wait is on a line from the program or a process exit."""
import json
import os
import re
import select
import shutil
import subprocess

import pytest

from tracefix import TIMEOUT, XPROBES, LineProgram, env, fixture

UFTRACE = shutil.which("uftrace")
needs_uftrace = pytest.mark.skipif(not UFTRACE, reason="uftrace is not installed")

SPECS = [
    "-A", "ints@arg1/i8,arg2/i16,arg3/i32,arg4,arg5/u8,arg6/u32", "-R", "ints@retval/i32",
    "-A", "hexes@arg1/x,arg2/x8,arg3/p", "-R", "hexes@retval/x",
    "-A", "chr@arg1/c,arg2/c",
    "-A", "str@arg1/s,arg2",
    "-A", "fl@fparg1,fparg2/32", "-R", "fl@retval/f64",
    "-A", "many@arg1,arg2,arg3,arg4,arg5,arg6,arg7,arg8",
    "-R", "neg@retval",
    "-A", "strtol@arg1/s,arg2/p,arg3/i32", "-R", "strtol@retval",
    "-R", "calls@retval",
]

# What uftrace replay shows of calls() (uftrace v0.13 on its own recording).
EXPECTED = [
    '0 calls() {',
    '1 ints(-5, -300, -70000, 0xfffffffed5fa0e00, 200, 0xee6b2800) = -1000070105;',
    '1 ints(1, 2, 3, 4, 5, 6) = 21;',
    '1 hexes(0xdeadbeef, 0xff, 0x1234) = 0xdeadbfef;',
    "1 chr('A', 'z');",
    '1 str("hello", 1);',
    '1 str("", 2);',
    '1 str("NULL", 3);',
    '1 str("<0x8>", 4);',
    '1 str("' + "x" * 95 + '...", 5);',
    '1 str("tab\there "q" back\\slash\\n", 6);',
    '1 fl(1.500000, 2.250000) = 3.375000;',
    '1 fl(-0.125000, 10000000000.000000) = -1250000000.000000;',
    '1 many(1, -2, 3, -4, 5, -6, 7, -8);',
    '1 neg() = -42;',
    '1 strtol("1234", 0, 10) = 1234;',
    '0 } = 0x58906d1f; /* calls */',
]


def calls_part(lines):
    """The lines of calls() ("DEPTH body", depth from calls), its own
    first; a call another thread or an event split is joined again."""
    out, base = [], None
    for depth, body in lines:
        if base is None:
            if body.startswith("calls("):
                base = depth
                out.append(f"0 {body}")
            continue
        if "/* linux:" in body:
            continue
        m = re.match(r"\} /\* (\w+) \*/$", body)
        if m and out and re.match(rf"{depth - base} {m.group(1)}\(.*\) \{{$", out[-1]):
            out[-1] = out[-1][:-2] + ";"
            continue
        out.append(f"{depth - base} {body}")
        if depth == base:
            break
    return out


def replay(d):
    r = subprocess.run([UFTRACE, "replay", "-d", d], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    lines = []
    for line in r.stdout.splitlines():
        m = re.match(r"^.*\[\s*\d+\] \| (\s*)(.*)$", line)
        if m:
            lines.append((len(m.group(1)) // 2, m.group(2)))
    return calls_part(lines)


def cat(d):
    r = subprocess.run([XPROBES, "trace", "cat", "-d", d], capture_output=True, text=True,
                       timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    return cat_lines(r.stdout)


def cat_lines(text):
    lines = []
    for line in text.splitlines():
        m = re.match(r"^.{13}\|  (\s*)(.*)$", line)
        if m:
            lines.append((len(m.group(1)) // 2, m.group(2)))
    return calls_part(lines)


def ours(tmp_path, prog, *opts):
    d = str(tmp_path / "ours")
    r = subprocess.run([XPROBES, "trace", *opts, "-o", d, "--", prog], capture_output=True,
                       text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok "), r.stdout
    return d


def theirs(tmp_path, *opts, name="theirs"):
    d = str(tmp_path / name)
    subprocess.run([UFTRACE, "record", "-d", d, *opts, fixture("prog_args-pg")],
                   capture_output=True, timeout=TIMEOUT, check=True)
    return d


@needs_uftrace
@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_replay_as_uftrace_shows_its_own(tmp_path, cc):
    mine = ours(tmp_path, fixture(f"prog_args-{cc}"), *SPECS)
    theirs_ = theirs(tmp_path, *SPECS)
    assert replay(theirs_) == EXPECTED  # what uftrace itself shows, as written above
    assert replay(mine) == EXPECTED


@needs_uftrace
def test_cat_reads_both_recordings_as_replay_shows_them(tmp_path):
    mine = ours(tmp_path, fixture("prog_args-gcc"), *SPECS)
    theirs_ = theirs(tmp_path, *SPECS)
    assert cat(mine) == EXPECTED
    assert cat(theirs_) == EXPECTED
    # uftrace's patterns are regexes (unanchored), ours globs; each read as its own.
    regex = theirs(tmp_path, "-A", "m.ny@arg8", "-A", "^neg$@arg1/x", name="regex")
    lines = cat(regex)
    assert "1 many(-8);" in lines and "1 neg(0);" not in lines, lines


@needs_uftrace
def test_report_and_chrome_take_our_recording(tmp_path):
    mine = ours(tmp_path, fixture("prog_args-gcc"), *SPECS)
    theirs_ = theirs(tmp_path, *SPECS)
    r = subprocess.run([UFTRACE, "report", "-d", mine], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0 and re.search(r"\b14\b.*\bstr\b|\bstr\b", r.stdout), r.stderr

    def args_of(d):
        r = subprocess.run([UFTRACE, "dump", "--chrome", "-d", d], capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        events = json.loads(r.stdout)["traceEvents"]
        return [(e["name"], e["ph"], json.dumps(e.get("args"), sort_keys=True))
                for e in events if e.get("name") in ("ints", "str", "fl", "strtol")]
    got = args_of(mine)
    assert got == args_of(theirs_)
    assert any('hello' in a for _, _, a in got), got
    # Our own chrome view: the same texts under the same keys, on one event a call.
    r = subprocess.run([XPROBES, "trace", "cat", "-d", mine, "--format", "chrome"],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    ev = [e for e in json.loads(r.stdout)["traceEvents"] if e.get("name") == "ints"]
    assert ev[0]["args"] == {"arguments": "(-5, -300, -70000, 0xfffffffed5fa0e00, 200, 0xee6b2800)",
                             "retval": "-1000070105"}, ev


def test_run_form_prints_arguments():
    r = subprocess.run([XPROBES, "trace", *SPECS, "--", fixture("prog_args-gcc")],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    assert cat_lines(r.stdout) == EXPECTED


def test_glob_pattern_and_merge():
    """A glob names several functions; a later spec of the same argument
    replaces it in place, a new one goes at the end (as uftrace merges)."""
    r = subprocess.run([XPROBES, "trace", "-A", "st?@arg2", "-A", "str@arg1/s", "-A", "st*@arg2/x",
                        "--", fixture("prog_args-gcc")],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    lines = cat_lines(r.stdout)
    assert '1 str(0x1, "hello");' in lines, lines
    assert "1 strtol(0);" in lines, lines  # strtol's arg2: NULL


class Shell:
    """An `xprobes PID` session on pipes: a line in, its reply awaited (read
    from the descriptor: a text stream's buffer would hide what select sees)."""

    def __init__(self, pid):
        self.p = subprocess.Popen([XPROBES, str(pid)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())

    def send(self, line, until):
        self.p.stdin.write((line + "\n").encode())
        self.p.stdin.flush()
        got = b""
        while until.encode() not in got:
            ready, _, _ = select.select([self.p.stdout], [], [], TIMEOUT)
            assert ready, f"no reply to {line}: {got}"
            chunk = os.read(self.p.stdout.fileno(), 65536)
            assert chunk, f"the session ended: {got} {self.p.stderr.read()}"
            got += chunk
        return got.decode()

    def close(self, last=""):
        self.p.stdin.write(last.encode())
        self.p.stdin.close()
        assert self.p.wait(timeout=TIMEOUT) == 0, self.p.stderr.read()


@needs_uftrace
def test_session_cat_and_snapshot(tmp_path):
    prog = LineProgram([fixture("prog_args-gcc"), "wait"])
    try:
        sh = Shell(prog.pid)
        sh.send("trace start " + " ".join(SPECS), "with the arguments or return values of 9")
        prog.say("run")
        assert prog.line().startswith("done ")
        out = sh.send("trace cat", "/* calls */")
        assert cat_lines(out) == EXPECTED
        d = str(tmp_path / "snap")
        sh.close(f"trace snapshot -o {d}\ntrace stop\n")
        assert replay(d) == EXPECTED
    finally:
        prog.close()


@pytest.mark.parametrize("spec", [
    "str@arg0", "str@arg17", "str@arg1/q", "str@fparg9", "str@arg1/s32", "str@arg1/c16",
    "str@arg1/f", "str@arg1/e", "str@arg1%stack+11", "str@arg1%rax", "str@arg1/t8:pt",
    "str@arg1/S", "str", "str@", "@arg1",
    "str@retval/i12", "str@fparg1/80",
    "str@arg1,arg2,arg3,arg4,arg5,arg6,arg7,arg8,arg9",
])
def test_bad_specs_are_usage_errors(spec):
    r = subprocess.run([XPROBES, "trace", "-A", spec, "--", fixture("prog_args-gcc")],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.startswith("xprobes trace: -A '"), r.stderr
    assert "ok" not in r.stdout  # the program never ran


def test_pattern_naming_nothing_is_said():
    r = subprocess.run([XPROBES, "trace", "-R", "no_such_function@retval", "--",
                        fixture("prog_args-gcc")],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode != 0
    assert "no traced function or library call matches -A/-R 'no_such_function'" in r.stderr


def test_too_many_items_for_one_function():
    r = subprocess.run([XPROBES, "trace", "-A", "many@arg1,arg2,arg3,arg4,arg5,arg6,arg7,arg8",
                        "-R", "many@retval", "--", fixture("prog_args-gcc")],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode != 0
    assert "many: more than 8 arguments and return values" in r.stderr, r.stderr


@needs_uftrace
def test_min_duration_keeps_arguments_with_their_calls(tmp_path):
    """-t while recording: calls left out take their argument records with
    them (they would follow another call's record); whichever calls stay
    (a matter of time) show their own values."""
    mine = ours(tmp_path, fixture("prog_args-gcc"), "-t", "5", "-A", "str@arg1/s,arg2",
                "-R", "neg@retval", "-R", "ints@retval/i32", "-R", "calls@retval")
    lines = replay(mine)
    assert lines[-1] == "0 } = 0x58906d1f; /* calls */", lines
    assert [x for x in lines if x.startswith("1 str(")] == [x for x in EXPECTED if x.startswith("1 str(")]
    for x in lines[1:-1]:
        assert x.startswith(("1 str(", "1 neg() = -42;", "1 ints() = ", "1 hexes()", "1 chr()",
                             "1 fl()", "1 many()", "1 strtol()")), lines


@needs_uftrace
def test_session_record_until_exit(tmp_path):
    """`trace record -o DIR` with --argument/--retval (the long forms),
    on a running process, until it exits."""
    prog = LineProgram([fixture("prog_args-gcc"), "wait"])
    d = str(tmp_path / "rec")
    rec = subprocess.Popen([XPROBES, str(prog.pid), "trace", "record", "-o", d,
                            "--argument", "str@arg1/s,arg2", "--retval", "calls@retval"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    try:
        said = b""
        while b"with the arguments or return values of 2 functions" not in said:
            ready, _, _ = select.select([rec.stderr], [], [], TIMEOUT)
            assert ready, said
            chunk = os.read(rec.stderr.fileno(), 4096)
            assert chunk, said
            said += chunk
        prog.say("run")
        assert prog.line().startswith("done ")
    finally:
        prog.close()
    assert rec.wait(timeout=TIMEOUT) == 0, rec.stderr.read()
    lines = replay(d)
    assert lines[-1] == "0 } = 0x58906d1f; /* calls */", lines
    assert [x for x in lines if x.startswith("1 str(")] == [x for x in EXPECTED if x.startswith("1 str(")]
