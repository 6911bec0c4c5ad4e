# SPDX-License-Identifier: MIT
"""The recorder on a real traced program (prog_record, built by gcc and by
clang), through the agent's own `trace` commands on its control socket:
the buffers `trace buffers` lists are read from /proc/PID/mem (the test is
the program's parent, so it may) and decoded as the tool does, and must
hold exactly the calls the program made, nested as made: plain calls,
signal handlers (on the thread's stack and on a sigaltstack), longjmp,
a thread that ends, a fork()ed child returning through the trampoline.
Values passed in vector registers and variadic calls are unchanged while
traced.  Every wait is on a line from the program or a reply."""
import os
import struct
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, REPO)
from tests.integration.xp import (BUILD, TIMEOUT, LineReader, base_env,  # noqa: E402
                                  connect_agent, recv_frame, send_frame)

HEADER = struct.Struct("<IIiIQQQQ")  # struct xp_trace_buf up to tail (lib/trace/trace.h)
HEADER_SIZE = 64
MAGIC = 0x58505452
EXITED = 1
OVERWRITE = 2
KINDS = "EXSL"  # entry, exit, site, lost
UNWOUND = 1 << 63  # XP_TRACE_UNWOUND: an exit's call left by longjmp or an exception


class Prog:
    """prog_record, driven line by line, and its agent."""

    def __init__(self, path):
        if not os.path.exists(path):
            pytest.fail(f"{path} is missing: run `make fixtures`")
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=base_env())
        self.out = LineReader(self.p.stdout.fileno(), os.path.basename(path))
        self.pid = int(self.out.readline().split()[1])
        self.names = {}
        while (line := self.out.readline()) != "fns end":
            _, name, addr = line.split()
            self.names[int(addr, 16)] = name
        self.addr = {n: a for a, n in self.names.items()}
        self.sock = connect_agent(self.pid)

    def ask(self, line):
        self.p.stdin.write((line + "\n").encode())
        self.p.stdin.flush()
        return self.out.readline()

    def trace(self, args, ok=True):
        send_frame(self.sock, ("trace " + args).encode())
        status, text = recv_frame(self.sock)
        assert (status == 0) == ok, (args, text)
        return text

    def status(self):
        return dict(line.split(": ", 1) for line in self.trace("status").splitlines())

    def buffers(self):
        """{tid: (flags, lost, [(kind, name)])} from `trace buffers`."""
        lines = self.trace("buffers").splitlines()
        assert lines[0].startswith("clock start_tsc=")
        bufs = {}
        with open(f"/proc/{self.pid}/mem", "rb") as mem:
            for line in lines[1:]:
                word, *kv = line.split()
                if word in ("objects", "unbuffered", "tracing"):  # for recorders
                    continue
                assert word == "buf", line
                kv = dict(x.split("=") for x in kv)
                addr = int(kv["addr"], 16)
                magic, version, tid, flags, cap, head, lost, tail = HEADER.unpack(
                    os.pread(mem.fileno(), HEADER.size, addr))
                assert (magic, version, tid, cap) == (MAGIC, 2, int(kv["tid"]), int(kv["cap"]))
                # A ring: record i at rec[i % cap]; a flight recorder holds the newest cap.
                first = max(tail, head - cap) if flags & OVERWRITE else tail
                assert 0 <= head - first <= cap
                raw = b"".join(os.pread(mem.fileno(), 16, addr + HEADER_SIZE + 16 * (i % cap))
                               for i in range(first, head))
                recs, last = [], 0
                for time, a in struct.iter_unpack("<QQ", raw):
                    assert time >> 2 >= last, "timestamps go back"
                    last = time >> 2
                    kind = KINDS[time & 3]
                    if kind == "X" and a & UNWOUND:  # the call was left, not returned from
                        kind, a = "U", a & ~UNWOUND
                    recs.append((kind, self.names.get(a, hex(a))))
                bufs[tid] = (flags, lost, recs)
        return bufs

    def main_records(self):
        return self.buffers()[self.pid][2]

    def close(self):
        self.sock.close()
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


@pytest.fixture(params=["gcc", "clang"])
def prog(request):
    p = Prog(os.path.join(BUILD, "tests", "trace", f"prog_record-{request.param}"))
    yield p
    p.close()


