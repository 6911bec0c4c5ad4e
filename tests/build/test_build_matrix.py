# SPDX-License-Identifier: MIT
"""Sites survive gcc and clang at -O0..-O3, LTO, --gc-sections and
-z start-stop-gc, in executables and shared libraries, in C and in C++, and
in every C language mode from gnu89 to gnu11 (with -pedantic from C99) and
C++11 to C++20, with -Werror: each variant is built, run with the agent
preloaded, attached to, and must count exactly."""
import contextlib
import os
import re
import subprocess
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
XPROBES = os.path.join(BUILD, "xprobes")
AGENT = os.path.join(BUILD, "libxprobes.so")
WARN = ["-Wall", "-Wextra", "-Werror", "-g", "-I" + os.path.join(ROOT, "include")]
BASE = ["-std=gnu11"] + WARN
CXX_BASE = ["-std=c++11"] + WARN
CXX = {"gcc": "g++", "clang": "clang++"}

LINK_VARIANTS = {
    "plain": [],
    "lto": ["-flto"],
    "gc-sections": ["-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections"],
    "start-stop-gc": ["-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections",
                      "-Wl,-z,start-stop-gc"],
}


def have(cc):
    return subprocess.run(["sh", "-c", "command -v " + cc], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def module_so(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("mod") / "mod_build.so")
    subprocess.run(["gcc", *BASE, "-O2", "-shared", "-fPIC", "-o", out,
                    os.path.join(HERE, "mod_build.c")], check=True)
    return out


@pytest.fixture(scope="module")
def module_cxx_so(tmp_path_factory):
    """mod_build.cc: the same module, written in C++."""
    out = str(tmp_path_factory.mktemp("modcxx") / "mod_build_cxx.so")
    subprocess.run(["g++", *CXX_BASE, "-pedantic", "-O2", "-shared", "-fPIC", "-o", out,
                    os.path.join(HERE, "mod_build.cc")], check=True)
    return out


def build(cc, opt, link, with_lib, workdir, cxx=False, std=None):
    ext = ".cc" if cxx else ".c"
    if cxx:
        cc = CXX[cc]
    flags = (CXX_BASE if cxx else BASE) + [opt] + LINK_VARIANTS[link]
    if std:
        flags = [std] + flags[1:]
    prog = os.path.join(workdir, "prog")
    srcs = [os.path.join(HERE, "sites_prog" + ext)]
    extra = []
    if with_lib:
        lib = os.path.join(workdir, "libsites.so")
        subprocess.run([cc, *flags, "-shared", "-fPIC", "-o", lib,
                        os.path.join(HERE, "sites_lib" + ext)], check=True)
        extra = ["-DWITH_LIB", "-L" + workdir, "-Wl,-rpath," + workdir, "-lsites"]
    if cxx:
        flags = flags + ["-pedantic"]
    subprocess.run([cc, *flags, "-o", prog, *srcs, *extra], check=True)
    return prog


def xp(pid, *cmd):
    return subprocess.run([XPROBES, str(pid), *cmd], capture_output=True, text=True, timeout=60)


@contextlib.contextmanager
def preloaded(prog):
    """prog running with the agent preloaded, past its "ready" line.  When
    the block ends without an error the program must quit with status 0;
    it is killed in any case."""
    env = dict(os.environ, LD_PRELOAD=AGENT)
    env.pop("XPROBES_AGENT", None)
    p = subprocess.Popen([prog], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().split()[0] == "ready"
        yield p
        p.stdin.write("quit\n")
        p.stdin.flush()
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def ask(p, line):
    """One command to a preloaded program, its one reply line."""
    p.stdin.write(line + "\n")
    p.stdin.flush()
    return p.stdout.readline().strip()


def run_variant(cc, opt, link, with_lib, module_so, cxx=False, std=None):
    with tempfile.TemporaryDirectory() as work:
        prog = build(cc, opt, link, with_lib, work, cxx, std)
        with preloaded(prog) as p:
            sites = xp(p.pid, "sites")
            assert sites.returncode == 0, sites.stderr
            assert "build_item(const struct item*, int)" in sites.stdout
            assert "buildprov:tick__one(long)" in sites.stdout
            if with_lib:
                assert "libsites.so:" in sites.stdout
                assert "build_lib(int)" in sites.stdout
            load = xp(p.pid, "load", module_so)
            assert load.returncode == 0, load.stderr
            assert "refused" not in load.stdout
            assert ask(p, "hit 25") == "done"
            res = xp(p.pid, "command", os.path.basename(module_so))
            want_lib = 25 if with_lib else 0
            assert res.stdout.strip() == "item=25 tick=25 lib=%d sum=%d" % (want_lib, 25 * 42)


@pytest.mark.parametrize("cc", ["gcc", "clang"])
@pytest.mark.parametrize("opt", ["-O0", "-O1", "-O2", "-O3"])
@pytest.mark.parametrize("link", list(LINK_VARIANTS))
def test_executable_variants(cc, opt, link, module_so):
    if not have(cc):
        pytest.skip(cc + " not installed")
    run_variant(cc, opt, link, False, module_so)


@pytest.mark.parametrize("cc", ["gcc", "clang"])
@pytest.mark.parametrize("link", ["plain", "lto", "start-stop-gc"])
def test_shared_library_variants(cc, link, module_so):
    if not have(cc):
        pytest.skip(cc + " not installed")
    run_variant(cc, "-O2", link, True, module_so)


@pytest.mark.parametrize("cc", ["gcc", "clang"])
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("link", ["plain", "lto", "start-stop-gc"])
def test_cxx_variants(cc, opt, link, module_cxx_so):
    """Sites in C++ member functions, templates and inline functions, in a
    program and in a shared library, count exactly like C ones, in a probe
    module written in C++."""
    if not have(CXX[cc]):
        pytest.skip(CXX[cc] + " not installed")
    run_variant(cc, opt, link, True, module_cxx_so, cxx=True)


# ---- language modes ---------------------------------------------------------
# Projects include <xprobes/site.h> (directly, or through a header made by
# xprobes-dtrace) in whatever mode they build in, with -Werror: memcached
# builds with -std=gnu99 -pedantic.  gnu89 cannot take -pedantic (the
# macros are variadic, C99); it gets -Wdeclaration-after-statement instead.
STD_MODES = {
    "gnu89": ["-std=gnu89", "-Wdeclaration-after-statement"],
    "gnu99": ["-std=gnu99"],
    "c99-pedantic": ["-std=c99", "-pedantic"],
    "gnu99-pedantic": ["-std=gnu99", "-pedantic"],
    "c11-pedantic": ["-std=c11", "-pedantic"],
    "gnu11-pedantic": ["-std=gnu11", "-pedantic"],
}

# What must stay a compile error in every mode: (name, code, what the
# compiler's message must mention).
STD_BAD = {
    "thirteen_args": ("XPROBES_SITE(bad13, (int, int, int, int, int, int, int, int, int, "
                      "int, int, int, int), (i, i, i, i, i, i, i, i, i, i, i, i, i));",
                      "more.than.12"),
    "wide_arg": ("XPROBES_SITE(badwide, (long double), (ld));", "wider.than.8"),
    "length_mismatch": ("XPROBES_SITE(badlen, (int, int), (i));", "differ.in.length"),
    "handler_type": ("XPROBES_MODULE(0, 0, XPROBES_PROBE(\"x\", on_value, (int)));",
                     "handler"),
}


def std_flags(mode):
    return STD_MODES[mode] + WARN


@pytest.mark.parametrize("cc", ["gcc", "clang"])
@pytest.mark.parametrize("mode", list(STD_MODES))
def test_language_modes(cc, mode, tmp_path):
    """sites_std.c (sites of 0, 1 and 12 arguments, _ENABLED, _P forms)
    and its module mod_std.c compile without a warning in each mode, run
    with the agent, and every hit arrives with its declared types."""
    if not have(cc):
        pytest.skip(cc + " not installed")
    flags = std_flags(mode) + ["-O2"]
    prog = str(tmp_path / "prog")
    mod = str(tmp_path / "mod_std.so")
    subprocess.run([cc, *flags, "-o", prog, os.path.join(HERE, "sites_std.c")], check=True)
    subprocess.run([cc, *flags, "-shared", "-fPIC", "-o", mod,
                    os.path.join(HERE, "mod_std.c")], check=True)
    with preloaded(prog) as p:
        assert ask(p, "enabled") == "enabled 0 0"
        sites = xp(p.pid, "sites")
        assert sites.returncode == 0, sites.stderr
        assert "std_zero()" in sites.stdout
        assert "stdprov:one(const struct item*)" in sites.stdout
        assert ("std_twelve(char, signed char, unsigned char, short, unsigned short, int, "
                "unsigned int, long, unsigned long, long long, const char*, "
                "const struct item*)") in sites.stdout
        load = xp(p.pid, "load", mod)
        assert load.returncode == 0, load.stdout + load.stderr
        assert "refused" not in load.stdout
        assert ask(p, "enabled") == "enabled 1 1"
        assert ask(p, "hit 20") == "done"
        res = xp(p.pid, "command", "mod_std.so")
        assert res.stdout.strip() == "zero=20 one=20 twelve=20 bad=0", res.stdout + res.stderr


@pytest.mark.parametrize("cc", ["gcc", "clang"])
@pytest.mark.parametrize("mode", list(STD_MODES))
def test_language_modes_keep_compile_errors(cc, mode, tmp_path):
    """More than 12 arguments, an argument wider than 8 bytes, type and
    argument lists of different lengths, and a handler of the wrong type
    are compile errors in each mode, naming the problem (through
    _Static_assert, or where glibc makes that a macro, -std=c99, through a
    negative array size named after it)."""
    if not have(cc):
        pytest.skip(cc + " not installed")
    src = tmp_path / "bad.c"
    prelude = ("#include <xprobes/site.h>\n#include <xprobes/probe.h>\n"
               "static void on_value(long v) { (void)v; }\n"
               "void f(int i, long double ld);\n")
    good = "void f(int i, long double ld) { (void)ld; XPROBES_SITE(good, (int), (i)); }\n" \
           "XPROBES_MODULE(0, 0, XPROBES_PROBE(\"x\", on_value, (long)));\n"
    src.write_text(prelude + good)
    r = subprocess.run([cc, *std_flags(mode), "-fsyntax-only", str(src)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    for name, (code, what) in STD_BAD.items():
        if code.startswith("XPROBES_MODULE"):
            body = "void f(int i, long double ld) { (void)i; (void)ld; }\n" + code + "\n"
        else:
            body = "void f(int i, long double ld) { (void)i; (void)ld; " + code + " }\n" \
                   "XPROBES_MODULE(0, 0, XPROBES_PROBE(\"x\", on_value, (long)));\n"
        src.write_text(prelude + body)
        r = subprocess.run([cc, *std_flags(mode), "-fsyntax-only", str(src)],
                           capture_output=True, text=True)
        assert r.returncode != 0, name + " compiled"
        assert re.search(what, r.stderr), (name, r.stderr)


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_cxx20(cc, module_cxx_so):
    """C++20 deprecates ++ and used assignments of volatiles, which the
    several-handler path of a site must therefore not contain."""
    if not have(CXX[cc]):
        pytest.skip(CXX[cc] + " not installed")
    run_variant(cc, "-O2", "plain", True, module_cxx_so, cxx=True, std="-std=c++20")
