# SPDX-License-Identifier: MIT
"""mctop's probe module in the real memcached build: its top-N
keys and counts against mcload's ground truth, within the Space-Saving
bounds it states (count - err <= truth <= count)."""
import json
import os
import re
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
MODULE = os.path.join(BUILD, "modules", "mctop.so")
MCLOAD = os.path.join(BUILD, "mcload")


sys.path.insert(0, os.path.join(ROOT, "tests", "memcached"))
import mcserver as _mc  # noqa: E402  (the real memcached, tests/memcached/mcserver.py)
xp = _mc.xp
memcached_bin = _mc.memcached_bin  # the fixture that builds it (cached)


def load_module(pid):
    """mctop.so loaded into process pid, every probe attached."""
    r = xp(pid, "load", MODULE)
    assert r.returncode == 0 and "refused" not in r.stdout, r.stdout + r.stderr


@pytest.fixture
def memcached(memcached_bin, tmp_path):
    """memcached (2 worker threads) with mctop.so loaded before any command."""
    mc = _mc.Memcached(memcached_bin, str(tmp_path))
    try:
        load_module(mc.pid)
        yield mc
    finally:
        mc.stop()


def mcload(mc, *args):
    r = subprocess.run([MCLOAD, "-s", "127.0.0.1:%d" % mc.port, "-c", "4", "-T", "2",
                        *map(str, args)],
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr


def read_truth(path):
    """{key as str (bytes as code points): gets + sets} from either format."""
    with open(path) as f:
        text = f.read()
    if text.startswith("{"):
        return {k: v["get"] + v["set"] for k, v in json.loads(text).items()}
    out = {}
    for line in text.splitlines():
        key, gets, sets = line.split("\t")
        out[key] = int(gets) + int(sets)
    return out


def top(mc, *args):
    r = xp(mc.pid, "command", "mctop.so", "top", *args, "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def budget_facts(mc):
    """(bytes per counter, bytes reserved for reading and for the feeds of
    memcached's two worker threads) from 'budget'."""
    text = xp(mc.pid, "command", "mctop.so", "budget").stdout
    m = re.search(r"; (\d+) bytes each, (\d+) reserved for reading, "
                  r"(\d+) per worker thread's feed", text)
    assert m, text
    assert "not running" not in text, text
    return int(m.group(1)), int(m.group(2)) + 2 * int(m.group(3))


def set_budget(mc, nbytes):
    r = xp(mc.pid, "command", "mctop.so", "budget", str(nbytes))
    assert r.returncode == 0 and r.stdout.startswith("budget %d\n" % nbytes), r.stdout
    return r.stdout


def raw(mc, *args):
    """'top ... raw' parsed: (header dict, [key lines as lists])."""
    r = xp(mc.pid, "command", "mctop.so", "top", *args, "raw")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("mctop 1 ") and lines[-1] == "end", r.stdout
    head = dict(f.split("=") for f in lines[0].split()[2:])
    return {k: int(v) for k, v in head.items()}, [ln.split("\t") for ln in lines[1:-1]]


def assert_within_bounds(report, truth):
    for k in report["keys"]:
        t = truth.get(k["key"], 0)
        assert k["calls"] - k["err"] <= t <= k["calls"], (k, t)


def test_zipf_top20_are_the_true_top20_within_the_bounds(memcached, tmp_path):
    # A budget of two chunks of 1024 counters (and the two workers' feeds).
    each, reserve = budget_facts(memcached)
    set_budget(memcached, reserve + 2 * 1024 * each)
    truth_file = str(tmp_path / "truth.tsv")
    mcload(memcached, "-z", "0.99", "-k", "100000", "-n", "200000", "--seed", "1",
           "--truth", truth_file)
    truth = read_truth(truth_file)
    report = top(memcached, 20)
    assert report["total"] == sum(truth.values()) == 200000
    # 100,000 keys in 2 x 1024 counters: the tables overflowed.
    assert 1024 < report["tracked"] <= 2048
    assert len(report["keys"]) == 20
    true_top = sorted(truth, key=lambda k: -truth[k])[:20]
    assert set(true_top) <= {k["key"] for k in report["keys"]}
    assert_within_bounds(report, truth)
    # No key left out was seen more than the bound or the last row shown
    # (the filter keeps every cold key's true count at or below the bound).
    shown = {k["key"] for k in report["keys"]}
    floor = max(report["bound"], report["keys"][-1]["calls"])
    assert report["bound"] > 0
    assert all(n <= floor for key, n in truth.items() if key not in shown)
    # Every tracked key, the rarely seen ones with large errors included
    # (a key that took an evicted counter starts with its count as error).
    everything = top(memcached, 2000)
    assert len(everything["keys"]) == min(2000, everything["tracked"])
    assert any(k["err"] > 0 for k in everything["keys"])
    assert_within_bounds(everything, truth)
    calls = [k["calls"] for k in everything["keys"]]
    assert calls == sorted(calls, reverse=True)


def test_binary_keys_and_multigets_counted_exactly(memcached, tmp_path):
    # 1000 keys fit the table's first 1024 counters: every count is exact.
    truth_file = str(tmp_path / "truth.json")
    mcload(memcached, "-B", "--binary-keys", "-m", "4", "-z", "0.9", "-k", "1000",
           "-n", "20000", "-v", "37", "--truth", truth_file, "--truth-format", "json")
    truth = read_truth(truth_file)
    assert any("\x00" in k for k in truth)
    report = top(memcached, 2000)
    assert report["total"] == sum(truth.values())
    got = {k["key"]: k["calls"] for k in report["keys"]}
    assert got == truth
    assert all(k["err"] == 0 for k in report["keys"])
    # A key that was set has the value size mcload sent.
    assert {k["objsize"] for k in report["keys"] if k["sets"]} == {37}


def _send(sock, data, end):
    sock.sendall(data)
    return _mc.recv_until(sock, end)


def test_every_command_counts_and_reset_forgets(memcached):
    s = memcached.client()
    _send(s, b"set a\x01b 0 0 10\r\n0123456789\r\n", b"STORED\r\n")
    _send(s, b"set n 0 0 1\r\n5\r\n", b"STORED\r\n")
    _send(s, b"add n 0 0 1\r\n6\r\n", b"NOT_STORED\r\n")
    _send(s, b"append a\x01b 0 0 2\r\nxy\r\n", b"STORED\r\n")
    _send(s, b"get a\x01b n missing a\x01b\r\n", b"END\r\n")  # 4 keys, one twice
    _send(s, b"incr n 3\r\n", b"8\r\n")
    _send(s, b"decr n 1\r\n", b"7\r\n")
    _send(s, b"delete n\r\n", b"DELETED\r\n")
    report = top(memcached)
    keys = {k["key"]: k for k in report["keys"]}
    assert report["total"] == 11
    assert set(keys) == {"a\u0001b", "n", "missing"}
    a, n = keys["a\u0001b"], keys["n"]
    assert (a["calls"], a["sets"], a["appends"], a["gets"]) == (4, 1, 1, 2)
    assert a["objsize"] == 12  # after the append
    assert (n["calls"], n["sets"], n["adds"], n["gets"], n["incrs"], n["decrs"],
            n["deletes"]) == (6, 1, 1, 1, 1, 1, 1)
    assert keys["missing"]["calls"] == 1 and keys["missing"]["objsize"] == -1
    text = xp(memcached.pid, "command", "mctop.so", "top", "5").stdout
    lines = text.splitlines()
    assert lines[2].endswith("  n") and lines[3].endswith("  a\\x01b"), text  # escaped

    assert xp(memcached.pid, "command", "mctop.so", "reset").stdout == "reset\n"
    assert top(memcached)["keys"] == []
    _send(s, b"get n\r\n", b"END\r\n")
    report = top(memcached)
    assert report["total"] == 1
    assert [(k["key"], k["calls"], k["err"]) for k in report["keys"]] == [("n", 1, 0)]
    s.close()


def latency(mc, *args):
    r = xp(mc.pid, "command", "mctop.so", "latency", *args)
    assert r.returncode == 0, r.stderr
    return r.stdout


def every_command_timed(mc):
    """`latency 1`: a load fast enough would otherwise have its worker
    threads time one command in 8 (see test_latency_*)."""
    assert latency(mc, "1") == "latency every 1\n"


def test_raw_format_latency_and_ranking_by_command(memcached, tmp_path):
    every_command_timed(memcached)
    truth_file = str(tmp_path / "truth.tsv")
    mcload(memcached, "-z", "1.2", "-k", "500", "-n", "20000", "-r", "3:1", "-v", "64",
           "--truth", truth_file)
    truth = read_truth(truth_file)
    head, rows = raw(memcached, "50")
    assert head["total"] == 20000 and head["tracked"] == len(truth)
    assert head["threads"] == 2 and head["bound"] == 0  # every key fits: exact
    assert head["bytes"] <= head["budget"]
    assert len(rows) == 50
    for r in rows:
        assert len(r) == 22, r
        key, calls, err = r[0], int(r[1]), int(r[2])
        assert (calls, err) == (truth[key], 0)
        ncmd = list(map(int, r[9:21]))
        assert sum(ncmd) == calls  # get hits + misses + sets ... add up
        hist = list(map(int, r[21].split(",")))
        assert len(hist) == 32
        lat_sum, lat_n = int(r[5]), int(r[6])
        # Every command of the key had its latency measured (one request
        # at a time per connection: no batches), and the histogram holds
        # exactly those, in buckets consistent with the mean.
        assert lat_n == calls and sum(hist) == lat_n, r
        mean = lat_sum / lat_n
        lo = min(i for i, n in enumerate(hist) if n)
        hi = max(i for i, n in enumerate(hist) if n)
        assert 2 ** lo <= mean < 2 ** (hi + 1)
        assert int(r[8]) >= 1  # clients
    # Ranked by sets only: the order follows the set counts.
    _, by_set = raw(memcached, "10", "by=set")
    sets = [int(r[1]) for r in by_set]
    assert sets == sorted(sets, reverse=True)
    assert sets[0] == max(int(r[11]) for r in rows + by_set)
    assert all(int(r[1]) == int(r[11]) for r in by_set)
    r = xp(memcached.pid, "command", "mctop.so", "top", "by=frob", "raw")
    assert "by=: commands are get,set" in r.stdout + r.stderr


def test_a_million_keys_stay_within_a_tiny_budget(memcached, tmp_path):
    each, reserve = budget_facts(memcached)
    budget = reserve + 4 * 1024 * each  # four chunks in all, a few MiB
    set_budget(memcached, budget)

    def rss():
        with open("/proc/%d/status" % memcached.pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) * 1024

    # Gets of keys never set: memcached stores nothing, so what grows is ours.
    before = rss()
    truth_file = str(tmp_path / "truth.tsv")
    mcload(memcached, "-k", "1000000", "-n", "1000000", "-r", "1:0", "--seed", "7",
           "--truth", truth_file)
    head, rows = raw(memcached, "2000")
    assert head["total"] == 1000000
    assert head["counters"] <= 4 * 1024 and head["bytes"] <= budget
    assert head["tracked"] <= 4 * 1024
    # The whole process grew by less than the budget (reading included:
    # the top above ran inside it).
    assert rss() - before <= budget, (rss() - before, budget)
    # Uniform keys: the tables overflowed, and every count shown still
    # brackets the truth.
    assert head["bound"] > 0
    truth = read_truth(truth_file)
    for r in rows:
        assert int(r[1]) - int(r[2]) <= truth[r[0]] <= int(r[1]), r[:3]


def test_meta_and_text_commands_memcached_does_not_probe(memcached):
    # memcached 1.6.18 fires command__get only for a meta get's miss, and
    # nothing for a text touch: the module recognises both from the request.
    s = memcached.client()
    _send(s, b"ms mk 2\r\nhi\r\n", b"HD\r\n")
    _send(s, b"mg mk v\r\n", b"VA 2\r\nhi\r\n")
    _send(s, b"mg mk v\r\nmg nokey v\r\nmg mk\r\n", b"EN\r\nHD\r\n")  # pipelined
    _send(s, b"touch mk 10\r\n", b"TOUCHED\r\n")
    _send(s, b"touch zz 10\r\n", b"NOT_FOUND\r\n")
    _send(s, b"md mk\r\n", b"HD\r\n")
    head, rows = raw(memcached, "10")
    got = {r[0]: r for r in rows}
    assert set(got) == {"mk", "nokey", "zz"}, rows
    mk = got["mk"]
    # calls, get hits, get misses, sets, touches, deletes
    assert (int(mk[1]), int(mk[9]), int(mk[10]), int(mk[11]), int(mk[17]), int(mk[20])) == \
        (6, 3, 0, 1, 1, 1), mk
    assert (int(got["nokey"][1]), int(got["nokey"][10])) == (1, 1)
    assert (int(got["zz"][1]), int(got["zz"][17])) == (1, 1)
    assert head["total"] == 8
    s.close()


@pytest.mark.parametrize("hold", [True, False], ids=["held", "published-at-once"])
def test_every_key_of_a_multiget_gets_its_commands_latency(memcached_bin, tmp_path, monkeypatch,
                                                           hold):
    # A command's keys wait in the feed, unpublished, until the command
    # ends and writes its latency into them; without that (MCTOP_TEST_NO_HOLD)
    # each latency is a record of its own, applied to the counters the
    # drainer kept for the command.  Either way every key of every
    # multi-get has exactly one latency per command.
    if not hold:
        monkeypatch.setenv("MCTOP_TEST_NO_HOLD", "1")
    mc = _mc.Memcached(memcached_bin, str(tmp_path))
    try:
        load_module(mc.pid)
        every_command_timed(mc)
        truth_file = str(tmp_path / "truth.tsv")
        mcload(mc, "-k", "300", "-n", "6000", "-m", "5", "-r", "1:0", "--seed", "9",
               "--truth", truth_file)
        truth = read_truth(truth_file)
        head, rows = raw(mc, "2000")
        assert head["tracked"] == len(truth) and head["bound"] == 0
        assert len(rows) == len(truth)
        for r in rows:
            calls, lat_sum, lat_n = int(r[1]), int(r[5]), int(r[6])
            assert calls == truth[r[0]], r
            assert lat_n == calls and lat_sum > 0, r
            assert sum(map(int, r[21].split(","))) == lat_n, r
    finally:
        mc.stop()


def test_without_its_drainer_top_still_counts_and_full_feeds_are_counted(
        memcached_bin, tmp_path, monkeypatch):
    # The module's drainer thread could not start (pthread_create made to
    # fail by MCTOP_TEST_NO_DRAINER in memcached's environment): it says
    # so, and top drains the feeds itself.
    monkeypatch.setenv("MCTOP_TEST_NO_DRAINER", "1")
    mc = _mc.Memcached(memcached_bin, str(tmp_path))
    try:
        load_module(mc.pid)
        text = xp(mc.pid, "command", "mctop.so", "budget").stdout
        assert "drainer: not running (Resource temporarily unavailable)" in text, text
        truth_file = str(tmp_path / "truth.tsv")
        mcload(mc, "-k", "100", "-n", "1000", "--seed", "3", "--truth", truth_file)
        truth = read_truth(truth_file)
        report = top(mc, 2000)
        assert report["total"] == 1000 and report["untracked"] == 0
        assert {k["key"]: k["calls"] for k in report["keys"]} == truth
        # 200,000 more with nobody draining: 24-byte records, far more than
        # the two workers' feeds hold (`budget` says how much).  What did
        # not fit is counted, never lost.
        assert 2 * feed_bytes(mc) < 200000 * 24 / 2, text
        mcload(mc, "-k", "100", "-n", "200000", "--seed", "4")
        report = top(mc, 2000)
        assert report["untracked"] > 0, report
        assert report["total"] + report["untracked"] == 201000
        assert sum(k["calls"] for k in report["keys"]) == report["total"]
        # The process carries on: a later run is counted again.
        mcload(mc, "-k", "100", "-n", "1000", "--seed", "5")
        assert top(mc, 2000)["total"] == report["total"] + 1000
    finally:
        mc.stop()


def test_a_half_full_feed_wakes_the_drainer(memcached_bin, tmp_path, monkeypatch):
    # The drainer sleeps until a worker's feed is half full, not on a short
    # timer.  Here its timer is an hour (MCTOP_TEST_DRAIN_MS), so only those
    # wake-ups drain: 300,000 commands of 24-byte records (16 of header,
    # "key:NNN") are over three times what the two workers' feeds hold
    # (1 MiB each with two workers, as `budget` says), and every one is
    # counted.  Without the wake-up the feeds fill and drop.
    monkeypatch.setenv("MCTOP_TEST_DRAIN_MS", "3600000")
    mc = _mc.Memcached(memcached_bin, str(tmp_path))
    try:
        load_module(mc.pid)
        feed = feed_bytes(mc)
        assert 2 * feed < 300000 * 24 / 3, feed
        mcload(mc, "-k", "1000", "-n", "300000", "--seed", "6")
        text = xp(mc.pid, "command", "mctop.so", "budget").stdout
        m = re.search(r"drainer: (\d+) passes, (\d+) asked for by a half-full feed", text)
        assert m, text
        passes, kicks = int(m.group(1)), int(m.group(2))
        assert kicks >= 2 and passes >= 2, text
        report = top(mc, 20)
        assert report["total"] == 300000 and report["untracked"] == 0, report
    finally:
        mc.stop()


def test_a_top_out_of_memory_lets_the_drainer_go(memcached_bin, tmp_path, monkeypatch):
    # A top ranked by calls holds the drain lock while it reads; its rows'
    # allocation failing (MCTOP_TEST_FAIL_TOPS=1) must let it go: the
    # next top and reset, which take the lock, answer, and every command
    # is still counted.
    monkeypatch.setenv("MCTOP_TEST_FAIL_TOPS", "1")
    mc = _mc.Memcached(memcached_bin, str(tmp_path))
    try:
        load_module(mc.pid)
        mcload(mc, "-k", "100", "-n", "1000", "--seed", "9")
        r = xp(mc.pid, "command", "mctop.so", "top", "20", "json")
        assert "mctop: out of memory" in r.stdout, r.stdout + r.stderr
        assert top(mc, 20)["total"] == 1000
        mcload(mc, "-k", "100", "-n", "1000", "--seed", "10")
        assert top(mc, 20)["total"] == 2000
        assert xp(mc.pid, "command", "mctop.so", "reset").stdout == "reset\n"
    finally:
        mc.stop()


def budget_counters(mc):
    """(counters taken, counters the budget still allows) from 'budget'."""
    text = xp(mc.pid, "command", "mctop.so", "budget").stdout
    m = re.search(r"counters (\d+) taken, (\d+) more allowed", text)
    assert m, text
    return int(m.group(1)), int(m.group(2))


def test_a_feed_that_cannot_be_allocated_leaves_the_budget_as_it_was(
        memcached_bin, tmp_path, monkeypatch):
    # The one worker's feed allocation fails (MCTOP_TEST_FAIL_FEEDS=1 in
    # memcached's environment): its commands are omitted, counted, and the
    # feed's share of the budget is given back; a budget set again makes
    # the worker try again, and then it counts.
    monkeypatch.setenv("MCTOP_TEST_FAIL_FEEDS", "1")
    mc = _mc.Memcached(memcached_bin, str(tmp_path), threads=1)
    try:
        load_module(mc.pid)
        text = xp(mc.pid, "command", "mctop.so", "budget").stdout
        m = re.search(r"^budget (\d+)\n.*; (\d+) bytes each, (\d+) reserved for reading, "
                      r"(\d+) per worker thread's feed", text, re.S)
        assert m, text
        budget, each, reserve, feed = map(int, m.groups())
        total = (budget - reserve) // each
        feed //= each
        mcload(mc, "-k", "50", "-n", "500", "--seed", "7")
        report = top(mc, 100)
        assert report["total"] == 0 and report["untracked"] == 500, report
        # The table's first chunk is taken; the failed feed took nothing.
        assert budget_counters(mc) == (1024, total - 1024)
        set_budget(mc, budget)
        mcload(mc, "-k", "50", "-n", "300", "--seed", "8")
        report = top(mc, 100)
        assert report["total"] == 300 and report["untracked"] == 500, report
        assert budget_counters(mc) == (1024 + feed, total - 1024 - feed)
    finally:
        mc.stop()


def test_the_smallest_budget_counts(memcached, tmp_path):
    # Too small for a worker's feed and a chunk of counters: refused, with
    # the smallest that is not.
    each, _ = budget_facts(memcached)
    r = xp(memcached.pid, "command", "mctop.so", "budget", "1000")
    m = re.search(r"budget: (\d+) bytes to 1 TiB", r.stdout + r.stderr)
    assert m, r.stdout + r.stderr
    smallest = int(m.group(1))
    r = xp(memcached.pid, "command", "mctop.so", "budget", str(smallest - 1))
    assert "bytes to 1 TiB" in r.stdout + r.stderr
    set_budget(memcached, smallest)
    # That one is enough for the table and one of the two workers' feeds:
    # what that worker saw is counted, the other's commands are omitted
    # (so counts are only lower bounds of the truth here), none is lost.
    truth_file = str(tmp_path / "truth.tsv")
    mcload(memcached, "-k", "100", "-n", "2000", "--seed", "6", "--truth", truth_file)
    report = top(memcached, 2000)
    assert report["total"] > 0 and report["untracked"] > 0, report
    assert report["total"] + report["untracked"] == 2000
    truth = read_truth(truth_file)
    assert all(k["calls"] - k["err"] <= truth[k["key"]] for k in report["keys"])


def test_the_drainer_thread_leaves_memcached_its_signals(memcached):
    # The module's drainer (a thread it adds to memcached) blocks the
    # asynchronous signals, so memcached's own threads get SIGINT/SIGTERM,
    # and leaves the synchronous ones open: a fault reaches memcached's
    # handler, and the function tracer, which switches with SIGTRAP and
    # refuses while some thread blocks it, still can.
    def drainer_mask():
        for task in os.listdir("/proc/%d/task" % memcached.pid):
            with open("/proc/%d/task/%s/status" % (memcached.pid, task)) as f:
                status = dict(line.split(":\t", 1) for line in f.read().splitlines()
                              if ":\t" in line)
            if status["Name"].strip() == "mctop-drain":
                return int(status["SigBlk"], 16)
        return None

    # glibc starts a thread with every signal blocked and sets the mask it
    # was created with a moment later: wait for that moment.
    deadline = time.monotonic() + 10
    while True:
        blocked = drainer_mask()
        assert blocked is not None, "no mctop-drain thread"
        if not blocked & (1 << (5 - 1)) or time.monotonic() > deadline:
            break
        time.sleep(0.01)  # a poll interval
    for sig in (2, 15, 1, 10, 12, 17):  # INT TERM HUP USR1 USR2 CHLD
        assert blocked & (1 << (sig - 1)), (sig, hex(blocked))
    for sig in (5, 11, 7, 4, 8):  # TRAP SEGV BUS ILL FPE
        assert not blocked & (1 << (sig - 1)), (sig, hex(blocked))


def test_sixteen_workers_are_all_counted_within_the_default_budget(memcached_bin, tmp_path):
    # Every worker needs only its feed: the one table takes the rest of
    # the default budget (per-worker tables once left workers past the
    # sixth with nothing; 512 KiB feeds left four of sixteen without one).
    mc = _mc.Memcached(memcached_bin, str(tmp_path), threads=16)
    try:
        load_module(mc.pid)
        truth_file = str(tmp_path / "truth.tsv")
        # 64 connections: memcached deals them to its workers in turn.
        subprocess.run([MCLOAD, "-s", "127.0.0.1:%d" % mc.port, "-c", "64", "-T", "2",
                        "-k", "1000", "-n", "40000", "--seed", "8", "--truth", truth_file],
                       check=True, capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
        head, rows = raw(mc, "2000")
        assert head["threads"] == 16, head
        assert head["total"] == 40000 and head["untracked"] == 0, head
        truth = read_truth(truth_file)
        assert {r[0]: int(r[1]) for r in rows} == truth
    finally:
        mc.stop()


def feed_bytes(mc):
    text = xp(mc.pid, "command", "mctop.so", "budget").stdout
    return int(re.search(r"(\d+) per worker thread's feed", text).group(1))


@pytest.mark.parametrize("threads,least,most", [(1, 1 << 21, 1 << 22), (2, 1 << 20, 1 << 21),
                                                 (4, 1 << 19, 1 << 20), (8, 1 << 18, 1 << 19),
                                                 (16, 1 << 18, 1 << 19)])
def test_feeds_share_a_quarter_of_the_budget(memcached_bin, tmp_path, threads, least, most):
    # Fewer workers get bigger feeds (longer drainer passes are cheaper),
    # all of them a quarter of the default 8 MiB at most, from 256 KiB to
    # 2 MiB: 16 workers keep 256 KiB, or some would get none.
    mc = _mc.Memcached(memcached_bin, str(tmp_path), threads=threads)
    try:
        load_module(mc.pid)
        assert least <= feed_bytes(mc) < most
    finally:
        mc.stop()


def calls_and_timed(mc, key):
    """(calls, commands timed, histogram total) of one key."""
    _, rows = raw(mc, "2000")
    row = next(r for r in rows if r[0] == key)
    return int(row[1]), int(row[6]), sum(map(int, row[21].split(",")))


def test_latency_every_n_times_one_command_in_n(memcached):
    # Auto, at a handful of commands a second: every command is timed.
    assert latency(memcached).startswith("latency auto: every command timed, one in 8 at "
                                         "random on a thread doing over 20000 commands/s\n")
    s = memcached.client()
    for _ in range(12):
        _send(s, b"get slow\r\n", b"END\r\n")
    assert calls_and_timed(memcached, "slow") == (12, 12, 12)
    _send(s, b"set k4 0 0 5\r\nhello\r\n", b"STORED\r\n")  # timed: all are
    # One in 4: the thread's commands are timed every 4th, so 40 in a row
    # on one connection (one thread) have exactly 10 timed, whatever the
    # phase; the others are counted all the same.
    assert latency(memcached, "4") == "latency every 4\n"
    for _ in range(40):
        _send(s, b"get k4\r\n", b"VALUE k4 0 5\r\nhello\r\nEND\r\n")
    assert calls_and_timed(memcached, "k4") == (41, 11, 11)
    # The 30 not timed went as short feed records (no connection, no
    # latency field): their value sizes count, and their client bit is the
    # one the timed commands' long records set.
    _, rows = raw(memcached, "2000")
    row = next(r for r in rows if r[0] == "k4")
    assert (int(row[3]), int(row[4]), int(row[8])) == (5, 41 * 5, 1), row  # objsize, bytes, clients
    assert latency(memcached, "1") == "latency every 1\n"
    for _ in range(8):
        _send(s, b"get k1 k4\r\n", b"VALUE k4 0 5\r\nhello\r\nEND\r\n")  # both keys timed
    assert calls_and_timed(memcached, "k1") == (8, 8, 8)
    assert calls_and_timed(memcached, "k4") == (49, 19, 19)
    s.close()
    for bad in ("0", "3", "2048", "x", "-1", "4x"):
        out = latency(memcached, bad)
        assert out == "mctop: latency: auto, or N: 1, 2, 4 ... 1024\n", (bad, out)
    assert latency(memcached) == "latency every 1\n"  # unchanged by any of them


def test_latency_auto_times_one_command_in_8_on_a_busy_thread(memcached_bin, tmp_path,
                                                               monkeypatch):
    # MCTOP_TEST_LAT_BUSY makes 1 command a second busy, so that the test's
    # own commands switch their thread to sampling at the drainer's next
    # look (a pass, at least every second), which the test waits for by
    # asking.
    monkeypatch.setenv("MCTOP_TEST_LAT_BUSY", "1")
    mc = _mc.Memcached(memcached_bin, str(tmp_path))
    try:
        load_module(mc.pid)
        # memcached hands connections to its 2 workers in turn: the first
        # and the third share a thread.
        c1, c2, c3 = mc.client(), mc.client(), mc.client()
        deadline = time.monotonic() + 60
        while "threads timing one in 8: 1\n" not in latency(mc):
            assert time.monotonic() < deadline, latency(mc)
            for _ in range(4):
                _send(c1, b"get warm\r\n", b"END\r\n")
        # The thread keeps sampling while commands keep coming.  Taking
        # turns, two connections each get about one in 8 of theirs timed
        # (binomial, 50 of 400 expected): every 8th command of the thread
        # would time only one of them, and the other's key would have no
        # latency at all.  Every command is counted.
        for _ in range(400):
            _send(c1, b"get one\r\n", b"END\r\n")
            _send(c3, b"get three\r\n", b"END\r\n")
        for key in ("one", "three"):
            calls, timed, hist = calls_and_timed(mc, key)
            assert calls == 400 and hist == timed and 20 <= timed <= 90, (key, calls, timed)
        # `latency auto` starts over: every command timed until a look.
        assert latency(mc, "auto").endswith("threads timing one in 8: 0\n")
        for c in (c1, c2, c3):
            c.close()
    finally:
        mc.stop()
