# SPDX-License-Identifier: MIT
"""uftrace's --auto-args from DWARF (tools/xprobes/trace_dwarf.c), checked
against uftrace's own `record -a` of the same programs.

tests/trace/dwarf_prog.c (every kind of argument and return value) is built
-pg -g by gcc and clang, at -O0 and -O2, PIE and not, DWARF 5 and 4
(tools/trace_dwarf.mk),
and tests/trace/dwarf_callee.c as a -pg -g library.  uftrace records each
with -a; its DIR/<object>.dbg holds the specs it found.  Then:
  - the specs tests/trace/dwarf_specs prints (the module's API) must be
    uftrace's, function by function, and its enum definitions uftrace's;
  - the .dbg file the module writes must be uftrace's, byte for byte;
  - `uftrace replay` of the recording with our .dbg in place of uftrace's
    must print what it prints with uftrace's (the arguments decoded);
  - a few specs are checked by hand, so that uftrace changing cannot hide
    a regression;
  - corrupt and stripped copies give a clear error, never a crash.
Every wait is on a process's exit."""
import os
import random
import shutil
import signal
import subprocess

import pytest

from tracefix import TIMEOUT, env, fixture

UFTRACE = shutil.which("uftrace")
pytestmark = pytest.mark.skipif(not UFTRACE, reason="uftrace is not installed")

VARIANTS = ["gcc-O0", "gcc-O2", "clang-O0", "clang-O2", "gcc-O0-nopie", "gcc-O2-nopie",
            "gcc-O2-dwarf4", "clang-O2-dwarf4"]


def run(argv, ok=True, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=env(), **kw)
    if ok:
        assert r.returncode == 0, (argv, r.stdout, r.stderr)
    return r


def parse_dbg(text):
    """A .dbg file: (header lines, enum lines, [(name, offset, L, A, R)])."""
    head, enums, funcs = [], [], []
    for line in text.splitlines():
        if line.startswith("#"):
            head.append(line)
        elif line.startswith("E: "):
            enums.append(line[3:])
        elif line.startswith("F: "):
            off, name = line[3:].split(" ", 1)
            funcs.append({"name": name, "offset": int(off, 16), "L": None, "A": "-", "R": "-"})
        elif line[:3] in ("L: ", "A: ", "R: "):
            assert funcs, line
            val = line[3:]
            if line[0] in "AR":
                assert val.startswith("@"), line
                val = val[1:]
            funcs[-1][line[0]] = val
        else:
            pytest.fail(f"unknown .dbg line: {line!r}")
    return head, enums, funcs


def ours(path):
    """dwarf_specs' view: ({name: (offset, argspec, retspec)}, [enum])."""
    out = run([fixture("dwarf_specs"), path]).stdout
    funcs, enums = {}, []
    for line in out.splitlines():
        if line.startswith("enum "):
            enums.append(line)
            continue
        name, off, arg, ret = line.split(" ")
        assert name not in funcs, line
        funcs[name] = (int(off, 16), arg, ret)
    return funcs, enums


def record(prog, d):
    run([UFTRACE, "record", "-a", "-d", d, prog], cwd=os.path.dirname(prog))
    return d


@pytest.fixture(scope="module", params=VARIANTS)
def recorded(request, tmp_path_factory):
    prog = fixture("dwarf_prog-" + request.param)
    d = record(prog, str(tmp_path_factory.mktemp("dwarf") / "rec"))
    return prog, d


def uftrace_dbg(d, obj):
    with open(os.path.join(d, os.path.basename(obj) + ".dbg")) as f:
        return f.read()


def test_specs_are_uftraces(recorded):
    prog, d = recorded
    _, enums, funcs = parse_dbg(uftrace_dbg(d, prog))
    # uftrace found what the program has: the comparison is not empty
    assert len([f for f in funcs if f["A"] != "-"]) >= 30, funcs
    assert {"f_enums", "f_fps", "f_smallstructs", "main"} <= {f["name"] for f in funcs}
    mine, my_enums = ours(prog)
    for f in funcs:
        assert f["name"] in mine, f
        assert mine[f["name"]] == (f["offset"], f["A"], f["R"]), f
    assert set(mine) == {f["name"] for f in funcs}
    assert my_enums == enums
    assert any("color {BLUE=-3,RED=0,GREEN=5}" in e for e in enums), enums


