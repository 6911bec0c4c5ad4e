"""`make install` gives a working tree: headers, a versioned library, the
tools, man pages and a pkg-config file that builds and links a program
whose agent the installed `xprobes` can talk to."""
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))


def test_install_and_use(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["make", "-s", "-C", ROOT, "B=" + BUILD, "install", "PREFIX=" + str(prefix)],
                   check=True, capture_output=True)
    for rel in ["include/xprobes/site.h", "include/xprobes/probe.h", "lib/libxprobes.so.0",
                "lib/libxprobes.so", "bin/xprobes", "bin/xprobes-dtrace",
                "lib/pkgconfig/xprobes.pc", "share/man/man1/xprobes.1",
                "share/man/man1/xprobes-dtrace.1", "share/man/man3/xprobes_site.3",
                "share/man/man3/xprobes_probe.3"]:
        assert (prefix / rel).exists(), rel
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "xprobes"], env=env,
                           check=True, capture_output=True, text=True).stdout.split()
    prog = tmp_path / "prog"
    subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", "-O2", "-o", str(prog),
                    os.path.join(HERE, "sites_prog.c"), *flags,
                    "-Wl,-rpath," + str(prefix / "lib")], check=True)
    needed = subprocess.run(["readelf", "-d", str(prog)], capture_output=True, text=True).stdout
    assert "libxprobes.so.0" in needed  # survives --as-needed
    p = subprocess.Popen([str(prog)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().startswith("ready")
        r = subprocess.run([str(prefix / "bin" / "xprobes"), str(p.pid), "sites"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "build_item(const struct item*, int)" in r.stdout
    finally:
        p.kill()
        p.wait()
