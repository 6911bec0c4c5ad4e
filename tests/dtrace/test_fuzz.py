# SPDX-License-Identifier: MIT
"""Corrupt and truncated ELF files: `xprobes list` reports them and exits
non-zero, and never crashes.  Each mutated file is run through the real
tool (a signal fails the test) and through list.c built with
AddressSanitizer and UBSan (an invalid read that happens not to crash
fails it too).  The mutations are seeded, so a failure reproduces."""
import concurrent.futures
import os
import random
import struct
import subprocess

import pytest

from .dx import DATA, INCLUDE, REPO, XPROBES, have

SEED = 20250301
ROUNDS = int(os.environ.get("XPROBES_FUZZ_ROUNDS", "400"))  # per input binary

SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer"]


@pytest.fixture(scope="module")
def asan_list(tmp_path_factory):
    if not have("gcc"):
        pytest.skip("gcc is not installed")
    d = tmp_path_factory.mktemp("asan")
    exe = str(d / "list-asan")
    r = subprocess.run(["gcc", "-std=gnu11", "-O1", "-g", *SANITIZE, "-I", INCLUDE,
                        "-I", os.path.join(REPO, "tools", "xprobes"), "-o", exe,
                        os.path.join(REPO, "tools", "xprobes", "list.c"),
                        os.path.join(REPO, "lib", "base", "signature.c"),
                        os.path.join(DATA, "list_harness.c"), "-lelf"],
                       capture_output=True, text=True)
    # A build failure is a failure: skipping would hide the fuzz test.
    assert r.returncode == 0, f"cannot build list.c with sanitizers: {r.stderr[-1500:]}"
    return exe


def sections(data):
    """{name: (offset, size)} of an ELF64 file's sections."""
    e_shoff, = struct.unpack_from("<Q", data, 40)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 58)
    shdrs = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize)
             for i in range(e_shnum)]
    stroff = shdrs[e_shstrndx][4]
    out = {}
    for name, typ, flags, addr, off, size, *_ in shdrs:
        out[data[stroff + name:data.index(b"\0", stroff + name)].decode()] = (off, size)
    return out


def notes(data):
    """(desc offset, desc size) of every note in the two note sections."""
    out = []
    for name, (off, size) in sections(data).items():
        if name not in (".note.xprobes", ".note.stapsdt"):
            continue
        at = off
        while at + 12 <= off + size:
            namesz, descsz, _ = struct.unpack_from("<III", data, at)
            desc = at + 12 + ((namesz + 3) & ~3)
            out.append((desc, descsz))
            at = desc + ((descsz + 3) & ~3)
    return out


def regions(data):
    """(start, end) of the parts of an ELF64 file worth damaging."""
    out = [(0, 64)]
    e_phoff, e_shoff = struct.unpack_from("<QQ", data, 32)
    e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHH", data, 54)
    out.append((e_phoff, e_phoff + e_phentsize * e_phnum))
    out.append((e_shoff, e_shoff + e_shentsize * e_shnum))
    for name, (off, size) in sections(data).items():
        if name in (".note.xprobes", ".note.stapsdt", ".data", ".rela.dyn", ".rodata",
                    ".probes", ".dynsym", ".shstrtab", ".stapsdt.base", ".data.rel.ro"):
            out.append((off, off + size))
    return [(s, e) for s, e in out if e > s]


NASTY = [0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0x80000000, 0xffffffff,
         0x7fffffffffffffff, 0xffffffffffffffff]


def mutate(data, rng, areas, descs):
    """One damaged copy and a description of the damage."""
    kind = rng.randrange(6)
    if kind >= 4:
        # Aimed at the note parser: a note's strings lose their NULs, or
        # its descriptor (an xprobes note's record offset) gets a nasty
        # value.
        buf = bytearray(data)
        at, size = rng.choice(descs)
        if kind == 4:
            for i in range(at, at + ((size + 3) & ~3)):  # padding too
                if buf[i] == 0:
                    buf[i] = 0x41
            return bytes(buf), f"note at {at}: NULs removed"
        value = rng.choice(NASTY + [rng.getrandbits(32)]) & 0xffffffff
        buf[at:at + 4] = value.to_bytes(4, "little")
        return bytes(buf), f"note at {at}: first word {value:#x}"
    if kind == 0:
        n = rng.choice([rng.randrange(0, 128), rng.randrange(0, len(data))])
        return data[:n], f"truncated to {n}"
    buf = bytearray(data)
    start, end = rng.choice(areas)
    if kind == 1:
        what = []
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(start, end)
            bit = rng.randrange(8)
            buf[at] ^= 1 << bit
            what.append(f"{at}^{1 << bit}")
        return bytes(buf), "bits " + ",".join(what)
    width = rng.choice([1, 2, 4, 8])
    at = rng.randrange(start, max(start + 1, end - width))
    value = rng.choice(NASTY) & ((1 << (8 * width)) - 1)
    if kind == 3:
        value = rng.getrandbits(8 * width)
    buf[at:at + width] = value.to_bytes(width, "little")
    return bytes(buf), f"{width} bytes at {at} = {value:#x}"


