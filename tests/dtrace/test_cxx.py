# SPDX-License-Identifier: MIT
"""A C++ program built through xprobes-dtrace: the generated header
compiles with g++ and clang++ (strict warnings) from a class template and a
namespace, accepts what the systemtap stub accepted (a const char * for
D's char *), and its probes are typed XProbes sites a module counts."""
import os
import shutil

import pytest

from .dx import DATA, LIBDIR, ok, run, xprobes

CXXFLAGS = ["-O2", "-g", "-Wall", "-Wextra", "-Werror", "-pedantic",
            "-Wshadow"]


def have(tool):
    return any(os.access(os.path.join(d, tool), os.X_OK)
               for d in os.environ.get("PATH", "/usr/bin").split(":"))


# C++20 deprecates ++ and used assignments of volatiles: a site's
# several-handler path has neither.
@pytest.fixture(scope="module", params=[("g++", "c++11"), ("clang++", "c++11"),
                                        ("g++", "c++20")],
                ids=["g++", "clang++", "g++-c++20"])
def cxx_prog(request, built):
    cxx, std = request.param
    if not have(cxx):
        pytest.skip(cxx + " not installed")
    out = os.path.join(built.dir, "prog-%s-%s" % (cxx, std))
    run([cxx, "-std=" + std, *CXXFLAGS, "-I", built.dir, "-o", out, os.path.join(DATA, "prog_cxx.cc"),
         built.gates, "-L", LIBDIR, f"-Wl,-rpath,{LIBDIR}", "-Wl,--no-as-needed",
         "-lxprobes"])
    return out


def test_cxx_sites_are_typed_and_counted(built, cxx_prog, progs):
    p = progs(cxx_prog)
    sites = ok(xprobes(p.pid, "sites"))
    assert "xpdtest:tick(int, const char*, uint64_t, void*)" in sites
    assert "xpdtest:anon(int, char*, unsigned long long, struct xpd_thing*)" in sites
    assert p.enabled() == {"tick": False, "lib": False}
    out = ok(xprobes(p.pid, "load", built.module))
    assert "refused" not in out, out
    assert p.enabled() == {"tick": True, "lib": False}
    assert p.ask("tick 25") == "tick 25 done"
    assert p.ask("all") == "all done"
    # Every hit seen, every argument converted to its declared type.
    assert ok(xprobes(p.pid, "command", "mod_xpd.so", "count")).strip() == "count 25 0 0"
    # A second module on the same sites: handlers after the first.
    second = os.path.join(built.dir, "mod_xpd_second.so")
    shutil.copy(built.module, second)
    assert "refused" not in ok(xprobes(p.pid, "load", second))
    assert p.ask("tick 10") == "tick 10 done"
    assert ok(xprobes(p.pid, "command", "mod_xpd.so", "count")).strip() == "count 35 0 0"
    assert ok(xprobes(p.pid, "command", "mod_xpd_second.so", "count")).strip() == "count 10 0 0"
    ok(xprobes(p.pid, "unload", "mod_xpd.so"))
    ok(xprobes(p.pid, "unload", "mod_xpd_second.so"))
    assert p.enabled() == {"tick": False, "lib": False}
