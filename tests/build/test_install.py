# SPDX-License-Identifier: MIT
"""`make install` gives a working tree: headers, a versioned library, the
tools, their modules, man pages and a pkg-config file that builds and links
a program whose agent the installed `xprobes` can talk to; installed into
the real /usr/local it runs ldconfig, so that program (and an autoconf
project's configure) runs without an rpath, and as another user it says
ldconfig must be run; `make uninstall` takes it all away."""
import os
import shutil
import subprocess
import tempfile

import pytest

from installed_use import build_run_attach, configure_runs, linker_cache

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))

FILES = ["include/xprobes/site.h", "include/xprobes/probe.h", "lib/libxprobes.so.0",
         "lib/libxprobes.so", "lib/libxprobes_trace.a", "bin/xprobes", "bin/xprobes-dtrace",
         "bin/mctop", "bin/mcsnoop", "bin/mclat", "bin/mcload",
         "lib/xprobes/modules/mctop.so", "lib/xprobes/modules/mcsnoop.so",
         "lib/xprobes/modules/mclat.so", "lib/xprobes/modules/conn_stats.so",
         "lib/pkgconfig/xprobes.pc", "lib/pkgconfig/xprobes-trace.pc",
         "share/man/man1/xprobes.1", "share/man/man1/mctop.1", "share/man/man1/xprobes-dtrace.1",
         "share/man/man3/xprobes_site.3", "share/man/man3/xprobes_probe.3"]


def make(*args):
    return subprocess.run(["make", "-s", "-C", ROOT, "B=" + BUILD, *args],
                          check=True, capture_output=True, text=True)


def files_under(top):
    return sorted(str(p.relative_to(top)) for p in top.rglob("*") if not p.is_dir())


def test_install_use_uninstall(tmp_path):
    prefix = tmp_path / "prefix"
    r = make("install", "PREFIX=" + str(prefix))
    for rel in FILES:
        assert (prefix / rel).exists(), rel
    # Not a directory the dynamic linker searches: install says what to do.
    assert "ldconfig" in r.stdout or "-Wl,-rpath," + str(prefix / "lib") in r.stdout
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    build_run_attach(tmp_path, str(prefix / "bin" / "xprobes"), env,
                     ["-Wl,-rpath," + str(prefix / "lib")])
    make("uninstall", "PREFIX=" + str(prefix))
    assert files_under(prefix) == []
    assert not (prefix / "include" / "xprobes").exists()
    assert not (prefix / "lib" / "xprobes").exists()


def test_install_as_a_user_says_to_run_ldconfig():
    """Not root: install cannot run ldconfig, and says it must be run."""
    as_user = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
    top = tempfile.mkdtemp(prefix="xprobes-install-")
    try:
        os.chmod(top, 0o777)
        prefix = os.path.join(top, "prefix")
        r = subprocess.run([*as_user, "make", "-s", "-C", ROOT, "B=" + BUILD, "install",
                            "PREFIX=" + prefix], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert os.path.exists(os.path.join(prefix, "lib", "libxprobes.so.0"))
        assert ("make install: run ldconfig as root, so that programs find libxprobes.so.0 in "
                + os.path.join(prefix, "lib")) in r.stdout
    finally:
        shutil.rmtree(top)


def parents(d, top):
    while d != top:
        yield d
        d = os.path.dirname(d)


@pytest.mark.skipif(os.geteuid() != 0, reason="installs into /usr/local: needs root")
def test_install_to_usr_local_runs_ldconfig(tmp_path):
    usr_local = "/usr/local"
    mine = [os.path.join(usr_local, rel) for rel in FILES]
    if any(os.path.lexists(f) for f in mine):
        pytest.skip("an XProbes is installed in /usr/local already: not touching it")
    # The directories install will make (lib/pkgconfig, share/man/man1, ...),
    # deepest first: uninstall leaves them, as they may be others'; this
    # test removes the ones it made.
    new_dirs = sorted({d for f in mine for d in parents(os.path.dirname(f), usr_local)
                       if not os.path.exists(d)}, key=len, reverse=True)
    try:
        make("install", "PREFIX=" + usr_local)
        assert "libxprobes.so.0 (libc6,x86-64) => /usr/local/lib/libxprobes.so.0" in linker_cache()
        # pkg-config's default path and no rpath: as a user builds.
        env = {k: v for k, v in os.environ.items()
               if k not in ("PKG_CONFIG_PATH", "LD_LIBRARY_PATH")}
        build_run_attach(tmp_path, "/usr/local/bin/xprobes", env)
        r = configure_runs(tmp_path, env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "whether we are cross compiling... no" in r.stdout
    finally:
        make("uninstall", "PREFIX=" + usr_local)
        for d in new_dirs:
            if os.path.isdir(d) and not os.listdir(d):
                os.rmdir(d)
    assert [f for f in mine if os.path.lexists(f)] == []
    assert [d for d in new_dirs if os.path.exists(d)] == []
    assert "/usr/local/lib/libxprobes" not in linker_cache()
