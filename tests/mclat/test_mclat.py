# SPDX-License-Identifier: MIT
"""mclat against the real memcached build under mcload: every
read batch is counted once, its stages sum to its total, the server-side
total stays within what mcload measured, a delay inside memcached shows in
the memcached stage only, and a worker kept busy shows in the queued
connection's epoll/wait stages only.  Without BPF only the memcached stage
is printed.  BPF tests are skipped, with mclat's own reason, when the
kernel programs cannot be loaded.

The stage tests run in both modes: --all, and sampled with one window
that covers the whole test (the window's mechanics: programs attached at
its start, detached at its end).  The window edges themselves are tested
in test_mclat_sampling.py."""
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
MCLAT = os.path.join(BUILD, "mclat")
MCLOAD = os.path.join(BUILD, "mcload")
DELAY_MODULE = os.path.join(BUILD, "tests", "mclat", "mod_delay.so")
DELAY_NS = 2000000  # tests/mclat/mod_delay.c

KERNEL_STAGES = ["rx", "tcpip_rx", "epoll", "wait", "read"]
STAGES = KERNEL_STAGES + ["memcached", "tx"]


sys.path.insert(0, os.path.join(ROOT, "tests", "memcached"))
import mcserver as _mc  # noqa: E402  (the real memcached, tests/memcached/mcserver.py)
xp = _mc.xp
recv_until = _mc.recv_until
memcached_bin = _mc.memcached_bin

DEADLINE = int(os.environ.get("MCLAT_TEST_DEADLINE", "120"))  # safety net only: every wait ends on a line or an exit


@pytest.fixture
def memcached(memcached_bin, tmp_path):
    mc = _mc.Memcached(memcached_bin, str(tmp_path))
    yield mc
    mc.stop()


