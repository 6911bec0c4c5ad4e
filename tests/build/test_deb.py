# SPDX-License-Identifier: MIT
"""`make deb` builds XProbes' Debian packages with Debian's tools, lintian
finds no error in them, and they install, work and go away: dpkg installs
them on this machine, the packaged mctop answers --help and shows a
memcached's keys (injecting the packaged agent, loading the packaged
module), a program built against the installed pkg-config file runs
without an rpath and the packaged xprobes attaches to it (and injects the
packaged agent into a program that has none), then dpkg purges them and
nothing they brought is left.  Builds the whole tree once more in a
copy: 3 to 4 minutes here (7 when the machine is busy)."""
import os
import re
import subprocess
import sys
import time

import pytest

from installed_use import build_run_attach, linker_cache

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "memcached"))
import mcserver  # noqa: E402  (the real memcached, tests/memcached/mcserver.py)

memcached_bin = mcserver.memcached_bin  # the fixture that builds it (cached)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
PKGS = ["libxprobes0", "libxprobes-dev", "xprobes"]
MULTIARCH = "/usr/lib/x86_64-linux-gnu"
CACHED = r"libxprobes\.so\.0 \(.*\) => (/usr)?/lib/x86_64-linux-gnu/libxprobes\.so\.0"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="dpkg -i needs root")


def version():
    with open(os.path.join(ROOT, "include", "xprobes", "version.h")) as f:
        return re.search(r'#define XPROBES_VERSION "(.*)"', f.read()).group(1)


def installed(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return r.returncode == 0 and "installed" in r.stdout and "not-installed" not in r.stdout


def dpkg(*args):
    """dpkg, waiting (up to 2 minutes) while apt or dpkg elsewhere holds
    its lock."""
    deadline = time.monotonic() + 120
    while True:
        r = subprocess.run(["dpkg", *args], capture_output=True, text=True)
        if r.returncode == 0 or "lock" not in r.stderr or time.monotonic() > deadline:
            assert r.returncode == 0, r.stderr
            return r.stdout
        time.sleep(0.5)


def contents(deb):
    """The paths a .deb installs, as dpkg -L will list them."""
    out = subprocess.run(["dpkg-deb", "-c", deb], check=True, capture_output=True,
                         text=True).stdout
    paths = set()
    for line in out.splitlines():
        name = line.split(None, 5)[5].split(" -> ")[0]
        paths.add(os.path.normpath("/" + name))
    return paths - {"/"}


def named_xprobes():
    r = subprocess.run(["find", "/usr", "/etc", "/var/lib/dpkg/info", "-xdev",
                        "-iname", "*xprobes*"], capture_output=True, text=True)
    return set(r.stdout.split())


def test_deb_install_use_purge(tmp_path, memcached_bin):
    if any(installed(p) for p in PKGS):
        pytest.skip("XProbes packages are installed already: not touching them")
    r = subprocess.run(["make", "-s", "-C", ROOT, "B=" + BUILD, "deb"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert not re.search(r"^E: ", r.stdout + r.stderr, re.M)  # lintian's errors
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                          text=True).stdout.strip()
    debs = {p: os.path.join(BUILD, "deb", f"{p}_{version()}_{arch}.deb") for p in PKGS}
    paths = {p: contents(d) for p, d in debs.items()}
    everything = set().union(*paths.values())
    existed = {p for p in everything if os.path.lexists(p)}
    named_before = named_xprobes()
    try:
        dpkg("-i", *debs.values())
        for p in PKGS:
            assert installed(p), p
            listed = set(dpkg("-L", p).split("\n")) - {"", "/."}
            assert listed == paths[p], p
        assert f"{MULTIARCH}/libxprobes.so.0" in paths["libxprobes0"]
        assert {"/usr/include/xprobes/site.h", f"{MULTIARCH}/pkgconfig/xprobes.pc",
                f"{MULTIARCH}/libxprobes_trace.a", "/usr/share/man/man3/xprobes_site.3.gz"} \
            <= paths["libxprobes-dev"]
        assert {"/usr/bin/mctop", "/usr/bin/xprobes", "/usr/lib/xprobes/modules/mctop.so",
                "/usr/lib/xprobes/modules/mclat.so", "/usr/share/man/man1/mctop.1.gz"} \
            <= paths["xprobes"]
        # The README and the guide go with the tools (dh_compress may gzip them).
        for doc in ("README.md", "guide.md"):
            assert {f"/usr/share/doc/xprobes/{doc}", f"/usr/share/doc/xprobes/{doc}.gz"} \
                & paths["xprobes"], doc
        # The package's ldconfig trigger ran (the cache names /lib/..., the
        # same directory since /usr was merged).
        assert re.search(CACHED, linker_cache())

        # Built by the package's own make with Debian's hardening flags, not
        # taken from the tree's build directory.
        dyn = subprocess.run(["readelf", "-d", "/usr/bin/mctop"], capture_output=True,
                             text=True).stdout
        assert "BIND_NOW" in dyn
        h = subprocess.run(["/usr/bin/mctop", "--help"], capture_output=True, text=True)
        assert h.returncode == 0 and "mctop" in h.stdout, h.stderr
        v = subprocess.run(["/usr/bin/xprobes", "--version"], capture_output=True, text=True)
        assert version() in v.stdout + v.stderr

        env = {k: v for k, v in os.environ.items()
               if k not in ("PKG_CONFIG_PATH", "LD_LIBRARY_PATH")}
        build_run_attach(tmp_path, "/usr/bin/xprobes", env)
        injected_attach(tmp_path, env)
        mctop_on_memcached(memcached_bin, tmp_path)
    finally:
        dpkg("--purge", *reversed(PKGS))
    assert [p for p in PKGS if installed(p)] == []
    assert sorted(p for p in everything - existed if os.path.lexists(p)) == []
    assert named_xprobes() == named_before
    assert not re.search(CACHED, linker_cache())


def mctop_on_memcached(memcached_bin, tmp_path):
    """The packaged mctop on a memcached built with xprobes-dtrace and
    started without an agent: it injects the packaged agent and loads its
    module from /usr/lib/xprobes/modules."""
    mc = mcserver.Memcached(memcached_bin, str(tmp_path), preload=False)
    try:
        r = subprocess.run(["/usr/bin/mctop", "-p", str(mc.pid), "-C", "-r", "5", "0.2", "2"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "MEMCACHED KEY" in r.stdout
        with open(f"/proc/{mc.pid}/maps") as f:
            maps = f.read()
        assert f"{MULTIARCH}/libxprobes.so.0" in maps
    finally:
        mc.stop()


def injected_attach(tmp_path, env):
    """A program with sites and no agent: the packaged xprobes finds the
    packaged agent (../lib/<multiarch>/ from /usr/bin) and injects it."""
    flags = subprocess.run(["pkg-config", "--cflags", "xprobes"], env=env, check=True,
                           capture_output=True, text=True).stdout.split()
    prog = tmp_path / "noagent"
    subprocess.run(["gcc", "-std=gnu11", "-O2", "-o", str(prog),
                    os.path.join(HERE, "sites_prog.c"), *flags], check=True)
    p = subprocess.Popen([str(prog)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().startswith("ready")
        r = subprocess.run(["/usr/bin/xprobes", "--inject", str(p.pid), "sites"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "build_item(const struct item*, int)" in r.stdout
        with open(f"/proc/{p.pid}/maps") as f:
            assert f"{MULTIARCH}/libxprobes.so.0" in f.read()
    finally:
        p.kill()
        p.wait()
