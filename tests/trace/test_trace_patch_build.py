# SPDX-License-Identifier: MIT
"""The instrumentation survives the ways programs are built: gcc and clang,
-O0..-O2, PIE and not, LTO, --gc-sections and -z start-stop-gc, in a
program and in a dlopen()ed shared library.  Each variant of
check_sites.c (linked with the agent's objects) finds every function as a
patch site, switches them all on and off, and computes the same.  Objects
with no instrumented function still link; a gcc object whose constructor
did not run has its 90 x5 counted as unpatchable, never patched."""
import glob
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
STATIC = os.path.join(BUILD, "libxprobes_trace.a")
BASE = ["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-g",
        "-I" + os.path.join(ROOT, "include")]
TRACE = ["-fpatchable-function-entry=5"]
ANCHOR = ["-Wl,-u,__xprobes_trace_anchor"]

LINK = {
    "plain": [],
    "no-pie": ["-fno-pie", "-no-pie"],
    "lto": ["-flto"],
    "gc-sections": ["-ffunction-sections", "-Wl,--gc-sections"],
    "start-stop-gc": ["-ffunction-sections", "-Wl,--gc-sections", "-Wl,-z,start-stop-gc"],
}


def agent_objects():
    # Every layer's objects; lib/static/ is the archive, linked apart.
    objs = sorted(o for o in glob.glob(os.path.join(BUILD, "lib", "*", "*.o"))
                  if os.sep + "static" + os.sep not in o)
    assert objs, "build the library first (make B=...)"
    return objs


def run_check(tmp_path, cc, opt, link, lib_flags=TRACE, static=STATIC):
    lib = str(tmp_path / "libtracee.so")
    prog = str(tmp_path / "check_sites")
    lib_link = [f for f in LINK[link] if f not in ("-fno-pie", "-no-pie")]
    subprocess.run([cc, *BASE, opt, *lib_flags, *lib_link, "-shared", "-fPIC", "-o", lib,
                    os.path.join(HERE, "libtracee.c"), *ANCHOR, static], check=True)
    subprocess.run([cc, *BASE, opt, *TRACE, *LINK[link], "-I" + os.path.join(ROOT, "lib"),
                    "-o", prog, os.path.join(HERE, "check_sites.c"), *agent_objects(),
                    *ANCHOR, STATIC, "-lpthread", "-ldl"], check=True)
    return lib, prog


def check(prog, lib, sites, unpatchable):
    env = dict(os.environ, XPROBES_AGENT="off")
    r = subprocess.run([prog, lib, str(sites), str(unpatchable)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ok "), r.stdout
    return r.stdout


@pytest.mark.parametrize("cc", ["gcc", "clang"])
@pytest.mark.parametrize("opt", ["-O0", "-O1", "-O2"])
@pytest.mark.parametrize("link", sorted(LINK))
def test_sites_found_and_switched(tmp_path, cc, opt, link):
    lib, prog = run_check(tmp_path, cc, opt, link)
    out = check(prog, lib, 2, 0)  # tracee_square, tracee_sum_squares; not tracee_untraced
    assert " lib=2 " in out


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_object_without_instrumented_functions(tmp_path, cc):
    """Linked with the archive but compiled without the flag: the note
    points at an empty table (the linker still defines both ends)."""
    lib, prog = run_check(tmp_path, cc, "-O2", "gc-sections", lib_flags=[])
    check(prog, lib, 0, 0)


def test_gcc_nops_without_constructor_are_not_patched(tmp_path):
    """The note without its constructor (as when dl_iterate_phdr shows an
    object whose constructors have not run yet): gcc's five 1-byte NOPs
    stay, are counted, and nothing patches them."""
    src = os.path.join(ROOT, "lib", "static", "trace_note.c")
    obj = str(tmp_path / "note_only.o")
    subprocess.run(["gcc", *BASE, "-O2", "-fPIC", "-Dconstructor(p)=unused", "-c", src,
                    "-o", obj], check=True)
    static = str(tmp_path / "libnote_only.a")
    subprocess.run(["ar", "rcs", static, obj], check=True)
    lib, prog = run_check(tmp_path, "gcc", "-O2", "plain", static=static)
    check(prog, lib, 0, 2)
