"""mctop's probe module (issue 10) in the real memcached build: its top-N
keys and counts against mcload's ground truth, within the Space-Saving
bounds it states (count - err <= truth <= count)."""
import importlib.util
import json
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
MODULE = os.path.join(BUILD, "modules", "mctop.so")
MCLOAD = os.path.join(BUILD, "mcload")


def _load_memcached_conftest():
    """tests/memcached/conftest.py (Memcached, xp) under a name of its own."""
    path = os.path.join(ROOT, "tests", "memcached", "conftest.py")
    spec = importlib.util.spec_from_file_location("mctop_memcached_conftest", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_mc = _load_memcached_conftest()
xp = _mc.xp
memcached_bin = _mc.memcached_bin  # the fixture that builds it (cached)


@pytest.fixture
def memcached(memcached_bin, tmp_path):
    """memcached (2 worker threads) with mctop.so loaded before any command."""
    mc = _mc.Memcached(memcached_bin, str(tmp_path))
    try:
        r = xp(mc.pid, "load", MODULE)
        assert r.returncode == 0 and "refused" not in r.stdout, r.stdout + r.stderr
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


def assert_within_bounds(report, truth):
    for k in report["keys"]:
        t = truth.get(k["key"], 0)
        assert k["calls"] - k["err"] <= t <= k["calls"], (k, t)


def test_zipf_top20_are_the_true_top20_within_the_bounds(memcached, tmp_path):
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
    # Every tracked key, the rarely seen ones with large errors included
    # (keys tracked by one thread only take the other's minimum).
    everything = top(memcached, 5000)
    assert len(everything["keys"]) == everything["tracked"]
    assert any(k["err"] > 0 for k in everything["keys"])
    assert_within_bounds(everything, truth)
    calls = [k["calls"] for k in everything["keys"]]
    assert calls == sorted(calls, reverse=True)


def test_binary_keys_and_multigets_counted_exactly(memcached, tmp_path):
    # 1000 keys fit each thread's 1024 counters: every count is exact.
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
