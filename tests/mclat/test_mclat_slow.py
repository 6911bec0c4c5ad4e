# SPDX-License-Identifier: MIT
"""mclat --slow THRESHOLD -o DIR on a memcached built with both xprobes-dtrace
and the tracer's flags (scripts/build-memcached.sh traced-xprobes): the
function graph of exactly the requests that took THRESHOLD or more, each
one call named by its command, key (key text) and total time, the
request's calls under it.
tests/mclat/mod_slowkeys.c makes gets of keys that begin with "slow" sleep
250 ms inside memcached; every other request is left alone.  The
threshold (100 ms) is far from both: a fast get would need a 100 ms stall
of this machine to be kept, a slow one cannot take less than 250 ms.
With BPF, the slow batches' kernel stages go to DIR/mclat-stages.json."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
MCLAT = os.path.join(BUILD, "mclat")
XPROBES = os.path.join(BUILD, "xprobes")
SLOW_MODULE = os.path.join(BUILD, "tests", "mclat", "mod_slowkeys.so")
SLOW_MS = 250  # tests/mclat/mod_slowkeys.c
THRESHOLD_MS = 100
UFTRACE = shutil.which("uftrace")
DEADLINE = 120  # safety net only: every wait ends on a condition

sys.path.insert(0, os.path.join(ROOT, "tests", "memcached"))
import mcserver as _mc  # noqa: E402  (the real memcached, tests/memcached/mcserver.py)
sys.path.insert(0, os.path.join(ROOT, "tests", "trace"))
from tracefix import requests  # noqa: E402  (a graph's outermost calls)
xp = _mc.xp
recv_until = _mc.recv_until

# A key past ASCII: in a name, its key text (UTF-8 as it is).
KEYS_SLOW = [b"slow1", "slow\u00e9".encode()]
KEY_TEXTS = {b"slow1": "slow1", "slow\u00e9".encode(): "slow\u00e9"}
KEYS_FAST = [b"fast1", b"fast2", b"a_b"]


@pytest.fixture(scope="session")
def traced_bin():
    r = subprocess.run([os.path.join(ROOT, "scripts", "build-memcached.sh"), "traced-xprobes",
                        BUILD], capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.fixture
def memcached(traced_bin, tmp_path):
    mc = _mc.Memcached(traced_bin, str(tmp_path))
    r = xp(mc.pid, "load", SLOW_MODULE)
    assert r.returncode == 0 and " 0 attachments" not in r.stdout, r.stdout + r.stderr
    yield mc
    mc.stop()


def wait_for(cond, what):
    deadline = time.monotonic() + DEADLINE
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.05)  # polling a condition, bounded by the deadline


def status(mc):
    return xp(mc.pid, "trace", "status").stdout


def start_mclat(mc, threshold, out, args=("--no-bpf",)):
    """mclat --slow, once it says it is tracing (the recorder is on)."""
    p = subprocess.Popen([MCLAT, "-p", str(mc.pid), *args, "--slow", threshold, "-o",
                          str(out), "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    errors = []
    for line in p.stderr:
        errors.append(line)
        if line.startswith("mclat: tracing"):
            break
    else:
        raise AssertionError("mclat ended: " + "".join(errors))
    p.tracing = line
    p.said = "".join(errors)  # what it said up to that line
    assert "requests: only what modules keep" in status(mc)
    return p


def finish(p):
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=DEADLINE)
    assert p.returncode == 0, err
    return err


def traffic(mc):
    with mc.client() as s:
        for k in KEYS_SLOW + KEYS_FAST:
            s.sendall(b"set " + k + b" 0 0 1\r\nx\r\n")
            assert recv_until(s, b"\r\n") == b"STORED\r\n"
        for k in KEYS_FAST + KEYS_SLOW + KEYS_FAST:
            s.sendall(b"get " + k + b"\r\n")
            recv_until(s, b"END\r\n")
        # Pipelined: one read, but memcached ends each get (its end site
        # fires as the get's reply is queued): the slow one alone is kept.
        s.sendall(b"get fast1\r\nget slow1\r\nget fast2\r\n")
        data = b""
        while data.count(b"END\r\n") < 3:
            data += recv_until(s, b"END\r\n")
        # A noreply store has no end: it and the get after it are one
        # request, named by the slower with "+1".
        s.sendall(b"set fast3 0 0 1 noreply\r\nx\r\nget slow1\r\n")
        recv_until(s, b"END\r\n")


def labels(text):
    """(command, key, ms) of each kept request, in the order shown; the key
    followed by "+N" when N more commands were in its read.  Each is one
    call of that name, at least as long as the threshold, with memcached's
    calls (and only they) under it."""
    out = []
    for name, us, calls in requests(text):
        m = re.fullmatch(r"([a-z]+) (\S+?)( \+\d+)? (\d+\.\d{3})ms", name)
        assert m, name
        assert us is not None and us >= THRESHOLD_MS * 1000, (name, us)
        assert calls and calls[0][0] == 0 and all(d >= 0 for d, _ in calls), (name, calls)
        out.append((m.group(1), m.group(2) + (m.group(3) or ""), float(m.group(4))))
    return out


def cat(out):
    r = subprocess.run([XPROBES, "trace", "cat", "-d", str(out)], capture_output=True,
                       text=True, timeout=DEADLINE)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_slow_requests_kept_and_only_they(memcached, tmp_path):
    out = tmp_path / "slow"
    p = start_mclat(memcached, f"{THRESHOLD_MS}ms", out)
    traffic(memcached)
    err = finish(p)
    assert "0 lost" in err or " lost" not in err, err
    text = cat(out)
    kept = labels(text)
    assert [(c, k) for c, k, _ in kept] == \
        [("get", KEY_TEXTS[k]) for k in KEYS_SLOW] + [("get", "slow1"), ("get", "slow1 +1")], text
    for _, _, ms in kept:
        assert ms >= SLOW_MS, kept
    # Each kept request is memcached's graph of that get: the key's
    # lookup ran inside it.  Its functions only: no library call.
    assert text.count("item_get(") >= len(KEYS_SLOW), text
    assert "pthread_mutex_lock" not in text and "no library calls" in p.said, text
    if UFTRACE:
        u = subprocess.run([UFTRACE, "replay", "-d", str(out)],
                           capture_output=True, text=True, timeout=DEADLINE)
        assert u.returncode == 0, u.stderr
        assert [(c, k) for c, k, _ in labels(u.stdout)] == [(c, k) for c, k, _ in kept]


def test_slow_libcalls_records_library_calls(memcached, tmp_path):
    out = tmp_path / "libcalls"
    p = start_mclat(memcached, f"{THRESHOLD_MS}ms", out, args=("--no-bpf", "--slow-libcalls"))
    traffic(memcached)
    err = finish(p)
    text = cat(out)
    assert len(labels(text)) == 4 and "no library calls" not in p.said + err, err
    # The lookup's lock, under the request's call.
    assert "pthread_mutex_lock();" in text, text


def test_slow_depth_keeps_the_top_of_each_graph(memcached, tmp_path):
    """--slow-depth 2: the same requests kept, each with its calls two
    levels deep at most (counted from the request), deeper ones not even
    followed: item_get, three levels under the get, is not there."""
    out = tmp_path / "depth"
    p = start_mclat(memcached, f"{THRESHOLD_MS}ms", out, args=("--no-bpf", "--slow-depth", "2"))
    traffic(memcached)
    finish(p)
    text = cat(out)
    assert len(labels(text)) == 4, text
    for name, _, calls in requests(text):
        assert max(d for d, _ in calls) == 1, (name, calls)
        # A get alone: its command's calls and theirs (the "+1" request
        # began at the noreply set, and its get runs a level deeper).
        assert "+" in name or (1, "limited_get") in calls, (name, calls)
    assert "item_get" not in text and "2 deep at most" in p.said, text


def test_kernel_stages_beside_the_graphs(memcached, tmp_path):
    """With BPF and --all, each slow read batch's stages go to
    DIR/mclat-stages.json, and no fast one's."""
    out = tmp_path / "stages"
    p = start_mclat(memcached, "100ms", out, args=("--all",))
    if "with BPF" not in p.tracing:
        finish(p)
        pytest.skip("mclat cannot load its BPF programs: " + p.tracing)
    traffic(memcached)
    finish(p)
    kept = labels(cat(out))
    with open(out / "mclat-stages.json") as f:
        batches = [json.loads(line)["batch"] for line in f]
    # The single slow gets are reads of their own: each has its line.
    assert len(batches) >= len(KEYS_SLOW) and len(batches) <= len(kept), batches
    for b in batches:
        assert b["memcached_ns"] >= SLOW_MS * 1000000, b
        assert b["tid"] > 0 and "total_ns" in b and "epoll_ns" in b, b


