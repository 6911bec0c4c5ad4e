# SPDX-License-Identifier: MIT
"""mctop on Debian's own memcached (/usr/bin/memcached, no probe sites):
it falls back to memcached's `watch fetchers mutations` stream,
says so (source), counts against mcload's ground truth within the bound it
states (calls <= truth <= calls + lost: the stream only ever loses lines,
and memcached counts each one it skips or drops), shows latency as absent (never
0), injects nothing, and closes its watch connection when it ends."""
import json
import re
import signal
import time
import urllib.request

from test_mctop_cli import SAFETY, mctop, truth_counts  # noqa: F401,F811 (a fixture)
from test_mctop_module import _mc, mcload
import keytext  # noqa: E402  (tests/memcached/keytext.py, on the path test_mctop_module set)

stock = _mc.stock  # the fixture: Debian's memcached
wait_watchers = _mc.wait_log_watchers


def key_of(k):
    """The key's bytes as mcload's truth names them (one character a byte)."""
    return keytext.to_bytes(k["key"], k["key_escaped"]).decode("latin-1")


def assert_within_bound(frame, truth):
    lost = frame["lost"]
    for k in frame["keys"]:
        assert k["err"] == 0
        assert k["calls"] <= truth[key_of(k)] <= k["calls"] + lost, (k, truth[key_of(k)], lost)


def test_json_against_the_truth(stock, mctop, tmp_path):
    m = mctop("-p", stock.pid, "--json", "-r", 20, 0.2)
    first = json.loads(m.line())
    assert first["source"] == "memcached watch" and first["lat_every"] is None
    assert first["target"] == "memcached :%d" % stock.port
    wait_watchers(stock, 1)
    truth_file = str(tmp_path / "truth.tsv")
    mcload(stock, "-z", "0.99", "-k", "5000", "-n", "100000", "--seed", "5",
           "--truth", truth_file)
    truth = {k: g + s for k, (g, s) in truth_counts(truth_file).items()}
    sent = sum(truth.values())
    last = m.frame_until(lambda f: f["total"] + f["lost"] >= sent)
    assert m.stop() == 0
    assert "no probe sites" in m.stderr() and "watch stream" in m.stderr()

    assert last["source"] == "memcached watch"
    assert last["total"] + last["lost"] >= sent  # every command seen or counted lost
    assert len(last["keys"]) == 20
    assert_within_bound(last, truth)
    if last["lost"] == 0:  # the usual case at this rate: exact
        true_top = sorted(truth, key=lambda k: (-truth[k], k))[:20]
        assert {key_of(k): k["calls"] for k in last["keys"]} == {k: truth[k] for k in true_top}
    for k in last["keys"]:  # what the stream cannot see is absent, not 0
        assert k["lat_us"] is None and k["lat_hist_ns"] is None
        assert k["size_bytes"] == 100 and k["get_hits"] + k["get_misses"] + k["sets"] == k["calls"]
    # Nothing was injected, and memcached no longer logs for anyone.
    with open("/proc/%d/maps" % stock.pid) as f:
        assert "libxprobes" not in f.read()
    wait_watchers(stock, 0)


def test_binary_keys_and_the_binary_protocol(stock, mctop, tmp_path):
    m = mctop("-p", stock.pid, "--json", "-r", 100, 0.2)
    m.line()
    wait_watchers(stock, 1)
    truth_file = str(tmp_path / "truth.json")
    mcload(stock, "-B", "--binary-keys", "-k", "50", "-n", "5000", "-m", "3",
           "--truth", truth_file, "--truth-format", "json")
    truth = {k: g + s for k, (g, s) in truth_counts(truth_file).items()}
    assert any("\x00" in k for k in truth)
    f = m.frame_until(lambda f: f["total"] + f["lost"] >= sum(truth.values()))
    assert_within_bound(f, truth)
    if f["lost"] == 0:
        assert {key_of(k): k["calls"] for k in f["keys"]} == truth


