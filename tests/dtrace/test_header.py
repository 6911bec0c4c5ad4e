# SPDX-License-Identifier: MIT
"""The generated header: the stub's names, sites with the .d types,
memcached's sed/tr rewrite, strict compilers, and the SDT notes."""
import os
import re
import subprocess

import pytest

from .dx import DATA, STRICT, dtrace, have, ok, run

STUB = "/usr/bin/dtrace"  # systemtap-sdt-dev's dtrace, for comparison

# Probes in the style of memcached_dtrace.d (written for this test).
CACHE_D = """provider cache {
   probe conn__allocate(int connid);
   probe conn__create(void *ptr);
   probe slabs__allocate(int size, int slabclass, int slabsize, void* ptr);
   probe assoc__find(const char *key, int keylen, int depth);
   probe process__command__start(int connid, const void *request, int size);
   probe command__get(int connid, const char *key, int keylen, int size, int64_t casid);
   probe command__incr(int connid, const char *key, int keylen, int64_t val);
   probe item__replace(const char *oldkey, int oldkeylen, int oldsize,
                       const char *newkey, int newkeylen, int newsize);
};
"""


def test_rewrite_changes_nothing(built):
    """memcached pipes the header through sed/tr: our text has no "char *"
    or "void *" for it to rewrite, and no tab that matters."""
    with open(built.raw_header) as f:
        raw = f.read()
    with open(built.header) as f:
        rewritten = f.read()
    assert "char *" not in raw and "void *" not in raw and "\t" not in raw
    assert rewritten == raw


def test_rewritten_header_compiles_strictly_with_clang(built, tmp_path):
    if not have("clang"):
        pytest.skip("clang is not installed")
    for src in ("prog.c", "libxpdlib.c"):
        run(["clang", *STRICT, "-fPIC", "-I", built.dir, "-c", os.path.join(DATA, src),
             "-o", str(tmp_path / (src + ".o"))])


def test_macro_names_match_the_systemtap_stub(tmp_path):
    if not os.access(STUB, os.X_OK):
        pytest.skip("systemtap's dtrace is not installed")
    (tmp_path / "cache.d").write_text(CACHE_D)
    ok(dtrace("-h", "-s", "cache.d", "-o", "ours.h", cwd=tmp_path))
    run([STUB, "-h", "-s", "cache.d", "-o", "stub.h"], cwd=tmp_path)
    defines = lambda t: set(re.findall(r"^#define (CACHE_\w+\([^)]*\))", t, re.M))  # noqa: E731
    ours = (tmp_path / "ours.h").read_text()
    stub = (tmp_path / "stub.h").read_text()
    assert defines(ours) == defines(stub)
    assert len(defines(ours)) == 16
    # Same semaphore names, and the same comments but for pointer spacing.
    sems = lambda t: set(re.findall(r"\b(cache_\w+_semaphore)\b", t))  # noqa: E731
    assert sems(ours) == sems(stub)
    comments = lambda t: [c.replace(" ", "") for c in re.findall(r"^/\* (CACHE.*) \*/$", t, re.M)]  # noqa: E731
    assert comments(ours) == comments(stub)


def test_sites_carry_the_d_types(built):
    with open(built.header) as f:
        text = f.read()
    m = re.search(r'#define XPDTEST_TICK\(arg1, arg2, arg3, arg4\) \\\n(.*?)while \(0\)',
                  text, re.S)
    assert m, text
    body = m.group(1)
    assert '__XP_SITE_DTRACE("", xpdtest_tick_semaphore, "xpdtest", "xpdtest", "tick",' in body
    assert "(int, const char*, uint64_t, void*), (arg1, arg2, arg3, arg4)" in body
    assert "extern struct xprobes_gate xpdtest_tick_semaphore" in text
    assert re.search(r"#define XPDTEST_TICK_ENABLED\(\) \\\n.*&xpdtest_tick_semaphore\.word", text)


BAD_CALLS = {
    "pointer_for_int": 'XPDTEST_LIB_CALL("not an int");',
    "struct_for_pointer": "struct big { int x; } b = { 1 }; XPDTEST_STR_ARG(b);",
    "int_for_pointer": "XPDTEST_TICK(1, 2, 3, 0);",
    "const_dropped": 'const char *cs = "x"; XPDTEST_ANON(1, cs, 2, 0);',
    "wrong_count": "XPDTEST_LIB_CALL(1, 2);",
}


GOOD_CALLS = ('char buf[4] = "x"; XPDTEST_LIB_CALL((short)1); XPDTEST_STR_ARG(buf); '
              "XPDTEST_TICK('c', \"s\", 1ULL << 40, buf); XPDTEST_ANON(1L, buf, 2, 0);")


def compile_call(built, tmp_path, body):
    src = tmp_path / "call.c"
    src.write_text("#include <stdint.h>\nstruct xpd_thing;\n#include \"xpdtest.h\"\n"
                   "void f(void);\nvoid f(void) { " + body + " }\n")
    return subprocess.run(["gcc", *STRICT, "-I", built.dir, "-c", str(src), "-o",
                           str(tmp_path / "call.o")], capture_output=True, text=True)