def check(argv, path, what):
    """None, or why this run is a failure."""
    try:
        r = subprocess.run([*argv, path], capture_output=True, text=True, errors="replace",
                           timeout=60,
                           env={**os.environ, "ASAN_OPTIONS": "detect_leaks=0"})
    except subprocess.TimeoutExpired:
        return f"{what}: hung"
    if r.returncode < 0:
        return f"{what}: killed by signal {-r.returncode}\n{r.stderr[-2000:]}"
    if "AddressSanitizer" in r.stderr or "runtime error" in r.stderr:
        return f"{what}: sanitizer report\n{r.stderr[-3000:]}"
    if r.returncode not in (0, 1):
        return f"{what}: exit status {r.returncode}\n{r.stderr[-2000:]}"
    if what.startswith("truncated") and (r.returncode != 1 or "xprobes list:" not in r.stderr):
        return f"{what}: not reported as an error"
    return None


@pytest.mark.parametrize("which", ["prog", "prog_nopie", "lib"])
def test_damaged_files_never_crash_the_lister(built, asan_list, tmp_path, which):
    path = getattr(built, which)
    data = open(path, "rb").read()
    areas = regions(data)
    descs = notes(data)
    rng = random.Random(f"{SEED}-{which}")
    cases = []
    for i in range(ROUNDS):
        damaged, what = mutate(data, rng, areas, descs)
        f = tmp_path / f"case{i}"
        f.write_bytes(damaged)
        cases.append((str(f), f"case {i} ({what})"))

    jobs = [([XPROBES, "list", "-v"], f, w) for f, w in cases]
    jobs += [([asan_list, "-v"], f, w + " [asan]") for f, w in cases]
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        problems = [p for p in pool.map(lambda j: check(*j), jobs) if p]
    assert not problems, "\n".join(problems[:5])


def test_undamaged_files_list_cleanly_under_asan(built, asan_list):
    for path in (built.prog, built.lib, built.prog_nopie):
        r = subprocess.run([asan_list, "-v", path], capture_output=True, text=True,
                           env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1"})
        assert r.returncode == 0, r.stderr
        assert "xpdtest:" in r.stdout


@pytest.fixture(scope="module")
def asan_dtrace(tmp_path_factory):
    d = tmp_path_factory.mktemp("asan-dtrace")
    exe = str(d / "xprobes-dtrace")
    srcs = sorted(os.path.join(REPO, "tools", "dtrace", f)
                  for f in os.listdir(os.path.join(REPO, "tools", "dtrace")) if f.endswith(".c"))
    srcs.append(os.path.join(REPO, "tools", "common", "exedir.c"))
    r = subprocess.run(["gcc", "-std=gnu11", "-O1", "-g", *SANITIZE, "-I", INCLUDE, "-o", exe,
                        *srcs], capture_output=True, text=True)
    # A build failure is a failure: skipping would hide the fuzz test.
    assert r.returncode == 0, f"cannot build xprobes-dtrace with sanitizers: {r.stderr[-1500:]}"
    return exe


PIECES = ["provider", "probe", "(", ")", "{", "}", ";", ",", "*", "const", "string", "int",
          "/*", "*/", "//", "\n", "#pragma D x\n", "# 7 \"f.d\"\n", "#line\n", "struct",
          "typedef", ":", "[", "]", "...", "\"", "'", "\\", "void", "long", "unsigned",
          "\x00", "\xff", "@", "x__y", " "]


def test_damaged_provider_files(asan_dtrace, tmp_path):
    """The parser, under sanitizers, on mangled provider files: an error
    with a location, or a header; nothing else, and no file left on error."""
    import re
    base = open(os.path.join(DATA, "xpdtest.d"), encoding="latin-1").read()
    rng = random.Random(SEED)
    problems = []
    for i in range(ROUNDS):
        text = base
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(text) + 1)
            cut = rng.choice([0, 0, 1, rng.randrange(1, 40)])
            text = text[:at] + rng.choice(PIECES + [""]) + text[at + cut:]
        d = tmp_path / f"c{i}"
        d.mkdir()
        (d / "in.d").write_bytes(text.encode("latin-1"))
        r = subprocess.run([asan_dtrace, "-h", "-s", "in.d", "-o", "out.h"], cwd=d,
                           capture_output=True, text=True, errors="replace", timeout=60,
                           env={**os.environ, "ASAN_OPTIONS": "detect_leaks=0"})
        what = f"case {i}: {text!r}"
        if r.returncode < 0 or "AddressSanitizer" in r.stderr or "runtime error" in r.stderr:
            problems.append(f"{what}\n{r.stderr[-2000:]}")
        elif r.returncode == 1:
            if not re.match(r"in\.d:\d+:\d+: |f\.d:\d+:\d+: ", r.stderr):
                problems.append(f"{what}: error without a location: {r.stderr!r}")
            if sorted(os.listdir(d)) != ["in.d"]:
                problems.append(f"{what}: left {os.listdir(d)}")
        elif r.returncode != 0:
            problems.append(f"{what}: status {r.returncode}")
    assert not problems, "\n".join(problems[:5])
