# SPDX-License-Identifier: MIT
"""A traced program in a memory cgroup with a tight limit: a recording
must never be what kills it.  The rings are the program's memory, charged
to its cgroup: they are touched only as they fill, and the tool gives them
at most half the room below the limit (saying so), or refuses to start.

The cgroup is made under the test's own memory cgroup (v1 or v2, whichever
holds the memory controller here) and removed after.  Waits are on lines
from the program and on process exits."""
import contextlib
import os
import re
import subprocess

import pytest

from tracefix import TIMEOUT, XPROBES, env, fixture

MIB = 1 << 20


def memory_cgroup():
    """(directory of this process's memory cgroup, v2?), or None."""
    with open("/proc/self/cgroup") as f:
        lines = [ln.rstrip("\n").split(":", 2) for ln in f]
    for _, ctl, path in lines:
        if "memory" in ctl.split(","):
            d = "/sys/fs/cgroup/memory" + path.rstrip("/")
            if os.path.exists(os.path.join(d, "memory.limit_in_bytes")):
                return d, False
    for _, ctl, path in lines:
        if ctl == "":
            for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                d = root + path.rstrip("/")
                if os.path.exists(os.path.join(d, "memory.max")):
                    return d, True
    return None


class Cgroup:
    """A child memory cgroup of ours, limited to limit bytes."""

    def __init__(self, name, limit):
        found = memory_cgroup()
        if os.geteuid() != 0 or not found:
            pytest.skip("needs root and a memory cgroup")
        parent, self.v2 = found
        self.dir = os.path.join(parent, f"{name}-{os.getpid()}")
        if self.v2:
            with open(os.path.join(parent, "cgroup.subtree_control")) as f:
                if "memory" not in f.read().split():
                    pytest.skip("the memory controller is not enabled below our cgroup")
        try:
            os.mkdir(self.dir)
        except OSError as e:
            pytest.skip(f"cannot make a cgroup under {parent}: {e}")
        self.limit(limit)

    def limit(self, n):
        self.write("memory.max" if self.v2 else "memory.limit_in_bytes", str(n))

    def usage(self):
        return int(self.read("memory.current" if self.v2 else "memory.usage_in_bytes"))

    def oom_kills(self):
        text = self.read("memory.events" if self.v2 else "memory.oom_control")
        m = re.search(r"^oom_kill (\d+)$", text, re.M)
        return int(m.group(1)) if m else 0

    def read(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return f.read()

    def write(self, name, value):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(value)

    def popen(self, argv):
        """argv run inside the cgroup (it joins before it execs)."""
        procs = os.path.join(self.dir, "cgroup.procs")
        return subprocess.Popen(["sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "sh", *argv],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                env=env())

    def remove(self):
        os.rmdir(self.dir)


@contextlib.contextmanager
def threads_in_cgroup(name, limit, n):
    """prog_threads with n threads in a new cgroup of limit bytes: (cgroup,
    process, pid); killed if still there at the end, the cgroup removed."""
    cg = Cgroup(name, limit)
    p = None
    try:
        p = cg.popen([fixture("prog_threads-gcc"), str(n)])
        line = p.stdout.readline()
        assert line.startswith("ready "), line
        yield cg, p, int(line.split()[1])
    finally:
        if p and p.poll() is None:
            p.kill()
            p.wait()
        cg.remove()


def finish(p):
    """Ask it to quit: every call computed right, exit 0."""
    p.stdin.write("quit\n")
    p.stdin.flush()
    out = p.stdout.read()
    assert p.wait(timeout=TIMEOUT) == 0, out
    assert re.search(r"^calls \d+ bad 0$", out, re.M), out


def test_record_in_a_tight_cgroup_shrinks_the_rings(tmp_path):
    """8 threads in 300 MiB: `trace record` gave each thread a 64 MiB ring
    faulted in at start, and the kernel killed the program."""
    with threads_in_cgroup("xp-trace-cg", 300 * MIB, 8) as (cg, p, pid):
        r = subprocess.run([XPROBES, str(pid), "trace", "record", "-o", str(tmp_path / "rec"),
                            "-d", "2"], capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stdout + r.stderr
        m = re.search(rf"xprobes: trace start: process {pid}'s memory cgroup \(.*\) has (\d+) "
                      r"MiB free below its limit, and the trace's rings count against it: they "
                      r"get at most (\d+) MiB in all \(-B (\d+)\), (\d+) KiB a thread for its "
                      r"10 threads", r.stderr)
        assert m, r.stderr
        assert int(m.group(2)) <= int(m.group(1)) // 2 + 1
        assert int(m.group(4)) * 10 <= int(m.group(3))  # 8 workers, main, the agent
        assert re.search(r"trace record: \d+ records of 8 threads", r.stderr), r.stderr
        assert p.poll() is None, "the program died"
        finish(p)
        assert cg.oom_kills() == 0


def test_start_refused_when_the_cgroup_has_no_room():
    """A limit just above what the program uses: nothing is started, the
    program goes on untraced."""
    with threads_in_cgroup("xp-trace-cg-full", 300 * MIB, 2) as (cg, p, pid):
        cg.limit(cg.usage() + MIB)
        r = subprocess.run([XPROBES, str(pid), "trace", "start"], capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert r.returncode != 0
        assert re.search(rf"^xprobes: trace start: process {pid}'s memory cgroup \(.*\) has "
                         r"\d+ KiB free below its limit: too little for the trace's rings",
                         r.stderr, re.M), r.stderr
        st = subprocess.run([XPROBES, str(pid), "trace", "status"], capture_output=True,
                            text=True, timeout=TIMEOUT).stdout
        assert "tracing: off" in st, st
        cg.limit(300 * MIB)
        finish(p)
        assert cg.oom_kills() == 0