def graph(*calls):
    """Records of nested calls: graph(("a", ("b",)), ("c",)) -> E a E b X b X a E c X c."""
    out = []
    for name, *children in calls:
        out.append(("E", name))
        out += graph(*children)
        out.append(("X", name))
    return out


CALLS = graph(("calls_top", ("calls_a", ("calls_leaf",), ("calls_leaf",)),
               ("calls_b", ("calls_leaf",))))


def known(recs):
    """Only the records of the functions the program named (not main's helpers)."""
    return [r for r in recs if not r[1].startswith("0x")]


def test_calls_recorded_as_nested(prog):
    assert prog.trace("start").startswith("tracing ")
    assert prog.ask("calls") == "calls 11"
    assert prog.trace("stop").startswith("tracing stopped")
    assert prog.status()["tracing"] == "off"
    assert prog.main_records() == CALLS
    # Stopped: the program runs as before, and nothing more is recorded.
    assert prog.ask("calls") == "calls 11"
    assert prog.main_records() == CALLS


def test_vector_and_variadic_values_unchanged(prog):
    untraced = prog.ask("floats")
    prog.trace("start")
    assert prog.ask("floats") == untraced
    prog.trace("stop")
    got = prog.main_records()
    for fn in ("f_mul", "d_mix", "ld_mul", "p_make", "v_sum"):
        assert got.count(("E", fn)) == 1 and got.count(("X", fn)) == 1, (fn, got)


@pytest.mark.parametrize("how", ["signal", "altsig"])
def test_signal_handler_inside_traced_code(prog, how):
    prog.trace("start")
    assert prog.ask(how) == f"{how} hits=1"
    prog.trace("stop")
    assert known(prog.main_records()) == graph(
        ("sig_outer", ("on_usr1", ("sig_leaf",))))


def test_longjmp_closes_the_frames_it_leaves(prog):
    prog.trace("start")
    assert prog.ask("longjmp") == "longjmp 7"
    # And the stack still returns right afterwards.
    assert prog.ask("calls") == "calls 11"
    prog.trace("stop")
    # Closed as left (unwound), not as returned, when jmp_after() lands
    # on their stack.
    down = [("E", "jmp_down")] * 4 + [("U", "jmp_down")] * 4
    want = [("E", "jmp_top")] + down + graph(("jmp_after",)) + [("X", "jmp_top")] + CALLS
    assert prog.main_records() == want


def wait_gone(pid, tid):
    deadline = time.monotonic() + TIMEOUT
    while os.path.exists(f"/proc/{pid}/task/{tid}"):
        assert time.monotonic() < deadline, f"thread {tid} still there"
        time.sleep(0.001)


def test_thread_that_ended_keeps_its_buffer_until_clear(prog):
    prog.trace("start")
    tid = int(prog.ask("thread").split()[1])
    prog.ask("calls")
    prog.trace("stop")
    # pthread_join returns a moment before the thread is gone from the
    # process; the agent marks it at the first command after that.
    wait_gone(prog.pid, tid)
    bufs = prog.buffers()
    flags, lost, recs = bufs[tid]
    assert flags & EXITED and lost == 0
    assert known(recs) == CALLS
    assert not bufs[prog.pid][0] & EXITED
    assert prog.status()["threads"] == "2 with buffers (1 ended)"
    assert prog.trace("clear") == "trace data cleared\n"
    assert prog.buffers() == {}
    assert prog.status()["records"].startswith("0 used")


def buffer_of(prog, tid):
    """(addr, head, tail) of tid's buffer, as `trace buffers` lists it."""
    for line in prog.trace("buffers").splitlines():
        kv = dict(x.split("=") for x in line.split()[1:])
        if line.startswith("buf ") and int(kv["tid"]) == tid:
            addr = int(kv["addr"], 16)
            with open(f"/proc/{prog.pid}/mem", "rb") as mem:
                *_, head, lost, tail = HEADER.unpack(os.pread(mem.fileno(), HEADER.size, addr))
            return addr, head, tail
    return None