def test_threshold_never_reached_keeps_nothing(memcached, tmp_path):
    out = tmp_path / "none"
    p = start_mclat(memcached, "10s", out)
    traffic(memcached)
    finish(p)
    r = subprocess.run([XPROBES, "trace", "cat", "-d", str(out)], capture_output=True,
                       text=True, timeout=DEADLINE)
    assert not requests(r.stdout) and "item_get" not in r.stdout, r.stdout


def test_kill_9_of_mclat_leaves_memcached_untraced(memcached, tmp_path):
    out = tmp_path / "killed"
    p = start_mclat(memcached, "100ms", out)
    p.kill()
    p.wait(timeout=DEADLINE)
    wait_for(lambda: "tracing: off" in status(memcached), "tracing off after mclat died")
    wait_for(lambda: "functions: 0 patched" in status(memcached), "functions unpatched")
    # The recorder (mclat's child) is gone too.
    wait_for(lambda: not [q for q in _mc._pids_with_arg(str(out)) if not _mc._gone(q)],
             "the recorder to end")
    traffic(memcached)  # memcached serves on, untraced


def test_slow_usage_errors():
    for args, msg in ((["--slow", "1ms"], "needs -o DIR"), (["-o", "x"], "goes with --slow"),
                      (["--slow", "fast", "-o", "x"], "--slow wants a time"),
                      (["--slow", "-1ms", "-o", "x"], "--slow wants a time"),
                      (["--slow-libcalls"], "goes with --slow"),
                      (["--slow-depth", "2"], "goes with --slow"),
                      (["--slow", "1ms", "-o", "x", "--slow-depth", "0"], "--slow-depth wants"),
                      (["--slow", "1ms", "-o", "x", "--slow-depth", "-3"], "--slow-depth wants"),
                      (["--slow", "1ms", "-o", "x", "--slow-depth", "two"], "--slow-depth wants")):
        r = subprocess.run([MCLAT, "-p", "1", *args], capture_output=True, text=True,
                           timeout=DEADLINE)
        assert r.returncode == 2 and r.stderr.startswith("mclat: ") and msg in r.stderr, \
            (args, r.stderr)