def test_block_header_says_the_source_and_latency_is_a_dash(stock, mctop, tmp_path):
    m = mctop("-p", stock.pid, "-C", "-r", 3, 0.2)
    header = m.line()
    assert "source: memcached watch" in header and "lost 0" in header
    assert "lat -" in header
    wait_watchers(stock, 1)
    mcload(stock, "-k", "3", "-n", "3000")
    deadline = time.monotonic() + SAFETY
    while True:
        line = m.line()
        if line.startswith("key:"):
            break
        assert time.monotonic() < deadline
    cols = line.split()
    assert cols[6] == "-", line  # LAT(us): absent, never 0
    assert m.stop(signal.SIGTERM) == 0
    wait_watchers(stock, 0)


def test_metrics_have_no_latency_family(stock, mctop):
    m = mctop("-p", stock.pid, "--no-ui", "--metrics", "127.0.0.1:0", "-r", 5, 0.2)
    deadline = time.monotonic() + SAFETY
    while not re.search(r"metrics at http://127\.0\.0\.1:(\d+)/metrics", m.stderr()):
        assert time.monotonic() < deadline, m.stderr()
        time.sleep(0.02)  # polling mctop's stderr, bounded by the deadline
    port = int(re.search(r"metrics at http://127\.0\.0\.1:(\d+)/metrics", m.stderr()).group(1))
    wait_watchers(stock, 1)
    mcload(stock, "-k", "5", "-n", "2000")
    while True:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30) as r:
            text = r.read().decode()
        if 'mctop_key_calls_total{key="key:0"}' in text:
            break
        assert time.monotonic() < deadline, text
        time.sleep(0.05)  # polling the exporter, bounded by the deadline
    assert 'mctop_source_info{source="memcached watch"} 1' in text
    assert "mctop_commands_lost_total 0" in text
    assert "mctop_key_latency" not in text  # absent, not 0
    assert m.stop() == 0
    wait_watchers(stock, 0)


def test_sigkill_leaves_no_watcher(stock, mctop):
    m = mctop("-p", stock.pid, "--json", 0.2)
    m.line()
    wait_watchers(stock, 1)
    m.kill()
    # The kernel closes the socket; memcached drops the watcher at its
    # next write, which the next logged command makes.
    deadline = time.monotonic() + SAFETY
    while _mc.log_watchers(stock) != 0:
        with stock.client() as s:
            s.sendall(b"get nothing\r\n")
            _mc.recv_until(s, b"END\r\n")
        assert time.monotonic() < deadline


def test_a_stalled_mctop_counts_what_memcached_skipped(stock, mctop, tmp_path):
    # mctop stopped while ~30 MB of watch lines pour in: more than
    # memcached's 256 KiB watcher buffer and the sockets' hold, so memcached
    # skips lines.  mctop shows them as lost, and the counts stay bounds.
    m = mctop("-p", stock.pid, "--json", "-r", 20, 0.2)
    m.line()
    wait_watchers(stock, 1)
    m.proc.send_signal(signal.SIGSTOP)
    try:
        truth_file = str(tmp_path / "truth.tsv")
        mcload(stock, "-z", "0.99", "-k", "1000", "-n", "300000", "--truth", truth_file)
    finally:
        m.proc.send_signal(signal.SIGCONT)
    truth = {k: g + s for k, (g, s) in truth_counts(truth_file).items()}
    # Caught up: every command seen or counted lost, and a frame later
    # nothing moved (lines still in the sockets are neither).
    frames = [m.frame_until(lambda f: f["total"] + f["lost"] >= 300000)]
    while True:
        frames.append(json.loads(m.line()))
        if (frames[-1]["total"], frames[-1]["lost"]) == (frames[-2]["total"], frames[-2]["lost"]):
            break
    last = frames[-1]
    # lost is an upper bound: a set whose lookup and store were both
    # skipped counts twice.
    assert last["total"] + last["lost"] >= 300000
    assert last["lost"] > 0
    assert_within_bound(last, truth)
    assert m.stop() == 0