def test_ended_thread_drained_by_a_reader_is_freed(prog):
    """A recording drains as it goes (it writes tail); a thread that has
    ended and whose records were all drained gives its ring back, so a
    long recording of a program that makes and ends threads does not keep
    them all.  Not drained (tail short of head), it is kept."""
    prog.trace("start")
    tid = int(prog.ask("thread").split()[1])
    wait_gone(prog.pid, tid)
    addr, head, tail = buffer_of(prog, tid)
    assert head > 0 and tail == 0
    assert buffer_of(prog, tid)  # undrained: kept however often it is listed
    with open(f"/proc/{prog.pid}/mem", "r+b") as mem:  # as the drainer does
        os.pwrite(mem.fileno(), struct.pack("<Q", head - 1), addr + HEADER.size - 8)
    assert buffer_of(prog, tid)  # one record not yet read: kept
    with open(f"/proc/{prog.pid}/mem", "r+b") as mem:
        os.pwrite(mem.fileno(), struct.pack("<Q", head), addr + HEADER.size - 8)
    prog.trace("status")  # the next command sweeps
    assert buffer_of(prog, tid) is None
    assert prog.ask("calls") == "calls 11"  # the others trace on
    prog.trace("stop")
    assert known(prog.main_records()) == CALLS


def test_budget_bounds_all_threads_buffers(prog):
    """-B: all threads' buffers together stay within the budget.  A thread
    that would pass it gets a smaller ring, and below 64 KiB none: its
    records are dropped and counted, never silently."""
    prog.trace("start -b 1024 -B 1100")  # the main thread's 1 MiB, and 76 KiB
    assert prog.ask("calls") == "calls 11"  # the main thread's ring first
    tid = int(prog.ask("thread").split()[1])
    addr, head, _ = buffer_of(prog, tid)
    assert head > 0  # the second thread got a ring, made smaller
    with open(f"/proc/{prog.pid}/mem", "rb") as mem:
        cap = HEADER.unpack(os.pread(mem.fileno(), HEADER.size, addr))[4]
    assert cap == 4096, prog.trace("buffers")  # 64 KiB, not 1 MiB
    tid2 = int(prog.ask("thread").split()[1])  # nothing left for a third
    assert prog.ask("calls") == "calls 11"
    prog.trace("stop")
    assert buffer_of(prog, tid2) is None
    status = prog.status()
    assert int(status["unbuffered"].split()[0]) > 0, status
    assert "-B 1100 KiB in all" in status["options"]
    assert known(prog.main_records()) == CALLS + CALLS  # the main thread recorded all along


def test_fork_child_returns_through_the_trampoline(prog):
    """The child returns from fork_parent(), hooked before the fork, and
    then calls traced functions (recording stopped in it): it exits 0
    only if all of that computed right."""
    prog.trace("start")
    assert prog.ask("fork") == "fork 0"
    prog.trace("stop")
    assert known(prog.main_records()) == graph(("fork_parent",))


def test_depth_limit_and_thread_selection(prog):
    prog.trace("start -D 2")
    prog.ask("calls")
    prog.trace("stop")
    assert prog.main_records() == graph(("calls_top", ("calls_a",), ("calls_b",)))
    prog.trace("clear")
    main_tid = int(prog.ask("tid").split()[1])
    prog.trace(f"start -T {main_tid}")
    tid = int(prog.ask("thread").split()[1])
    prog.ask("calls")
    prog.trace("stop")
    bufs = prog.buffers()
    assert tid not in bufs
    assert known(bufs[main_tid][2]) == CALLS


def test_selected_functions_only(prog):
    leaf, b = prog.addr["calls_leaf"], prog.addr["calls_b"]
    assert prog.trace(f"select {leaf:#x} {b:x}") == "selected: 2 functions\n"
    # Accumulated, a repeat counted once, and a bad address anywhere adds none.
    assert prog.trace(f"select {leaf:#x}") == "selected: 2 functions\n"
    assert "not the start" in prog.trace(f"select {leaf + 1:#x}", ok=False)
    assert prog.trace("select none").startswith("selected: none")
    assert prog.trace(f"select {leaf:#x}") == "selected: 1 function\n"
    assert prog.trace("start") == "tracing 1 function\n"
    prog.ask("calls")
    prog.trace("stop")
    assert prog.main_records() == graph(("calls_leaf",)) * 3
    assert prog.trace("select none").startswith("selected: none")


