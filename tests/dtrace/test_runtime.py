# SPDX-License-Identifier: MIT
"""A program built through xprobes-dtrace, running: its probes are typed
XProbes sites (xprobes sites, xprobes list), _ENABLED() follows
attachments, and bpftrace still sees them through the SDT notes."""
import os
import re
import subprocess

import pytest

from .dx import (TIMEOUT, LineReader, ok, parse_listing, skip_unless_root_bpftrace,
                 xprobes)

EXPECTED = {
    # Three call sites: one line, as the agent's `sites` prints it.
    "xpdtest:tick(int, const char*, uint64_t, void*) [3 locations]",
    "xpdtest:noargs()",
    "xpdtest:voidargs()",
    "xpdtest:str__arg(const char*)",
    "xpdtest:anon(int, char*, unsigned long long, struct xpd_thing*)",
    "xpdtest:many(int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, "
    "uint64_t, uintptr_t, char*, const void*, long)",
    "xpdtest:neg__value(int, short, signed char)",
}
LIB_EXPECTED = {"xpdtest:lib__call(int)"}


def test_sites_show_the_d_signatures(built, progs):
    p = progs(built.prog)
    objs = parse_listing(ok(xprobes(p.pid, "sites")))
    assert set(objs[built.prog]) == EXPECTED
    assert len(objs[built.prog]) == len(EXPECTED)
    assert set(objs[built.lib]) == LIB_EXPECTED


@pytest.mark.parametrize("which", ["prog", "prog_nopie"])
def test_list_file_shows_the_same(built, which):
    path = getattr(built, which)
    objs = parse_listing(ok(xprobes("list", path)))
    assert list(objs) == [path]
    assert set(objs[path]) == EXPECTED
    assert len(objs[path]) == len(EXPECTED)  # one line per probe


def test_list_process_covers_every_object(built, progs):
    p = progs(built.prog)
    objs = parse_listing(ok(xprobes("list", "-p", p.pid)))
    assert set(objs[built.prog]) == EXPECTED
    assert set(objs[built.lib]) == LIB_EXPECTED
    # Objects without probes (libc, the agent) are left out.
    for obj, lines in objs.items():
        assert lines, obj


def test_list_verbose_decodes_locations(built):
    out = ok(xprobes("list", "-v", built.prog))
    lines = out.splitlines()
    i = lines.index("  xpdtest:tick(int, const char*, uint64_t, void*) [3 locations]")
    sdt = lines[i + 1:i + 4]
    assert len(sdt) == 3
    for line in sdt:
        # -4@%edi -> "int32 in edi"; registers or stack slots, never sizes
        # that differ between call sites.
        m = re.fullmatch(r"    sdt 0x[0-9a-f]+: int32 (in|at) \S+, uint64 (in|at) \S+, "
                         r"uint64 (in|at) \S+, uint64 (in|at) \S+; semaphore 0x[0-9a-f]+", line)
        assert m, line
    assert re.search(r"\n    sdt 0x[0-9a-f]+: int32 = -1, int16 = -2, int8 = -3; semaphore", out)
    assert re.search(r"xpdtest:noargs\(\)\n    sdt 0x[0-9a-f]+: no arguments", out)


def test_enabled_follows_module_attachment(built, progs):
    p = progs(built.prog)
    assert p.enabled() == {"tick": False, "lib": False}
    out = ok(xprobes(p.pid, "load", built.module))
    assert out.startswith("loaded mod_xpd.so: 4 attachments"), out
    assert p.enabled() == {"tick": True, "lib": True}
    assert p.ask("tick 30") == "tick 30 done"
    assert p.ask("lib 7") == "lib 7 done"
    assert p.ask("all") == "all done"
    # Every hit seen, every argument converted to its declared type.
    assert ok(xprobes(p.pid, "command", "mod_xpd.so", "count")).strip() == "count 30 7 0"
    ok(xprobes(p.pid, "unload", "mod_xpd.so"))
    assert p.enabled() == {"tick": False, "lib": False}
    assert p.ask("tick 5") == "tick 5 done"


