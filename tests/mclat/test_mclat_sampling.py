# SPDX-License-Identifier: MIT
"""mclat's sampling windows against the real memcached build:
a request that straddles a window's edge is never reported (made
deterministic with tests/mclat/mod_delay.c, which holds a worker inside a
get until the test releases it, across an edge the test has seen mclat
print); the fraction shown is the windows' share of the interval; an
interval without traffic has empty figures, not zeros; kill -9 during a
window leaves no program of mclat's in the kernel and memcached serving.

mclat --batches prints each window when it opens ({"window":{"open_ns"}})
and when it closes (with "close_ns"), in CLOCK_MONOTONIC ns, the clock of
time.monotonic_ns()."""
import json
import os
import signal
import socket
import subprocess
import time

import pytest

import test_mclat as t
from test_mclat import Mclat, memcached, memcached_bin  # noqa: F401  (fixtures)

xp = t.xp
recv_until = t.recv_until


def json_lines(m, pred, what):
    return json.loads(m.wait_line(lambda l: l.startswith("{") and pred(json.loads(l)), what))


def next_open(m, after_ns):
    """The next window that opens after after_ns."""
    return json_lines(m, lambda o: "window" in o and "close_ns" not in o["window"]
                      and o["window"]["open_ns"] > after_ns, "a window opening")["window"]


def next_close(m, after_ns):
    """The next window that closes after after_ns."""
    return json_lines(m, lambda o: "window" in o and o["window"].get("close_ns", 0) > after_ns,
                      "a window closing")["window"]


def holding(mc):
    t.wait_for(lambda: "holding 1" in t.delay_command(mc, "holding"), "the hold")
    return time.monotonic_ns()  # the spin began before this


def release(mc, sock):
    t.delay_command(mc, "release")
    recv_until(sock, b"END\r\n")


def same_worker_pair(mc, m):
    """Two client sockets memcached serves on one worker thread, and
    their fds in memcached (as in test_busy_worker_shows_in_epoll_and_wait)."""
    socks = [socket.create_connection(("127.0.0.1", mc.port)) for _ in range(4)]
    for s in socks:
        s.sendall(b"set k 0 0 1\r\n1\r\n")
        recv_until(s, b"STORED\r\n")
    fds = [t.server_fd(mc, s) for s in socks]  # accepted by now
    tid = {}

    def seen(o):
        if "batch" in o:
            tid[o["batch"]["fd"]] = o["batch"]["tid"]
        return "window" in o and o["window"].get("close_ns", 0) > sent
    while len(tid) < len(fds):  # until each was seen in a window
        for s in socks:
            s.sendall(b"set k 0 0 1\r\n1\r\n")
            recv_until(s, b"STORED\r\n")
        sent = time.monotonic_ns()
        json_lines(m, seen, "a window closing")
    pair = [(a, c) for a in range(4) for c in range(4) if a != c and tid[fds[a]] == tid[fds[c]]]
    assert pair, "memcached gave every connection a thread of its own: %r" % tid
    a, c = pair[0]
    return socks, (socks[a], fds[a]), (socks[c], fds[c])


def test_requests_across_window_edges_are_cut(memcached):
    """Kernel stages.  1: a get held across a window's close is not
    reported.  2: a request whose data arrived in one window, while its
    worker was held on another connection, and was read only after that
    window closed leaves its socket's rx/ready boundaries behind; the
    connection's next request, in the next window, would take them
    (a total spanning both windows) unless mclat cuts it."""
    assert xp(memcached.pid, "load", t.DELAY_MODULE).returncode == 0
    # 1 s windows every 2 s: wide enough for the steps inside one.
    m = Mclat(memcached, "--sample", "50%", "--json", "--batches", "2")
    socks, (held, held_fd), (queued, queued_fd) = same_worker_pair(memcached, m)
    for attempt in range(5):
        w = next_open(m, 0 if attempt == 0 else time.monotonic_ns())
        held.sendall(b"get hold\r\n")
        holding(memcached)
        queued.sendall(b"get k\r\n")
        t.wait_for(lambda: t.rx_queue(memcached, queued) > 0, "the get queued")
        in_window = time.monotonic_ns()
        closed = next_close(m, w["open_ns"])
        release(memcached, held)
        recv_until(queued, b"END\r\n")
        if closed["open_ns"] == w["open_ns"] and in_window < closed["close_ns"]:
            break  # the get arrived in the window and was read after it
    else:
        pytest.fail("the machine never let the steps fit in a 1 s window")
    # The queued connection's next request, inside the next window.
    nxt = next_open(m, closed["close_ns"])
    queued.sendall(b"get k\r\n")
    recv_until(queued, b"END\r\n")
    next_close(m, nxt["open_ns"])
    windows = []
    intervals, batches = t.parse_json(m.finish(), windows)
    for s in socks:
        s.close()
    # Nothing reported on either connection since the first hold: the
    # held get straddled a close, the queued one was never seen whole.
    mine = [b for b in batches if b["fd"] in (held_fd, queued_fd) and b["at_ns"] >= w["open_ns"]]
    assert mine == [], (mine, windows)
    assert all(t.in_a_window(b, windows) for b in batches), (batches, windows)
    assert sum(i["cut"] + i["partial"] + i["noreply"] for i in intervals) >= 1, intervals