def test_dbg_is_uftraces(recorded, tmp_path):
    prog, d = recorded
    run([fixture("dwarf_specs"), "--dbg", prog, str(tmp_path), prog])
    with open(tmp_path / (os.path.basename(prog) + ".dbg")) as f:
        assert f.read() == uftrace_dbg(d, prog)


def test_replay_reads_ours(recorded, tmp_path):
    """uftrace replay decodes the arguments from our .dbg as from its own."""
    prog, d = recorded
    ref = run([UFTRACE, "replay", "-d", d]).stdout
    mine = str(tmp_path / "rec")
    shutil.copytree(d, mine)
    os.unlink(os.path.join(mine, os.path.basename(prog) + ".dbg"))
    run([fixture("dwarf_specs"), "--dbg", prog, mine, prog])
    assert run([UFTRACE, "replay", "-d", mine]).stdout == ref
    assert "f_enums(GREEN, MODE_B" in ref and '"hello", "world"' in ref, ref


def test_library(tmp_path):
    """A shared library's offsets are from its own start."""
    lib = fixture("libdwarf_callee.so")
    d = record(fixture("dwarf_libmain"), str(tmp_path / "rec"))
    ref = uftrace_dbg(d, lib)
    assert "A: @arg1/s,arg2/e:lk" in ref, ref
    run([fixture("dwarf_specs"), "--dbg", lib, str(tmp_path), lib])
    with open(tmp_path / "libdwarf_callee.so.dbg") as f:
        assert f.read() == ref


def test_cxx(tmp_path):
    """C++: the specs are uftrace's (std::string by value is "/S"); the F:
    lines name the symbol as the symbol table does (mangled) where uftrace
    demangles it, which its replay does not read (it finds the specs by
    address): replay with our .dbg prints what it prints with its own."""
    prog = fixture("dwarf_cxx")
    d = record(prog, str(tmp_path / "rec"))
    ref = uftrace_dbg(d, prog)
    run([fixture("dwarf_specs"), "--dbg", prog, str(tmp_path), prog])
    with open(tmp_path / "dwarf_cxx.dbg") as f:
        mine = f.read()
    _, ref_enums, ref_funcs = parse_dbg(ref)
    _, my_enums, my_funcs = parse_dbg(mine)
    assert my_enums == ref_enums
    assert [(f["offset"], f["L"], f["A"], f["R"]) for f in my_funcs] == \
        [(f["offset"], f["L"], f["A"], f["R"]) for f in ref_funcs]
    assert "A: @arg1/S%RDI,arg2/p%RSI" in ref and "E: enum Shade {Light=1,Dark}" in ref, ref
    replayed = run([UFTRACE, "replay", "-d", d]).stdout
    os.unlink(os.path.join(d, "dwarf_cxx.dbg"))
    shutil.copy(tmp_path / "dwarf_cxx.dbg", d)
    assert run([UFTRACE, "replay", "-d", d]).stdout == replayed
    assert 'geo::measure(1, "cm", Dark)' in replayed, replayed


def test_known_specs():
    """What uftrace 0.13 makes of these, written down."""
    mine, enums = ours(fixture("dwarf_prog-gcc-O0"))
    want = {
        "f_ints": ("arg1,arg2,arg3/c,arg4,arg5,arg6", "retval"),
        "f_ptrs": ("arg1/p,arg2/p,arg3/s,arg4/s,arg5/p,arg6/p", "-"),
        "f_structs": ("arg1/t8:pt%RDI,arg2/t32:big4%stack+1", "retval"),
        "f_enums": ("arg1/e:color,arg2/e:_dwarf_prog_c_" , "retval/e:color"),
        "f_fps": ("fparg1/32,fparg2/64,fparg3/80%stack+1", "retval/f64"),
        "f_varargs": ("arg1/s", "retval"),
        "f_str": ("arg1/s", "retval/s"),
        "f_retbig": ("arg1%RSI", "retval/t32:big4"),
        "f_void": ("-", "-"),
        "f_smallstructs": ("arg1/t8:fp2%XMM0,arg2/t16:dbl2%XMM1+XMM2,arg3/t8:mixfi%RDI,"
                           "arg4/t16:mixdl%XMM3+RSI,arg5%RDX", "retval"),
    }
    for name, (arg, ret) in want.items():
        assert name in mine, name
        if name == "f_enums":
            assert mine[name][1].startswith(arg), mine[name]
        else:
            assert mine[name][1:] == (arg, ret), (name, mine[name])
    assert "enum flags {FL_NONE,FL_ONE,FL_TWO,FL_FOUR=4,FL_FIVE}" in enums, enums
    assert not any("unused_enum" in e for e in enums), enums
    optimised, _ = ours(fixture("dwarf_prog-gcc-O2"))
    assert "f_callsinline" in optimised and "f_inlined" not in optimised  # inlined only


