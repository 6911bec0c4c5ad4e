# SPDX-License-Identifier: MIT
"""xprobes-dtrace takes systemtap's dtrace command line."""
import os
import stat
import subprocess

import pytest

from .dx import DATA, DTRACE, dtrace, have, ok

SIMPLE = "provider simple {\n\tprobe ping__pong(int a, char *b);\n\tprobe bare();\n};\n"


@pytest.fixture
def work(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "simple.d").write_text(SIMPLE)
    return tmp_path


def listing(path):
    return sorted(os.listdir(path))


def is_elf_object(path):
    with open(path, "rb") as f:
        head = f.read(18)
    return head[:4] == b"\x7fELF" and head[16] == 1  # ET_REL


def test_help_and_version(work):
    r = dtrace("--help", cwd=work)
    assert r.returncode == 0
    for opt in ("-h", "-G", "-s", "-o", "-C"):
        assert opt in r.stdout
    r = dtrace("--version", cwd=work)
    assert r.returncode == 0
    assert r.stdout.startswith("xprobes-dtrace ")


def test_no_arguments_is_a_usage_error(work):
    r = dtrace(cwd=work)
    assert r.returncode == 2
    assert "usage" in r.stderr


@pytest.mark.parametrize("opt", ["-q", "--bogus", "-Z"])
def test_unknown_option(work, opt):
    r = dtrace(opt, "-h", "-s", "src/simple.d", cwd=work)
    assert r.returncode == 2
    assert f"invalid option {opt}" in r.stderr
    assert listing(work) == ["src"]


def test_header_default_name_is_basename_in_cwd(work):
    ok(dtrace("-h", "-s", "src/simple.d", cwd=work))
    assert listing(work) == ["simple.h", "src"]
    assert listing(work / "src") == ["simple.d"]
    text = (work / "simple.h").read_text()
    assert "#define SIMPLE_PING_PONG(arg1, arg2)" in text


def test_object_default_name_is_basename_in_cwd(work):
    ok(dtrace("-G", "-s", "src/simple.d", cwd=work))
    assert listing(work) == ["simple.o", "src"]
    assert is_elf_object(work / "simple.o")


def test_output_name_is_verbatim(work):
    (work / "out").mkdir()
    ok(dtrace("-h", "-s", "src/simple.d", "-o", "out/some.name", cwd=work))
    assert listing(work / "out") == ["some.name"]
    ok(dtrace("-G", "-o", "out/obj.bin", "-s", "src/simple.d", cwd=work))
    assert is_elf_object(work / "out" / "obj.bin")


def test_ignored_options_and_trailing_objects(work):
    (work / "a.o").write_bytes(b"")
    ok(dtrace("-32", "-64", "-fpic", "-fPIC", "-x", "nolibs", "-h", "-s", "src/simple.d",
              "-o", "x.h", cwd=work))
    ok(dtrace("-64", "-G", "-o", "x.o", "-s", "src/simple.d", "a.o", "missing.o", cwd=work))
    assert is_elf_object(work / "x.o")


def test_autoconf_probes(work):
    """What configure scripts run (memcached's, verbatim)."""
    r = subprocess.run("$DTRACE -h -o conftest.h -s src/simple.d 2>/dev/zero && rm conftest.h",
                       shell=True, cwd=work, env={**os.environ, "DTRACE": DTRACE})
    assert r.returncode == 0
    (work / "main.o").write_bytes(b"")
    r = subprocess.run("$DTRACE -G -o x.o -s src/simple.d main.o", shell=True, cwd=work,
                       env={**os.environ, "DTRACE": DTRACE})
    assert r.returncode == 0
    assert is_elf_object(work / "x.o")


def test_needs_h_or_G_and_s(work):
    r = dtrace("-s", "src/simple.d", cwd=work)
    assert r.returncode == 2 and "-h" in r.stderr
    r = dtrace("-h", cwd=work)
    assert r.returncode == 2 and "-s" in r.stderr
    r = dtrace("-h", "-s", cwd=work)
    assert r.returncode == 2 and "needs an argument" in r.stderr
    assert listing(work) == ["src"]


def test_missing_input(work):
    r = dtrace("-h", "-s", "nope.d", cwd=work)
    assert r.returncode == 1
    assert "nope.d" in r.stderr
    assert listing(work) == ["src"]


def test_C_runs_the_preprocessor_with_I_and_D(work):
    (work / "inc").mkdir()
    (work / "inc" / "types.d").write_text("#define KEYTYPE const char *\n")
    (work / "src" / "cpp.d").write_text(
        '#include "types.d"\n'
        "provider cpp {\n"
        "\tprobe one(KEYTYPE key, WIDTH n);\n"
        "#ifdef EXTRA\n"
        "\tprobe two(int);\n"
        "#endif\n"
        "};\n")
    ok(dtrace("-C", "-I", "inc", "-DWIDTH=long", "-DEXTRA", "-h", "-s", "src/cpp.d", cwd=work))
    text = (work / "cpp.h").read_text()
    assert "/* CPP_ONE ( const char* key, long n ) */" in text
    assert "#define CPP_TWO(arg1)" in text
    # Attached -I form, and EXTRA undefined: no probe two.
    ok(dtrace("-C", "-Iinc", "-DWIDTH=short", "-h", "-s", "src/cpp.d", "-o", "b.h", cwd=work))
    text = (work / "b.h").read_text()
    assert "/* CPP_ONE ( const char* key, short n ) */" in text
    assert "CPP_TWO" not in text


