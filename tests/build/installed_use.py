# SPDX-License-Identifier: MIT
"""What a user does with an installed XProbes, shared by test_install.py and
test_deb.py: build a program with the installed pkg-config file, run it, and
attach the installed `xprobes` to it; run an autoconf project's configure
with the same flags."""
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def pkg_flags(env=None):
    return subprocess.run(["pkg-config", "--cflags", "--libs", "xprobes"], env=env,
                          check=True, capture_output=True, text=True).stdout.split()


def build_run_attach(tmp_path, xprobes, env=None, extra=()):
    """Builds sites_prog.c with `pkg-config --cflags --libs xprobes` (and
    `extra` link flags), runs it and lists its sites with `xprobes`."""
    prog = tmp_path / "prog"
    subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", "-O2", "-o", str(prog),
                    os.path.join(HERE, "sites_prog.c"), *pkg_flags(env), *extra], check=True)
    needed = subprocess.run(["readelf", "-d", str(prog)], capture_output=True, text=True).stdout
    assert "libxprobes.so.0" in needed  # survives --as-needed
    p = subprocess.Popen([str(prog)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("ready"), p.stderr.read() if p.poll() is not None else line
        r = subprocess.run([xprobes, str(p.pid), "sites"], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        assert "build_item(const struct item*, int)" in r.stdout
    finally:
        p.kill()
        p.wait()


CONFIGURE_AC = "AC_INIT([uses-xprobes], [1])\nAC_PROG_CC\nAC_OUTPUT\n"


def configure_runs(tmp_path, env=None):
    """An autoconf project's configure with the library in LIBS: AC_PROG_CC
    runs a program linked with it ("checking whether we are cross
    compiling"), which fails to start if the dynamic linker cannot find
    libxprobes.so.0.  Returns configure's result."""
    proj = tmp_path / "autoconf"
    proj.mkdir()
    (proj / "configure.ac").write_text(CONFIGURE_AC)
    subprocess.run(["autoconf"], cwd=proj, check=True)
    flags = pkg_flags(env)
    cflags = [f for f in flags if f.startswith("-I")]
    libs = [f for f in flags if not f.startswith("-I")]
    return subprocess.run(["./configure", "CFLAGS=" + " ".join(cflags), "LIBS=" + " ".join(libs)],
                          cwd=proj, env=env, capture_output=True, text=True)


def linker_cache():
    """What the dynamic linker's cache holds (`ldconfig -p`)."""
    return subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