def test_no_bpf_request_across_window_close_is_cut(memcached):
    """The module's side alone: a batch that began in a window and ended
    after it is counted as cut, not reported with its long memcached
    stage (the module records it so that mclat can say so)."""
    assert xp(memcached.pid, "load", t.DELAY_MODULE).returncode == 0
    m = Mclat(memcached, "--no-bpf", "--sample", "50%", "--json", "--batches", "2",
              need_bpf=False)
    sock = socket.create_connection(("127.0.0.1", memcached.port))
    for attempt in range(5):
        w = next_open(m, 0 if attempt == 0 else time.monotonic_ns())
        sock.sendall(b"get hold\r\n")
        began = holding(memcached)
        closed = next_close(m, w["open_ns"])
        release(memcached, sock)
        if closed["open_ns"] == w["open_ns"] and began < closed["close_ns"]:
            break
    else:
        pytest.fail("the machine never let the hold start inside a 1 s window")
    spin = [tuple(map(int, l.split())) for l in t.delay_command(memcached, "spins").split("\n")
            if l.strip()][-1]
    assert spin[0] < closed["close_ns"] < spin[1]
    intervals, batches = t.parse_json(m.finish())
    sock.close()
    assert not any(b["memcached_ns"] >= spin[1] - spin[0] for b in batches), batches
    assert sum(i["cut"] for i in intervals) >= 1, intervals


def test_sampled_fraction_is_the_windows_share(memcached):
    m = Mclat(memcached, "--sample", "0.2", "--json", "--batches", "0.5", "4")
    t.mcload(memcached, "-n", 2000, "-c", 2)
    for _ in range(4):
        json_lines(m, lambda o: "interval_s" in o, "an interval")
    lines = m.finish()
    open_ns, fractions = 0, []
    for line in lines:
        obj = json.loads(line)
        if "window" in obj and "close_ns" in obj["window"]:
            open_ns += obj["window"]["close_ns"] - obj["window"]["open_ns"]
        elif "interval_s" in obj:
            assert obj["sampled_fraction"] > 0
            assert abs(obj["sampled_fraction"] - open_ns / 1e9 / obj["interval_s"]) < 0.001, obj
            fractions.append(obj["sampled_fraction"])
            open_ns = 0
    assert len(fractions) >= 4, lines


@pytest.mark.parametrize("mode", [[], ["--all"]])
def test_no_traffic_gives_empty_figures_not_zeros(memcached, mode):
    m = Mclat(memcached, *mode, "--json", "0.2", "2")
    for obj in map(json.loads, m.finish()):
        assert obj["count"] == 0
        for name, st in obj["stages"].items():
            assert st["count"] == 0
            assert [st[k] for k in ("mean_us", "p50_us", "p90_us", "p99_us", "max_us")] \
                == [None] * 5, (name, st)
    m = Mclat(memcached, *mode, "--percentiles", "0.2", "2")
    lines = m.finish()
    means = [l for l in t.means(lines) if l.startswith("rx=")]
    assert means and all(l.split()[:8] == [s + "=-" for s in t.STAGES + ["total"]] for l in means)
    table = [l.split() for l in lines if l.split() and l.split()[0] in t.STAGES + ["total"]]
    assert table and all(row[1:] == ["-"] * 5 for row in table), table


def our_prog_ids(pid):
    """The BPF programs the process holds (its prog and link fds' fdinfo)."""
    ids = set()
    d = "/proc/%d/fdinfo" % pid
    for fd in os.listdir(d):
        try:
            with open(os.path.join(d, fd)) as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def bpftool(*args):
    r = subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout or "[]")


@pytest.mark.parametrize("mode", [["--sample", "50%"], ["--all"]])
def test_kill_9_in_a_window_leaves_nothing_attached(memcached, mode):
    m = Mclat(memcached, *mode, "--json", "--batches", "2")
    if "--all" not in mode:
        next_open(m, 0)  # programs attached now, for 1 s
    ids = our_prog_ids(m.proc.pid)
    linked = {l["prog_id"] for l in bpftool("link", "show")}
    assert ids & linked, "mclat's programs are not attached: %r %r" % (ids, linked)
    m.proc.send_signal(signal.SIGKILL)
    m.proc.wait(timeout=t.DEADLINE)

    def gone():
        return not ids & ({p["id"] for p in bpftool("prog", "show")}
                          | {l["prog_id"] for l in bpftool("link", "show")})
    t.wait_for(gone, "mclat's programs to go")
    s = socket.create_connection(("127.0.0.1", memcached.port))
    s.sendall(b"set z 0 0 1\r\nz\r\nget z\r\n")
    recv_until(s, b"END\r\n")
    s.close()


@pytest.mark.parametrize("budget", [200, 0])
def test_window_ends_at_the_batch_budget(memcached, budget):
    """--sample-batches N ends a window once the programs saw N replies
    per second of interval (here 100 per 0.5 s), long before the 50% the
    fraction allows under a load of thousands a second; 0 turns the
    budget off and the window lasts its fraction."""
    load = subprocess.Popen([t.MCLOAD, "-s", "127.0.0.1:%d" % memcached.port, "-c", "4",
                             "-d", str(t.DEADLINE)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        t.mcload(memcached, "-n", 100, "-c", 1)  # serving before mclat starts
        m = Mclat(memcached, "--sample", "50%", "--sample-batches", budget, "--json", "0.5")
        seen = []
        m.wait_line(lambda l: len(seen.append(l) or seen) >= 4, "four intervals")
        intervals = [json.loads(l) for l in m.finish()][1:-1]  # whole ones, in full load
    finally:
        load.kill()
        load.wait()
    assert intervals and all(i["count"] > 0 for i in intervals), intervals
    if budget:
        assert all(i["sampled_fraction"] < 0.4 for i in intervals), intervals
    else:
        assert all(abs(i["sampled_fraction"] - 0.5) < 0.02 for i in intervals), intervals
