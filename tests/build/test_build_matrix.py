"""Sites survive gcc and clang at -O0..-O3, LTO, --gc-sections and
-z start-stop-gc, in executables and shared libraries, in C and in C++:
each variant is built, run with the agent preloaded, attached to, and must
count exactly."""
import os
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


def build(cc, opt, link, with_lib, workdir, cxx=False):
    ext = ".cc" if cxx else ".c"
    if cxx:
        cc = CXX[cc]
    flags = (CXX_BASE if cxx else BASE) + [opt] + LINK_VARIANTS[link]
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


def run_variant(cc, opt, link, with_lib, module_so, cxx=False):
    with tempfile.TemporaryDirectory() as work:
        prog = build(cc, opt, link, with_lib, work, cxx)
        env = dict(os.environ, LD_PRELOAD=AGENT)
        env.pop("XPROBES_AGENT", None)
        p = subprocess.Popen([prog], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        try:
            ready = p.stdout.readline().split()
            assert ready[0] == "ready"
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
            p.stdin.write("hit 25\n")
            p.stdin.flush()
            assert p.stdout.readline().strip() == "done"
            res = xp(p.pid, "command", os.path.basename(module_so))
            want_lib = 25 if with_lib else 0
            assert res.stdout.strip() == "item=25 tick=25 lib=%d sum=%d" % (want_lib, 25 * 42)
            p.stdin.write("quit\n")
            p.stdin.flush()
            assert p.wait(timeout=30) == 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()


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