def test_C_errors_point_into_the_original_files(work):
    (work / "inc").mkdir()
    (work / "inc" / "bad.d").write_text("\n\nprovider inner { probe x(int int); };\n")
    (work / "src" / "outer.d").write_text('/* one */\n#include "bad.d"\n')
    r = dtrace("-C", "-Iinc", "-h", "-s", "src/outer.d", cwd=work)
    assert r.returncode == 1
    assert r.stderr.startswith("inc/bad.d:3:30: "), r.stderr
    # An error after an #include is still at its line in the main file.
    (work / "inc" / "fine.d").write_text("\n\n\n\n\n\n\n\n")
    (work / "src" / "after.d").write_text('#include "fine.d"\nprovider p {\n  probe ;\n};\n')
    r = dtrace("-C", "-Iinc", "-h", "-s", "src/after.d", cwd=work)
    assert r.returncode == 1
    assert r.stderr.startswith("src/after.d:3:9: "), r.stderr


def test_C_preprocessor_failure(work):
    (work / "src" / "err.d").write_text("#error no way\nprovider p { probe a(); };\n")
    r = dtrace("-C", "-h", "-s", "src/err.d", cwd=work)
    assert r.returncode == 1
    assert "no way" in r.stderr
    assert listing(work) == ["src"]


def test_G_uses_CC_and_CFLAGS(work):
    if not have("clang"):
        pytest.skip("clang is not installed")
    ok(dtrace("-G", "-s", "src/simple.d", "-o", "c.o", cwd=work,
              extra_env={"CC": "clang", "CFLAGS": "-O1 -DUNUSED=1"}))
    r = subprocess.run(["readelf", "-p", ".comment", str(work / "c.o")],
                       capture_output=True, text=True)
    assert "clang" in r.stdout


def test_G_compiler_failure_leaves_nothing(work):
    r = dtrace("-G", "-s", "src/simple.d", "-o", "x.o", cwd=work, extra_env={"CC": "false"})
    assert r.returncode == 1
    assert listing(work) == ["src"]
    r = dtrace("-G", "-s", "src/simple.d", "-o", "x.o", cwd=work,
               extra_env={"CC": "/nonexistent/cc"})
    assert r.returncode == 1
    assert listing(work) == ["src"]


def test_G_object_defines_semaphores_in_probes_section(work):
    ok(dtrace("-G", "-s", os.path.join(DATA, "xpdtest.d"), "-o", "g.o", cwd=work))
    r = subprocess.run(["readelf", "-sW", "-S", str(work / "g.o")], capture_output=True,
                       text=True, check=True)
    syms = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) == 8 and f[7].endswith("_semaphore"):
            syms[f[7]] = f
    assert set(syms) == {f"xpdtest_{n}_semaphore" for n in (
        "tick", "noargs", "voidargs", "str__arg", "anon", "many", "neg__value", "lib__call")}
    # "[ 4] .probes PROGBITS addr off size es flags lk inf align", one line with -W
    sect = [line for line in r.stdout.splitlines() if " .probes " in line]
    assert len(sect) == 1, r.stdout
    index = sect[0].split("]")[0].strip(" [")
    fields = sect[0].split("]")[1].split()
    assert fields[1] == "PROGBITS" and fields[6] == "WA" and fields[-1] == "4", sect
    for name, f in syms.items():
        # num: value size type bind vis ndx name
        assert f[2] == "4" and f[3] == "OBJECT" and f[4] == "GLOBAL" and f[5] == "HIDDEN", f
        assert f[6] == index, f


def test_same_input_same_object(work):
    """No temporary names leak into the object (reproducible builds)."""
    ok(dtrace("-G", "-s", "src/simple.d", "-o", "a.o", cwd=work))
    ok(dtrace("-G", "-s", "src/simple.d", "-o", "b.o", cwd=work))
    assert (work / "a.o").read_bytes() == (work / "b.o").read_bytes()


STUB = "/usr/bin/dtrace"  # systemtap's, from systemtap-sdt-dev


def have_stub():
    if not os.access(STUB, os.X_OK):
        return False
    with open(STUB, "rb") as f:
        return b"Systemtap" in f.read()