def test_no_debug_info(tmp_path):
    stripped = str(tmp_path / "stripped")
    run(["strip", "-g", "-o", stripped, fixture("dwarf_prog-gcc-O0")])
    r = run([fixture("dwarf_specs"), stripped], ok=False)
    assert r.returncode == 1, r
    assert r.stderr.startswith("dwarf_specs: ") and "no debug information" in r.stderr, r.stderr
    r = run([fixture("dwarf_specs"), str(tmp_path / "missing")], ok=False)
    assert r.returncode == 1 and "No such file" in r.stderr, r.stderr


def test_separate_debug_file(tmp_path):
    """A stripped object's DWARF from its .gnu_debuglink file, on request
    (uftrace 0.13 does not look there)."""
    full = fixture("dwarf_prog-gcc-O0")
    stripped, debug = str(tmp_path / "prog"), str(tmp_path / "prog.debug")
    run(["objcopy", "--only-keep-debug", full, debug])
    run(["strip", "-g", "-o", stripped, full])
    run(["objcopy", "--add-gnu-debuglink=" + debug, stripped], cwd=str(tmp_path))
    want = run([fixture("dwarf_specs"), full]).stdout
    assert "f_enums" in want
    assert run([fixture("dwarf_specs"), "--separate", stripped]).stdout == want
    r = run([fixture("dwarf_specs"), stripped], ok=False)
    assert r.returncode == 1 and "no debug information" in r.stderr, r.stderr
    os.unlink(debug)
    r = run([fixture("dwarf_specs"), "--separate", stripped], ok=False)
    assert r.returncode == 1 and "no debug information" in r.stderr, r.stderr


def section(path, name):
    """(offset, size) of a section in the file (readelf -S)."""
    out = run(["readelf", "-W", "-S", path]).stdout
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 6 and parts[1] == name:
            return int(parts[4], 16), int(parts[5], 16)
    pytest.fail(f"{path} has no {name}")


def test_corrupt_files_give_errors(tmp_path):
    """Flipped bytes in the DWARF and truncated files: an answer or a
    message, never a crash or a hang."""
    src = fixture("dwarf_prog-gcc-O2")
    with open(src, "rb") as f:
        data = f.read()
    rng = random.Random(7)
    regions = [section(src, s) for s in (".debug_info", ".debug_abbrev", ".debug_line",
                                          ".debug_str", ".debug_loclists")]
    bad = str(tmp_path / "bad")
    answers = errors = 0
    for i in range(120):
        b = bytearray(data)
        if i % 6 == 5:
            b = b[:rng.randrange(64, len(b))]
        else:
            off, size = regions[i % len(regions)]
            for _ in range(rng.choice([1, 4, 32])):
                b[off + rng.randrange(size)] = rng.randrange(256)
        with open(bad, "wb") as f:
            f.write(b)
        r = run([fixture("dwarf_specs"), bad], ok=False)
        assert r.returncode in (0, 1), (i, r.returncode, r.stderr)
        assert r.returncode != -signal.SIGSEGV
        if r.returncode:
            assert r.stderr.startswith("dwarf_specs: ") and r.stderr.count("\n") == 1, r.stderr
            errors += 1
        else:
            answers += 1
    assert answers and errors, (answers, errors)