def test_full_buffer_drops_counts_and_stays_balanced(prog):
    prog.trace("start -b 1")  # 64 records
    for _ in range(10):
        assert prog.ask("calls") == "calls 11"
    prog.trace("stop")
    flags, lost, recs = prog.buffers()[prog.pid]
    assert len(recs) <= 64 and lost > 0
    assert len(recs) + lost == 10 * len(CALLS)
    depth = 0
    for kind, _ in recs:  # every recorded call closed, never below zero
        depth += 1 if kind == "E" else -1
        assert depth >= 0
    assert depth == 0
    assert prog.status()["lost"] == f"{lost} records (buffers full)"


FLOATS = {"f_mul", "d_mix", "ld_mul", "p_make", "v_sum"}


def test_overwrite_keeps_the_newest_and_reads_while_recording(prog):
    """--overwrite (a flight recorder): the buffer keeps its newest records,
    so what came first (the float calls) is gone and the last calls are
    there; nothing counts as lost; and reading does not stop it."""
    prog.trace("start --overwrite -b 1")  # 64 records
    prog.ask("floats")
    for _ in range(10):
        assert prog.ask("calls") == "calls 11"
    status = prog.status()
    assert status["tracing"] == "on"
    assert "overwrite" in status["options"]
    flags, lost, recs = prog.buffers()[prog.pid]
    assert flags & OVERWRITE and lost == 0
    assert len(recs) == 64
    assert not [r for r in recs if r[1] in FLOATS], recs  # the oldest are gone
    assert recs[-len(CALLS):] == CALLS  # the newest are whole
    # Still recording after the read: one more round is there.
    assert prog.ask("calls") == "calls 11"
    assert prog.buffers()[prog.pid][2][-len(CALLS):] == CALLS
    # The tool's `trace snapshot` shows the last calls and leaves it on.
    snap = subprocess.run([os.path.join(BUILD, "xprobes"), str(prog.pid), "trace", "snapshot"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert snap.returncode == 0 and "calls_top() {" in snap.stdout, snap.stdout + snap.stderr
    assert not [f for f in FLOATS if f + "()" in snap.stdout], snap.stdout
    assert prog.status()["tracing"] == "on"
    prog.trace("stop")
    # Without --overwrite the same run keeps the oldest and counts the rest lost.
    prog.trace("clear")
    prog.trace("start -b 1")
    prog.ask("floats")
    for _ in range(10):
        prog.ask("calls")
    prog.trace("stop")
    _, lost, recs = prog.buffers()[prog.pid]
    assert lost > 0 and [r for r in recs if r[1] in FLOATS]


BAD = [
    ("start -b 0", "-b needs a buffer size"),
    ("start -D", "-D needs a depth"),
    ("start -T abc", "-T needs a thread id"),
    ("start -x", "unknown option '-x'"),
    ("select zz", "'zz' is not a hex address"),
    ("select 0x10", "0x10 is not the start of an instrumented function"),
    ("frob", "unknown subcommand 'frob'"),
    ("status now", "unexpected argument 'now'"),
]


@pytest.mark.parametrize("args,why", BAD)
def test_bad_input_says_why_and_changes_nothing(prog, args, why):
    before = prog.status()
    assert why in prog.trace(args, ok=False)
    assert prog.status() == before
    assert prog.ask("calls") == "calls 11"
    assert prog.buffers() == {}


def test_start_twice_is_refused(prog):
    prog.trace("start")
    assert "already on" in prog.trace("start -b 8", ok=False)
    prog.ask("calls")
    assert prog.status()["options"].startswith("-b 1024 KiB")
    prog.trace("stop")
    assert prog.main_records() == CALLS


# ---- C++ exceptions through traced frames ---------------------------------

@pytest.fixture(scope="module", params=["g++", "clang++"])
def cxx_prog(request, tmp_path_factory):
    """record_cxx.cc built as pkg-config xprobes-trace would have it."""
    out = str(tmp_path_factory.mktemp("cxx") / "record_cxx")
    subprocess.run([request.param, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-O2", "-g",
                    "-fpatchable-function-entry=5", "-o", out, os.path.join(HERE, "record_cxx.cc"),
                    "-Wl,-u,__xprobes_trace_anchor", os.path.join(BUILD, "libxprobes_trace.a"),
                    "-L" + BUILD, "-Wl,-rpath," + BUILD, "-Wl,--no-as-needed", "-lxprobes"],
                   check=True, timeout=TIMEOUT)
    return out


def unwound(depth):
    """What cx_throw(depth - 1) leaves when unwound: each frame's Guard
    calls cx_unwound() in it, then the frame is gone (left, not returned
    from: its exit is marked unwound)."""
    return (graph(("cx_unwound", ("cx_leaf",))) + [("U", "cx_throw")]) * depth


def test_exceptions_through_traced_frames(cxx_prog):
    """Thrown 4 frames down, through destructors that call traced code,
    caught in a traced frame; and caught, rethrown and caught again: the
    program computes as untraced, and every unwound frame is closed in
    place, before the code of the catch."""
    p = Prog(cxx_prog)
    try:
        want = [p.ask("throw"), p.ask("rethrow")]
        p.trace("start")
        assert [p.ask("throw"), p.ask("rethrow")] == want == ["throw 14", "rethrow 21"]
        # And the stack still returns right afterwards.
        assert p.ask("throw") == "throw 14"
        p.trace("stop")
        throw = ([("E", "cx_top"), ("E", "cx_catch")] + [("E", "cx_throw")] * 4 + unwound(4)
                 + graph(("cx_leaf",)) + [("X", "cx_catch")] + graph(("cx_leaf",))
                 + [("X", "cx_top")])
        rethrow = ([("E", "cx_outer"), ("E", "cx_rethrow")] + [("E", "cx_throw")] * 2
                   + unwound(2) + [("U", "cx_rethrow")] + graph(("cx_leaf",))
                   + [("X", "cx_outer")])
        assert known(p.main_records()) == throw + rethrow + throw
    finally:
        p.close()


def balanced_prefix(recs):
    """Never an exit without its entry (calls may still be open)."""
    depth = 0
    for kind, name in recs:
        assert kind in "EX", (kind, name)
        depth += 1 if kind == "E" else -1
        assert depth >= 0
    return depth


def test_signal_storm_inside_the_hook(prog):
    """SIGALRM every 20 us lands anywhere, in the entry hook and the exit
    trampoline too; its handler calls traced code.  Results are
    unchanged and every call recorded is closed."""
    prog.trace("start -b 262144")
    assert prog.ask("storm 300") == "storm bad=0 hits=300"
    # The hook's state survived the storm: a plain call after it records.
    # (Three times under load the storm's own calls_top calls were missing
    # while its handlers' were there: a handler that made the thread's
    # first traced call between the hook's read of its state and the
    # making of it left the thread two states, two buffers of one tid, of
    # which the reader kept the handler's.  trace_record.c's thread_new
    # now takes the handler's state.)
    assert prog.ask("calls") == "calls 11"
    prog.trace("stop")
    flags, lost, recs = prog.buffers()[prog.pid]
    assert lost == 0
    assert balanced_prefix(recs) == 0
    # Handlers that ran while the thread was inside the hook are not
    # recorded (the hook does not reenter itself); the others are.
    assert 0 < recs.count(("E", "on_prof")) <= 300
    assert recs.count(("E", "calls_top")) == recs.count(("X", "calls_top")) > 0


def test_start_stop_clear_while_threads_call(prog):
    """Two threads call traced functions flat out while tracing starts,
    stops and clears 200 times: they compute right throughout, and no
    buffer ever holds an exit without its entry."""
    assert prog.ask("spin") == "spinning"
    for i in range(200):
        prog.trace("start -b 64")
        if i % 10 == 0:
            for flags, lost, recs in prog.buffers().values():
                balanced_prefix(recs)
        prog.trace("stop")
        if i % 3 == 0:
            prog.trace("clear")
    assert prog.ask("spin stop") == "spun bad=0 calls=both"
    for flags, lost, recs in prog.buffers().values():
        assert balanced_prefix(recs) == 0


def test_pthread_exit_inside_traced_frames(prog):
    """The forced unwind stops at the first hooked frame (the trampoline's
    return address is undefined to it) and glibc ends the thread from
    there: the program lives on, the thread's entries are kept."""
    prog.trace("start")
    tid = int(prog.ask("thread exit").split()[2])
    assert prog.ask("calls") == "calls 11"
    prog.trace("stop")
    wait_gone(prog.pid, tid)
    flags, lost, recs = prog.buffers()[tid]
    assert flags & EXITED
    assert known(recs)[:4] == [("E", "exit_down")] * 4
    assert prog.main_records()[-len(CALLS):] == CALLS