def created_files(tool, args, tmp_path, name):
    """Runs tool with args in a fresh copy of src/; {file: text} it made."""
    d = tmp_path / name
    (d / "src").mkdir(parents=True)
    (d / "src" / "simple.d").write_text(SIMPLE)
    r = subprocess.run([tool, *args], cwd=d, capture_output=True, text=True)
    assert r.returncode == 0, f"{tool} {args}: {r.stdout}{r.stderr}"
    return {f: (d / f).read_text(errors="replace") for f in listing(d) if f != "src"}


H_AND_G = [["-h", "-G", "-s", "src/simple.d"],
           ["-G", "-h", "-s", "src/simple.d"],
           ["-h", "-G", "-s", "src/simple.d", "-o", "both.out"]]


@pytest.mark.parametrize("args", H_AND_G, ids=["h-G", "G-h", "h-G-o"])
def test_h_and_G_together_write_the_header(tmp_path, args):
    """Like the stub: the header only, named by -o or else after the last
    of -h and -G (so "-h -G" gives simple.o holding the header)."""
    ours = created_files(DTRACE, args, tmp_path, "ours")
    want = "both.out" if "-o" in args else \
        "simple.o" if args.index("-G") > args.index("-h") else "simple.h"
    assert list(ours) == [want]
    assert "#define SIMPLE_PING_PONG(arg1, arg2)" in ours[want]
    if have_stub():
        stub = created_files(STUB, args, tmp_path, "stub")
        assert list(stub) == list(ours)
        assert "#define SIMPLE_PING_PONG(arg1, arg2)" in stub[want]


def umask():
    old = os.umask(0)
    os.umask(old)
    return old


def test_output_through_a_symlink(work):
    """-o naming a symlink writes its target, as the stub does: the link
    stays, the target keeps its mode, no temporary file is left."""
    (work / "real").mkdir()
    target = work / "real" / "x.h"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    os.symlink("real/x.h", work / "link.h")
    ok(dtrace("-h", "-s", "src/simple.d", "-o", "link.h", cwd=work))
    assert os.readlink(work / "link.h") == "real/x.h"
    assert "#define SIMPLE_PING_PONG(arg1, arg2)" in target.read_text()
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert listing(work) == ["link.h", "real", "src"]
    assert listing(work / "real") == ["x.h"]


def test_object_through_a_chain_of_symlinks_keeps_the_mode(work):
    """-G too (the compiler writes the temporary file itself), through a
    link to a link, with an absolute and a relative hop."""
    (work / "objs").mkdir()
    target = work / "objs" / "gates.o"
    target.write_bytes(b"old")
    os.chmod(target, 0o600)
    os.symlink(str(target), work / "objs" / "hop.o")
    os.symlink("objs/hop.o", work / "g.o")
    ok(dtrace("-G", "-s", "src/simple.d", "-o", "g.o", cwd=work))
    assert os.readlink(work / "g.o") == "objs/hop.o"
    assert os.path.islink(work / "objs" / "hop.o")
    assert is_elf_object(target)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert listing(work / "objs") == ["gates.o", "hop.o"]


def test_dangling_symlink_creates_its_target(work):
    (work / "gen").mkdir()
    os.symlink("gen/new.h", work / "new.h")
    ok(dtrace("-h", "-s", "src/simple.d", "-o", "new.h", cwd=work))
    assert os.path.islink(work / "new.h")
    made = work / "gen" / "new.h"
    assert "SIMPLE_BARE()" in made.read_text()
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o666 & ~umask()


def test_existing_regular_output_keeps_its_mode(work):
    out = work / "keep.h"
    out.write_text("old\n")
    os.chmod(out, 0o604)
    ok(dtrace("-h", "-s", "src/simple.d", "-o", "keep.h", cwd=work))
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o604
    assert "SIMPLE_BARE()" in out.read_text()


def test_symlink_target_survives_an_error(work):
    """No partial output through a link either."""
    (work / "real").mkdir()
    target = work / "real" / "x.h"
    target.write_text("previous\n")
    os.symlink("real/x.h", work / "link.h")
    (work / "src" / "bad.d").write_text("provider p { probe a(int x) };\n")
    r = dtrace("-h", "-s", "src/bad.d", "-o", "link.h", cwd=work)
    assert r.returncode == 1
    assert target.read_text() == "previous\n"
    assert listing(work / "real") == ["x.h"]
    assert os.path.islink(work / "link.h")
    r = dtrace("-G", "-s", "src/simple.d", "-o", "link.h", cwd=work,
               extra_env={"CC": "false"})
    assert r.returncode == 1
    assert target.read_text() == "previous\n"
    assert listing(work / "real") == ["x.h"]


def test_symlink_loop_is_an_error(work):
    os.symlink("loop2", work / "loop1")
    os.symlink("loop1", work / "loop2")
    r = dtrace("-h", "-s", "src/simple.d", "-o", "loop1", cwd=work)
    assert r.returncode == 1
    assert "loop1" in r.stderr and "symbolic links" in r.stderr
    assert listing(work) == ["loop1", "loop2", "src"]