class Bpftrace:
    """bpftrace attached to the test program.  BEGIN prints "ready" once every
    probe is attached; the program's noargs probe makes bpftrace exit, which
    prints its maps.  (Stopping it with SIGINT instead can hang: a signal
    landing just before bpftrace's epoll_wait is not noticed.)"""

    def __init__(self, pid, prog_path, program):
        self.proc = subprocess.Popen(
            ["bpftrace", "-B", "line", "-p", str(pid), "-e",
             'BEGIN { printf("ready\\n"); } ' + program +
             f" usdt:{prog_path}:xpdtest:noargs {{ exit(); }}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out = LineReader(self.proc.stdout.fileno(), "bpftrace")
        try:
            while self.out.readline() != "ready":
                pass
        except (TimeoutError, EOFError):
            self.proc.kill()
            err = self.proc.stderr.read().decode(errors="replace")
            raise AssertionError(f"bpftrace did not start: {err}") from None

    def finish(self, prog):
        """Make the program fire noargs; returns what bpftrace printed."""
        assert prog.ask("all") == "all done"
        out = self.out.read_until_eof()
        self.proc.wait(timeout=TIMEOUT)
        return out

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=TIMEOUT)
        self.proc.stdout.close()
        self.proc.stderr.close()


def test_bpftrace_lists_the_probes(built, progs):
    skip_unless_root_bpftrace()
    p = progs(built.prog)
    r = subprocess.run(["bpftrace", "-l", "usdt:*", "-p", str(p.pid)], capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    seen = set()
    for line in r.stdout.splitlines():
        m = re.fullmatch(r"usdt:(.*):(\w+):(\w+)", line)
        if m:
            seen.add((os.path.basename(m.group(1)), m.group(2), m.group(3)))
    want = {("prog", "xpdtest", e.split(":")[1].split("(")[0]) for e in EXPECTED}
    assert len(want) == 7
    want.add(("libxpdlib.so", "xpdtest", "lib__call"))
    assert want <= seen, seen


def test_bpftrace_counts_hits_through_the_semaphore(built, progs):
    """A detached site skips its SDT nop, so bpftrace sees hits only because
    the kernel bumps the gate's semaphore half while it is attached."""
    skip_unless_root_bpftrace()
    p = progs(built.prog)
    assert p.enabled() == {"tick": False, "lib": False}
    bt = Bpftrace(p.pid, built.prog,
                  f"usdt:{built.prog}:xpdtest:tick {{ @hits = count(); "
                  "@bad = sum(arg0 <= 0 ? 1 : 0); @label[str(arg1)] = count(); }")
    try:
        assert p.enabled() == {"tick": True, "lib": False}
        assert p.ask("tick 25") == "tick 25 done"
        out = bt.finish(p)
    finally:
        bt.close()
    assert re.search(r"^@hits: 25$", out, re.M), out
    assert re.search(r"^@bad: 0$", out, re.M), out
    assert re.search(r"^@label\[label\]: 25$", out, re.M), out


def test_bpftrace_and_a_module_at_once(built, progs):
    skip_unless_root_bpftrace()
    p = progs(built.prog)
    ok(xprobes(p.pid, "load", built.module))
    bt = Bpftrace(p.pid, built.prog, f"usdt:{built.lib}:xpdtest:lib__call {{ @calls = count(); }}")
    try:
        assert p.ask("lib 12") == "lib 12 done"
        out = bt.finish(p)
    finally:
        bt.close()
    assert re.search(r"^@calls: 12$", out, re.M), out
    assert ok(xprobes(p.pid, "command", "mod_xpd.so", "count")).strip() == "count 0 12 0"
    # The module is still attached after bpftrace left.
    assert p.enabled()["lib"] is True