def test_convertible_arguments_compile(built, tmp_path):
    r = compile_call(built, tmp_path, GOOD_CALLS)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_call_sites_are_type_checked(built, tmp_path, name):
    """Arguments convert to the declared types, so a call that cannot does
    not compile (with the project's -Werror)."""
    r = compile_call(built, tmp_path, BAD_CALLS[name])
    assert r.returncode != 0, f"{name} compiled"
    assert "error" in r.stderr


def sdt_notes(path):
    """[(provider, name, location, base, semaphore, [args])] from readelf -n."""
    out = subprocess.run(["readelf", "-n", "-W", path], capture_output=True, text=True,
                         check=True).stdout
    notes = []
    for m in re.finditer(r"Provider: (\S+)\n\s+Name: (\S+)\n\s+Location: (0x[0-9a-f]+), "
                         r"Base: (0x[0-9a-f]+), Semaphore: (0x[0-9a-f]+)\n\s+Arguments:(.*)",
                         out):
        notes.append((m.group(1), m.group(2), int(m.group(3), 16), int(m.group(4), 16),
                      int(m.group(5), 16), m.group(6).split()))
    return notes


def symbols(path):
    out = subprocess.run(["readelf", "-sW", path], capture_output=True, text=True,
                         check=True).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 8 and f[1] != "Value":
            syms[f[7]] = int(f[1], 16)
    return syms


def section(path, name):
    """(address, size) of a section."""
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        if f" {name} " in line:
            f = line.split("]", 1)[1].split()
            return int(f[2], 16), int(f[4], 16)
    raise AssertionError(f"no section {name} in {path}")


SIZES = {
    "tick": ["-4", "8", "8", "8"],
    "noargs": [],
    "voidargs": [],
    "str__arg": ["8"],
    "anon": ["-4", "8", "8", "8"],
    "many": ["-1", "1", "-2", "2", "-4", "4", "-8", "8", "8", "8", "8", "-8"],
    "neg__value": ["-4", "-2", "-1"],
}


def test_stapsdt_notes(built):
    notes = sdt_notes(built.prog)
    syms = symbols(built.prog)
    base, _ = section(built.prog, ".stapsdt.base")
    probes_addr, probes_size = section(built.prog, ".probes")
    by_name = {}
    for prov, name, loc, nbase, sem, args in notes:
        assert prov == "xpdtest"
        by_name.setdefault(name, []).append((loc, nbase, sem, args))
    assert set(by_name) == set(SIZES), by_name.keys()
    # Three call sites pass char, int and long long: one layout at all.
    assert len(by_name["tick"]) == 3
    for name, sites in by_name.items():
        gate = syms[f"xpdtest_{name}_semaphore"]
        assert probes_addr <= gate < probes_addr + probes_size
        for loc, nbase, sem, args in sites:
            assert [a.split("@")[0] for a in args] == SIZES[name], (name, args)
            assert sem == gate, name  # bpftrace bumps the gate's low half
            assert nbase == base
    # Constants are recorded as immediates, signed sizes negative.
    assert by_name["neg__value"][0][3] == ["-4@$-1", "-2@$-2", "-1@$-3"]


def test_library_has_its_own_gates(built):
    notes = sdt_notes(built.lib)
    assert [(n[0], n[1], n[5][0].split("@")[0]) for n in notes] == [
        ("xpdtest", "lib__call", "-4")]
    syms = symbols(built.lib)
    assert notes[0][4] == syms["xpdtest_lib__call_semaphore"]
    out = subprocess.run(["readelf", "--dyn-syms", "-W", built.lib], capture_output=True,
                         text=True, check=True).stdout
    assert "semaphore" not in out  # hidden: not exported, not interposable


def test_headers_meet_in_one_translation_unit(built, tmp_path):
    """Included twice, or two .d files sharing a provider: still compiles
    under -Wredundant-decls -Werror, and links with both -G objects."""
    (tmp_path / "one.d").write_text("provider split { probe first(int a); };\n")
    (tmp_path / "two.d").write_text("provider split { probe second(long b); };\n")
    for name in ("one", "two"):
        ok(dtrace("-h", "-s", f"{name}.d", cwd=tmp_path))
        ok(dtrace("-G", "-s", f"{name}.d", cwd=tmp_path))
    (tmp_path / "main.c").write_text(
        '#include "one.h"\n#include "two.h"\n#include "one.h"\n#include "two.h"\n'
        "int main(int argc, char **argv) {\n"
        "  (void)argv; SPLIT_FIRST(argc); SPLIT_SECOND(argc);\n"
        "  return SPLIT_FIRST_ENABLED() + SPLIT_SECOND_ENABLED(); }\n")
    run(["gcc", *STRICT, "-I.", "-o", "main", "main.c", "one.o", "two.o"], cwd=tmp_path)
    if have("clang"):
        run(["clang", *STRICT, "-I.", "-o", "main-clang", "main.c", "one.o", "two.o"],
            cwd=tmp_path)
    r = subprocess.run([str(tmp_path / "main")], timeout=60)
    assert r.returncode == 0  # nothing attached: both _ENABLED() are 0
