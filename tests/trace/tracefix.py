# SPDX-License-Identifier: MIT
"""Helpers shared by the tracer's tests (tests/trace/): where the build
is, the fixtures it made, and a fixture program driven line by line.
Fixture programs print "ready PID" first; every wait is on a line from the
program or on a process exit, the timeout only a safety bound."""
import os
import re
import select
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD") or os.path.join(REPO, "build")
XPROBES = os.path.join(BUILD, "xprobes")
TIMEOUT = 120  # a bound on every wait, never a synchronisation


def fixture(name):
    """A program or library lib/trace.mk built under BUILD/tests/trace."""
    path = os.path.join(BUILD, "tests", "trace", name)
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: run `make fixtures`")
    return path


def trace_build(cc, src, out, cflags=(), ldflags=()):
    """Build src into out as `pkg-config xprobes-trace` builds a program,
    with this build's archive and agent; cflags before the source, ldflags
    (libraries) after."""
    subprocess.run([cc, *cflags, "-fpatchable-function-entry=5", "-o", out, src, *ldflags,
                    "-Wl,-u,__xprobes_trace_anchor", os.path.join(BUILD, "libxprobes_trace.a"),
                    "-L" + BUILD, "-Wl,-rpath," + BUILD, "-Wl,--no-as-needed", "-lxprobes"],
                   check=True, timeout=TIMEOUT)


def env():
    """The test's environment without anything that would load or silence the agent."""
    e = dict(os.environ)
    e.pop("XPROBES_AGENT", None)
    e.pop("LD_PRELOAD", None)
    return e


class LineProgram:
    """A fixture program on pipes: .pid from its "ready PID" line."""

    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, env=env())
        line = self.line()
        assert line.startswith("ready "), line
        self.pid = int(line.split()[1])

    def line(self):
        ready, _, _ = select.select([self.p.stdout], [], [], TIMEOUT)
        assert ready, "no line from the program"
        return self.p.stdout.readline().strip()

    def say(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def close(self):
        """Ask it to quit; it must exit with status 0."""
        if self.p.poll() is None:
            self.say("quit")
        assert self.p.wait(timeout=TIMEOUT) == 0


def wait_for(cond, what):
    """Poll cond until it holds; TIMEOUT only bounds it."""
    end = time.monotonic() + TIMEOUT
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.01)  # polling a condition, bounded: not a synchronisation


def xprobes(pid, script):
    """Run the lines of script through `xprobes PID` (its stdin)."""
    return subprocess.run([XPROBES, str(pid)], input=script, capture_output=True, text=True,
                          timeout=TIMEOUT, env=env())


def graph(text):
    """The calls of a graph as `xprobes trace cat` or `uftrace replay` prints
    it: (depth, name, microseconds or None while running) in order of entry.
    Comments (sites, events) are left out."""
    nodes, open_ = [], []
    for line in text.splitlines():
        if "|" not in line or line.lstrip().startswith(("#", "Time(us)", "---")):
            continue
        head, rest = line.split("|", 1)
        # After a mark of a long call (+ ! # @); uftrace says its unit.
        m = re.search(r"(\d+\.\d+)\s*(us|ms|s)?\b", head)
        dur = float(m.group(1)) * {"ms": 1e3, "s": 1e6}.get(m.group(2), 1) if m else None
        body = rest.strip()
        if body.startswith("/*"):
            continue
        if body.startswith("}"):
            i = open_.pop()
            nodes[i] = (nodes[i][0], nodes[i][1], dur)
            continue
        name = re.fullmatch(r"(.*)\(\)\s*(\{|;)", body)
        if not name:
            continue
        nodes.append((len(open_), name.group(1), dur if name.group(2) == ";" else None))
        if name.group(2) == "{":
            open_.append(len(nodes) - 1)
    return nodes


def requests(text):
    """Each outermost call of a graph (a kept request's, with --requests):
    (name, microseconds, [(depth - 1, name) of the calls under it])."""
    out = []
    for depth, name, dur in graph(text):
        if depth == 0:
            out.append((name, dur, []))
        else:
            assert out, f"{name} is outside every request:\n{text}"
            out[-1][2].append((depth - 1, name))
    return out
