# SPDX-License-Identifier: MIT
"""mcsnoop on Debian's own memcached (/usr/bin/memcached, no probe sites):
the commands of a scripted client come from memcached's watch
stream (a set's own lookup not shown as a get), binary keys exact,
latency and thread absent (null, "-"), nothing injected, and the watch
connection closed when mcsnoop ends."""
import json
import os
import re
import signal
import subprocess
import sys
import time


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
MCSNOOP = os.path.join(BUILD, "mcsnoop")
DEADLINE = 120  # only catches a hang

sys.path.insert(0, os.path.join(ROOT, "tests", "memcached"))
import mcserver as _mc  # noqa: E402
import keytext  # noqa: E402  (the key text rule, written again as the oracle)


stock = _mc.stock  # the fixture: Debian's memcached
wait_watchers = _mc.wait_log_watchers


def snoop(mc, *args):
    return subprocess.Popen([MCSNOOP, "-p", str(mc.pid), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, errors="replace")


def test_commands_from_the_watch_stream(stock):
    p = snoop(stock, "--json", "-n", 5)
    wait_watchers(stock, 1)
    with stock.client() as s:
        for req, end in ((b"set a 0 0 3\r\nabc\r\n", b"STORED\r\n"),
                         (b"get a\r\n", b"END\r\n"),
                         (b"get nope\r\n", b"END\r\n"),
                         (b"add a 0 0 1\r\nx\r\n", b"NOT_STORED\r\n"),
                         (b"get sp%c\r\n", b"END\r\n")):
            s.sendall(req)
            _mc.recv_until(s, end)
        fd = _mc.server_fd(stock, s)
    out, err = p.communicate(timeout=DEADLINE)
    assert p.returncode == 0, err
    assert "no probe sites" in err and "watch stream" in err
    events = [json.loads(line) for line in out.splitlines()]
    got = sorted((e["cmd"], e["key"], e["result"], e["size_bytes"]) for e in events)
    assert got == sorted([("set", "a", "stored", 3), ("get", "a", "hit", 3),
                          ("get", "nope", "miss", None), ("add", "a", "not_stored", 1),
                          ("get", "sp%c", "miss", None)])
    for e in events:  # what the stream cannot see: absent, never 0
        assert e["lat_ns"] is None and e["thread"] is None
        assert e["conn"] == fd
    with open("/proc/%d/maps" % stock.pid) as f:
        assert "libxprobes" not in f.read()
    wait_watchers(stock, 0)


def wait_sent(mc, n):
    """Poll memcached's stats until it wrote n lines to its watchers."""
    deadline = time.monotonic() + DEADLINE
    while True:
        with mc.client() as s:
            s.sendall(b"stats\r\n")
            sent = int(re.search(rb"STAT log_watcher_sent (\d+)",
                                 _mc.recv_until(s, b"END\r\n")).group(1))
        if sent >= n:
            return
        assert time.monotonic() < deadline
        time.sleep(0.02)  # polling memcached's state, bounded by the deadline


def test_text_table_and_sigint(stock):
    p = snoop(stock)
    wait_watchers(stock, 1)
    with stock.client() as s:
        s.sendall(b"set k\x01 0 0 2\r\nhi\r\n")  # memcached takes any byte but space
        _mc.recv_until(s, b"\r\n")
        s.sendall(b"get k\x01\r\n")
        _mc.recv_until(s, b"END\r\n")
    # Poll the stats until both lines were written to the watcher; then stop.
    wait_sent(stock, 3)  # set, its lookup, get
    # The held-back get shows within 250 ms; SIGINT lets mcsnoop flush it.
    p.send_signal(2)
    out, err = p.communicate(timeout=DEADLINE)
    assert p.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["TIME", "THREAD", "CONN", "CMD", "KEY", "SIZE", "RESULT",
                                "LAT(us)"]
    rows = sorted(line.split()[1:] for line in lines[1:])
    assert [r[0] for r in rows] == ["-", "-"]
    assert sorted((r[2], r[3], r[4], r[5], r[6]) for r in rows) == [
        ("get", "k\\x01", "2", "hit", "-"), ("set", "k\\x01", "2", "stored", "-")]
    wait_watchers(stock, 0)


# Keys as a new user's are: UTF-8 that memcached's stream
# URI-encodes (caf%C3%A9), and bytes that are no UTF-8.
UTF8_KEYS = ["café".encode(), "用户:1".encode(), "emoji:🔥".encode(), b"raw:\xff\xfe"]


def snoop_bytes(mc, *args):
    """mcsnoop started, its output kept as bytes (finish decodes them)."""
    return subprocess.Popen([MCSNOOP, "-p", str(mc.pid), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)


def finish(p):
    """mcsnoop's stdout once it ended, as the UTF-8 it writes."""
    out, err = p.communicate(timeout=DEADLINE)
    assert p.returncode == 0, err
    return out.decode("utf-8")


def set_and_get(mc, keys):
    with mc.client() as s:
        for key in keys:
            s.sendall(b"set %s 0 0 1\r\nv\r\n" % key)
            _mc.recv_until(s, b"STORED\r\n")
            s.sendall(b"get %s\r\n" % key)
            _mc.recv_until(s, b"END\r\n")


def test_keys_and_clock_as_on_the_probes(stock):
    # One key text rule and one clock whatever the source: the key text
    # of the bytes (decoded from the stream's URI encoding exactly once),
    # key_escaped when the text is not the bytes, time_ns on
    # CLOCK_MONOTONIC as mcsnoop(1) and docs/json.md say.
    before = time.monotonic_ns()
    p = snoop_bytes(stock, "--json", "-n", 2 * len(UTF8_KEYS))
    wait_watchers(stock, 1)
    set_and_get(stock, UTF8_KEYS)
    events = [json.loads(line) for line in finish(p).splitlines()]
    after = time.monotonic_ns()
    want = sorted((cmd,) + keytext.from_bytes(k) for k in UTF8_KEYS for cmd in ("get", "set"))
    assert sorted((e["cmd"], e["key"], e["key_escaped"]) for e in events) == want
    assert ("set", "café", False) in want and ("set", "raw:\\xff\\xfe", True) in want
    for e in events:
        assert e["key_bytes"] == len(keytext.to_bytes(e["key"], e["key_escaped"]))
        assert before <= e["time_ns"] <= after, (before, e["time_ns"], after)


def test_text_shows_utf8_keys_as_written(stock):
    p = snoop_bytes(stock, "-n", 2 * len(UTF8_KEYS))
    wait_watchers(stock, 1)
    set_and_get(stock, UTF8_KEYS)
    rows = [line.split() for line in finish(p).splitlines()[1:]]
    assert sorted((r[3], r[4]) for r in rows) == sorted(
        (cmd, keytext.from_bytes(k)[0]) for k in UTF8_KEYS for cmd in ("get", "set"))
    assert ("set", "café") in {(r[3], r[4]) for r in rows}


def test_key_glob_matches_utf8_keys(stock):
    p = snoop_bytes(stock, "--json", "-k", "用户*", "-n", 2)
    wait_watchers(stock, 1)
    set_and_get(stock, UTF8_KEYS)
    events = [json.loads(line) for line in finish(p).splitlines()]
    assert sorted((e["cmd"], e["key"]) for e in events) == [("get", "用户:1"), ("set", "用户:1")]


def test_a_get_read_while_ending_is_shown(stock):
    # mcsnoop stopped while a set and a get are written to it, then SIGINT:
    # the lines are read only as it ends, and the get, held back in case
    # it was the set's lookup, is shown all the same.
    p = snoop_bytes(stock)
    wait_watchers(stock, 1)
    p.send_signal(signal.SIGSTOP)
    try:
        set_and_get(stock, [b"k"])
        wait_sent(stock, 3)
        p.send_signal(signal.SIGINT)
    finally:
        p.send_signal(signal.SIGCONT)
    rows = [line.split() for line in finish(p).splitlines()[1:]]
    assert sorted((r[3], r[4]) for r in rows) == [("get", "k"), ("set", "k")]
