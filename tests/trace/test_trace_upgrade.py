# SPDX-License-Identifier: MIT
"""A program whose binary is renamed over by a new copy while it is traced,
as a package upgrade does: `trace stop` must work (the text it swaps back
is in the process already: the spare the start kept), the program runs on
untraced and computes the same, and a `trace start` after the upgrade is
refused cleanly, saying why.  The program runs as uid 65534 (when the test
is root), as a service does: it cannot open /proc/self/map_files, so the
file's old inode is out of its reach but through the spare.

Every wait is on a line from the program or on a command's exit."""
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from tracefix import BUILD, TIMEOUT, env, fixture, xprobes

NOBODY = 65534

pytestmark = pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None,
                                reason="needs setpriv (util-linux) to run as uid 65534")


class Masked:
    """prog_masked, copied to dir/bin/t/prog with the agent at dir/ (its
    runpath is $ORIGIN/../..)."""

    def __init__(self, cc, top):
        self.path = os.path.join(top, "bin", "t", "prog")
        os.makedirs(os.path.dirname(self.path))
        shutil.copy(fixture(f"prog_masked-{cc}"), self.path)
        shutil.copy(os.path.join(BUILD, "libxprobes.so.0"), top)
        for d, _, files in os.walk(top):
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o755)
        argv = [self.path]
        if os.geteuid() == 0:
            argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] + argv
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, env=env(), cwd="/")
        line = self.p.stdout.readline().strip()
        assert line.startswith("ready "), line
        self.pid = int(line.split()[1])

    def check(self):
        self.p.stdin.write("check\n")
        self.p.stdin.flush()
        m = re.fullmatch(r"rounds=(\d+) handled=(\d+) bad=(\d+)", self.p.stdout.readline().strip())
        assert m
        return tuple(int(g) for g in m.groups())

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
        assert self.p.wait(timeout=TIMEOUT) == 0


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_stop_after_the_binary_is_replaced(cc):
    top = tempfile.mkdtemp(prefix="xp-upgrade-")
    t = None
    try:
        t = Masked(cc, top)
        r = xprobes(t.pid, "trace start -b 64\n")
        assert r.returncode == 0 and re.search(r"^tracing \d+ functions$", r.stdout, re.M), \
            r.stdout + r.stderr
        # The upgrade: a new copy beside it, renamed over it.
        shutil.copy(t.path, t.path + ".new")
        os.chmod(t.path + ".new", 0o755)
        os.rename(t.path + ".new", t.path)
        r = xprobes(t.pid, "trace stop\n")
        assert r.returncode == 0 and re.search(r"^tracing stopped \(\d+ functions unpatched\)$",
                                               r.stdout, re.M), r.stdout + r.stderr
        with open(f"/proc/{t.pid}/maps") as f:
            text = [line for line in f if " r-xp " in line and "/bin/t/prog" in line]
        assert text and all(line.rstrip().endswith("(deleted)") for line in text), text
        rounds0, _, bad0 = t.check()
        rounds1, _, bad1 = t.check()
        while rounds1 == rounds0:  # it runs on
            rounds1, _, bad1 = t.check()
        assert bad0 == 0 and bad1 == 0
        # After the upgrade: refused, with the reason, and nothing changed.
        r = xprobes(t.pid, "trace start -b 64\n")
        assert r.returncode != 0 and "replaced or deleted" in r.stdout + r.stderr, \
            r.stdout + r.stderr
        r = xprobes(t.pid, "trace stop\n")  # still answers
        assert t.check()[2] == 0
        assert t.p.poll() is None
    finally:
        if t:
            t.close()
        shutil.rmtree(top, ignore_errors=True)