class Mclat:
    """mclat on mc; returns once it says it is tracing (module loaded and,
    with BPF, programs attached)."""

    def __init__(self, mc, *args, need_bpf=True, prefix=()):
        self.proc = subprocess.Popen([*prefix, MCLAT, "-p", str(mc.pid), *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True)
        self.out = queue.Queue()
        self.lines = []
        threading.Thread(target=self._pump, daemon=True).start()
        self.errors = []
        for line in self.proc.stderr:
            self.errors.append(line.rstrip("\n"))
            if line.startswith("mclat: tracing"):
                break
        else:
            raise AssertionError("mclat ended: " + "\n".join(self.errors))
        self.tracing = line  # later lines (--metrics') go to errors as they come
        threading.Thread(target=self._drain_err, daemon=True).start()
        self.bpf = "with BPF" in line
        if need_bpf and not self.bpf:
            self.finish()
            pytest.skip("mclat cannot load its BPF programs: " + " ".join(self.errors))

    def _pump(self):
        for line in self.proc.stdout:
            self.out.put(line.rstrip("\n"))
        self.out.put(None)

    def _drain_err(self):
        for line in self.proc.stderr:
            self.errors.append(line.rstrip("\n"))

    def wait_line(self, pred, what):
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                line = self.out.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError("mclat never printed " + what)
            assert line is not None, "mclat ended before " + what + ": " + "\n".join(self.errors)
            self.lines.append(line)
            if pred(line):
                return line

    def finish(self):
        """SIGINT (mclat prints what it has as a last interval); every line."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        rc = self.proc.wait(timeout=DEADLINE)
        while True:
            line = self.out.get(timeout=DEADLINE)
            if line is None:
                break
            self.lines.append(line)
        assert rc == 0, "\n".join(self.errors)
        return self.lines


def parse_json(lines, windows=None):
    intervals, batches = [], []
    for line in lines:
        obj = json.loads(line)
        if "window" in obj:
            if windows is not None and "close_ns" in obj["window"]:
                windows.append(obj["window"])
        elif "batch" in obj:
            batches.append(obj["batch"])
        else:
            intervals.append(obj)
    return intervals, batches


# (options, interval): every request, or sampled with a window of 9.9 s
# opened before mclat says it is tracing, so the whole test lies in it.
MODES = {"all": (["--all"], "1"), "sampled": (["--sample", "99%"], "10")}


@pytest.fixture(params=sorted(MODES))
def mode(request):
    return MODES[request.param]


def in_a_window(b, windows):
    end = b["at_ns"] + b["total_ns"]
    return any(w["open_ns"] <= b["at_ns"] and end <= w["close_ns"] for w in windows)


def mcload(mc, *args):
    r = subprocess.run([MCLOAD, "-s", "127.0.0.1:%d" % mc.port, "--json", *map(str, args)],
                       capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["completed"] == res["requests"] and res["server_errors"] == 0
    return res


@pytest.fixture(params=["events", "raw", "refused"])
def syscalls(request, monkeypatch):
    """Both ways mclat takes the syscall boundaries: the syscalls:* trace
    events (tracefs, mounted for the moment if need be) or the raw
    sys_enter/sys_exit tracepoints it falls back to, here forced by
    MCLAT_RAW_SYSCALLS or taken because the kernel refused the events
    (MCLAT_TEST_REFUSE_EVENTS: the third opened, after two attached).
    Returns what the tracing line says."""
    if request.param == "raw":
        monkeypatch.setenv("MCLAT_RAW_SYSCALLS", "1")
        return "with BPF (raw syscall tracepoints: MCLAT_RAW_SYSCALLS is set)"
    if request.param == "refused":
        monkeypatch.setenv("MCLAT_TEST_REFUSE_EVENTS", "3")
        return ("with BPF (raw syscall tracepoints: syscall trace events: "
                "Permission denied)")
    monkeypatch.setenv("MCLAT_RAW_SYSCALLS", "0")  # 0 forces nothing
    return "with BPF,"


def tracefs_mounts():
    with open("/proc/mounts") as f:
        return sorted(line for line in f if line.split()[2] == "tracefs")


def test_counts_stages_and_client_latency(memcached, syscalls, mode):
    n = 3000
    before = tracefs_mounts()
    # need_bpf=False: a failure to attach must fail here, not skip.
    m = Mclat(memcached, *mode[0], "--json", "--batches", mode[1], need_bpf=False)
    assert syscalls in m.tracing, m.errors
    # tracefs is as mclat found it (it unmounts what it had to mount).
    assert tracefs_mounts() == before
    res = mcload(memcached, "-n", n, "-c", 4, "-P", 1)
    windows = []
    intervals, batches = parse_json(m.finish(), windows)
    assert all(i["cut"] == 0 for i in intervals), intervals
    if "--all" not in mode[0]:
        # One window, closed by the interrupt, holding every batch.
        assert len(windows) == 1 and all(in_a_window(b, windows) for b in batches)
    # One read batch per request at pipeline depth 1, each counted once:
    # measured (count), or partial (a packet that met its socket busy went
    # to the backlog and lost its rx boundary: mclat(1), rare at this
    # depth), never dropped or unmatched.
    counted = sum(i["count"] for i in intervals)
    partial = sum(i["partial"] for i in intervals)
    assert counted + partial == n, intervals
    assert partial <= n // 100, intervals
    assert all(i["unmatched"] == 0 and i["lost"] == 0 for i in intervals)
    assert len(batches) == counted
    for b in batches:
        assert sum(b[s + "_ns"] for s in STAGES) == b["total_ns"], b
    # Server side (first packet in to reply out) within the client's
    # send-to-reply time; mcload's percentiles are its buckets' upper
    # bounds, so comparing each rank is sound.
    # The batches measured are the requests less the partial ones, each
    # no longer than its request: so the server's k-th longest is at most
    # the client's k-th longest.  Compare at the client's rank counted from
    # the top (nearest rank on the smaller set could sit one rank higher:
    # it failed so when 874.6 us fell just past the bucket bounding p99).
    totals_us = sorted((b["total_ns"] / 1000 for b in batches), reverse=True)
    lat = res["latency_us"]
    for p in (50, 90, 99):
        from_top = n - max(1, -(-n * p // 100)) + 1
        if from_top <= len(totals_us):
            assert totals_us[from_top - 1] <= lat["p%d" % p], p
    assert totals_us[0] <= lat["max"]


def test_pipelined_requests_count_per_read_batch(memcached, mode):
    """8 requests in flight per connection: memcached reads several at
    once, and mclat counts read batches, never more than the requests."""
    n = 4000
    m = Mclat(memcached, *mode[0], "--json", "--batches", mode[1])
    mcload(memcached, "-n", n, "-c", 2, "-P", 8)
    intervals, batches = parse_json(m.finish())
    assert all(i["per"] == "read batch" and i["unmatched"] == 0 for i in intervals)
    counted = sum(i["count"] for i in intervals)
    assert 0 < counted and counted + sum(i["partial"] for i in intervals) <= n
    assert len(batches) == counted
    for b in batches:
        assert sum(b[s + "_ns"] for s in STAGES) == b["total_ns"], b


MEANS_HEAD = re.compile(r"\d\d:\d\d:\d\d \(us\) ")


def means(lines):
    """The means lines' fields (stage=us ... count=N ...), each line after
    its local time and unit, which every one of them starts with."""
    found = [l for l in lines if "count=" in l and not l.startswith("{")]
    assert all(MEANS_HEAD.match(l) for l in found), found
    return [l[len("00:00:00 (us) "):] for l in found]


def test_text_percentiles_and_hist(memcached, mode):
    m = Mclat(memcached, *mode[0], "--percentiles", "--hist", "memcached", mode[1])
    mcload(memcached, "-n", 500, "-c", 2)
    lines = m.finish()
    rows = [l for l in means(lines) if l.startswith("rx=")]
    # Every request is in some line: measured (count), or said not to be
    # (unmatched, partial: a packet that went to the socket's backlog
    # under load loses its rx boundary).
    def field(line, name):
        for kv in line.split():
            if kv.startswith(name + "="):
                return int(kv.split("=")[1])
        return 0
    assert sum(field(l, "count") + field(l, "unmatched") + field(l, "partial")
               for l in rows) == 500, rows
    fields = [kv.split("=")[0] for kv in rows[0].split()]
    # The stages, total, count and the share sampled, then only what was
    # not measured, if any.
    assert fields[:len(STAGES) + 3] == STAGES + ["total", "count", "sampled"], fields
    assert set(fields[len(STAGES) + 3:]) <= {"unmatched", "partial", "lost"}, fields
    table = [l.split()[0] for l in lines if l.split() and l.split()[0] in STAGES + ["total"]]
    assert set(table) == set(STAGES + ["total"])
    assert any(l.startswith("memcached (us)") for l in lines)


def stage_spans(b):
    """Each stage of batch b as [start, end] in CLOCK_MONOTONIC ns: the
    stages are consecutive, from b["at_ns"]."""
    t, spans = b["at_ns"], {}
    for s in STAGES:
        spans[s] = (t, t + b[s + "_ns"])
        t += b[s + "_ns"]
    return spans


def delay_command(mc, what):
    r = xp(mc.pid, "command", "mod_delay.so", what)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_delay_in_handler_shows_in_memcached_only(memcached, mode):
    r = xp(memcached.pid, "load", DELAY_MODULE)
    assert r.returncode == 0, r.stderr
    m = Mclat(memcached, *mode[0], "--json", "--batches", mode[1])
    mcload(memcached, "-n", 200, "-c", 1, "-r", "1:0")  # gets only: each one delayed
    intervals, batches = parse_json(m.finish())
    spins = [tuple(map(int, l.split())) for l in delay_command(memcached, "spins").split("\n")
             if l.strip()]
    assert len(spins) == 200
    # Each request one batch: measured, or partial as mclat(1) says (a
    # packet that met its socket busy lost its rx boundary; rare).
    partial = sum(i["partial"] for i in intervals)
    assert len(batches) + partial == 200 and partial <= 2, intervals
    assert all(i["unmatched"] == 0 and i["lost"] == 0 for i in intervals)
    # Every 2 ms spin of a measured batch lies inside that batch's
    # memcached stage: with one connection the batches do not overlap,
    # and a batch's stages are consecutive, so it lies in no other stage.
    spans = [stage_spans(b)["memcached"] for b in batches]
    inside = 0
    for start, end in spins:
        assert end - start >= DELAY_NS
        inside += any(lo <= start and end <= hi for lo, hi in spans)
    assert inside == len(batches), (inside, len(batches))


server_fd = _mc.server_fd  # memcached's descriptor for a client socket


def test_busy_worker_shows_in_epoll_and_wait(memcached, syscalls, mode):
    """Two connections of one worker thread: while it spends 2 ms in a
    get of the first, the second's request waits for it in epoll/wait
    (kernel queue), not in its own memcached stage."""
    r = xp(memcached.pid, "load", DELAY_MODULE)
    assert r.returncode == 0, r.stderr
    m = Mclat(memcached, *mode[0], "--json", "--batches", mode[1])
    socks = [socket.create_connection(("127.0.0.1", memcached.port)) for _ in range(4)]
    fds = []
    for s in socks:
        s.sendall(b"set k 0 0 1\r\n1\r\n")
        recv_until(s, b"STORED\r\n")
        fds.append(server_fd(memcached, s))
    tid = {}
    while len(tid) < len(fds):
        line = m.wait_line(lambda l: '"batch"' in l, "a batch of each connection")
        b = json.loads(line)["batch"]
        tid[b["fd"]] = b["tid"]
    pair = [(a, c) for a in range(4) for c in range(4)
            if a != c and tid[fds[a]] == tid[fds[c]]]
    assert pair, "memcached gave every connection a thread of its own: %r" % tid
    a, c = pair[0]
    # The worker busy inside a's get until released ...
    socks[a].sendall(b"get hold\r\n")
    wait_for(lambda: "holding 1" in delay_command(memcached, "holding"), "the hold")
    # ... while c's request is queued in the kernel ...
    socks[c].sendall(b"set j 0 0 1\r\n2\r\n")
    wait_for(lambda: rx_queue(memcached, socks[c]) > 0, "c's request queued")
    queued = time.monotonic_ns()  # CLOCK_MONOTONIC, mclat's clock
    released = time.monotonic_ns()
    delay_command(memcached, "release")
    recv_until(socks[a], b"END\r\n")
    recv_until(socks[c], b"STORED\r\n")
    line = m.wait_line(lambda l: '"batch"' in l and json.loads(l)["batch"]["fd"] == fds[c],
                       "the waiting connection's batch")
    b = json.loads(line)["batch"]
    m.finish()
    for s in socks:
        s.close()
    # The pause (queued .. released) lies in c's epoll and wait stages,
    # so in none of its others.
    spans = stage_spans(b)
    assert spans["epoll"][0] <= queued and released <= spans["wait"][1], b


def wait_for(cond, what):
    deadline = time.monotonic() + DEADLINE
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.01)  # a poll interval, not a synchronisation


def rx_queue(mc, sock):
    """Bytes waiting in memcached's socket for client socket sock."""
    local = "0100007F:%04X" % mc.port
    remote = "0100007F:%04X" % sock.getsockname()[1]
    with open("/proc/%d/net/tcp" % mc.pid) as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == local and fields[2] == remote:
                return int(fields[4].split(":")[1], 16)
    return 0


def test_without_bpf_memcached_stage_only(memcached, mode):
    m = Mclat(memcached, *mode[0], "--no-bpf", "--json", mode[1], need_bpf=False)
    assert not m.bpf
    assert any("need the kernel programs" in e for e in m.errors)
    mcload(memcached, "-n", 400, "-c", 2)
    intervals, _ = parse_json(m.finish())
    assert sum(i["count"] for i in intervals) == 400
    assert all(list(i["stages"]) == ["memcached"] for i in intervals)


@pytest.mark.skipif(not os.path.exists("/usr/bin/setpriv"), reason="no setpriv")
def test_without_bpf_permission(memcached):
    """Root without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN (setpriv drops
    them from the bounding set): the BPF load fails, mclat says why and
    reports the memcached stage."""
    m = Mclat(memcached, "--all", "1", need_bpf=False,
              prefix=["/usr/bin/setpriv", "--bounding-set=-bpf,-perfmon,-sys_admin"])
    assert not m.bpf
    assert any("Operation not permitted" in e and "CAP_BPF" in e for e in m.errors), m.errors
    mcload(memcached, "-n", 300, "-c", 1)
    lines = means(m.finish())
    assert sum(int(l.split("count=")[1].split()[0]) for l in lines) == 300
    assert all(l.startswith("memcached=") for l in lines)


def test_version():
    r = subprocess.run([MCLAT, "--version"], capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 0 and r.stdout.startswith("mclat ") and r.stderr == ""


def test_help_names_merged_stages():
    r = subprocess.run([MCLAT, "--help"], capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 0
    assert "driver-to-IP and IP are one stage" in r.stdout
    assert "per read batch" in r.stdout


@pytest.mark.parametrize("args,complaint", [
    (["-x"], "unknown option '-x'"),
    (["--hist"], "--hist needs an argument"),
    (["--hist", "nope"], "--hist wants a stage"),
    (["-p", "abc"], "-p wants a process id, got 'abc'"),
    (["0"], "INTERVAL wants a positive number of seconds, got '0'"),
    (["nan"], "INTERVAL wants a positive number of seconds"),
    (["1", "x"], "COUNT wants a positive number, got 'x'"),
    (["1", "2", "3"], "unexpected argument '3'"),
    (["-0.5"], "'-0.5': the interval and the count are positive numbers"),
    (["1", "-1"], "'-1': the interval and the count are positive numbers"),
    (["--sample", "0"], "--sample wants a fraction in (0, 1]"),
    (["--sample", "150%"], "--sample wants a fraction in (0, 1]"),
    (["--sample", "x"], "--sample wants a fraction in (0, 1] (0.05 or 5%), got 'x'"),
    (["--all", "--sample", "0.1"], "--all and --sample are one choice"),
    (["--sample-batches", "-1"], "--sample-batches wants a count (0: no budget), got '-1'"),
    (["--sample-batches", "2k"], "--sample-batches wants a count (0: no budget), got '2k'"),
])
def test_bad_options_exit_2_naming_the_problem(args, complaint):
    r = subprocess.run([MCLAT, *args], capture_output=True, text=True, timeout=DEADLINE,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.startswith("mclat: ") and complaint in r.stderr, r.stderr
    assert r.stdout == ""
