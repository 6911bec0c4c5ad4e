# SPDX-License-Identifier: MIT
"""Builds the instrumented test program once per session, the way an
--enable-dtrace project does: header (-h) rewritten by memcached's sed/tr,
gate objects (-G), a program and a shared library both using them."""
import os
import shutil
import subprocess
import types

import pytest

from .dx import (DATA, DTRACE, INCLUDE, LIBDIR, MEMCACHED_REWRITE, STRICT,
                 XPROBES, dtrace, ok, run)


def pytest_sessionstart(session):
    for tool in (DTRACE, XPROBES):
        if not os.access(tool, os.X_OK):
            raise pytest.UsageError(f"{tool} is missing: run `make`")


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("xpdbuild"))
    src = os.path.join(d, "xpdtest.d")
    shutil.copy(os.path.join(DATA, "xpdtest.d"), src)

    # No -o: the header is named after the .d, in the current directory.
    ok(dtrace("-h", "-s", src, cwd=d))
    os.rename(os.path.join(d, "xpdtest.h"), os.path.join(d, "xpdtest.raw.h"))
    subprocess.run(f"{MEMCACHED_REWRITE} < xpdtest.raw.h > xpdtest.h", shell=True,
                   cwd=d, check=True)
    ok(dtrace("-G", "-s", src, "-o", "gates.o", cwd=d))

    cflags = STRICT + ["-I", d]
    run(["gcc", *cflags, "-fPIC", "-shared", "-o", "libxpdlib.so",
         os.path.join(DATA, "libxpdlib.c"), "gates.o"], cwd=d)
    link = ["-L", d, "-lxpdlib", "-L", LIBDIR, f"-Wl,-rpath,{d}:{LIBDIR}",
            "-Wl,--no-as-needed", "-lxprobes"]
    run(["gcc", *cflags, "-o", "prog", os.path.join(DATA, "prog.c"), "gates.o", *link], cwd=d)
    # A position-dependent build: the record's pointers are plain values
    # in the file instead of dynamic relocations.
    run(["gcc", *cflags, "-fno-pie", "-no-pie", "-o", "prog-nopie",
         os.path.join(DATA, "prog.c"), "gates.o", *link], cwd=d)
    run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-I", INCLUDE, "-shared", "-fPIC",
         "-o", "mod_xpd.so", os.path.join(DATA, "mod_xpd.c")], cwd=d)
    j = lambda n: os.path.join(d, n)  # noqa: E731
    return types.SimpleNamespace(dir=d, d_file=src, header=j("xpdtest.h"),
                                 raw_header=j("xpdtest.raw.h"), gates=j("gates.o"),
                                 prog=j("prog"), prog_nopie=j("prog-nopie"),
                                 lib=j("libxpdlib.so"), module=j("mod_xpd.so"))


@pytest.fixture
def progs():
    """Starts test programs; kills and reaps them afterwards."""
    from .dx import Prog
    started = []

    def start(path):
        p = Prog(path)
        started.append(p)
        return p
    try:
        yield start
    finally:
        for p in started:
            p.close()
