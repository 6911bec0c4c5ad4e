# SPDX-License-Identifier: MIT
"""The mctop command against the real memcached build: its
--json and -C output against mcload's ground truth (count - err <= truth <=
count), -c, --prefix, binary keys, the meta and binary protocols, finding
memcached without -p, injecting the agent, detaching on signals and on
SIGKILL, and its option errors."""
import importlib.util
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time

import pytest

from test_mctop_module import BUILD, ROOT, _mc, mcload, memcached_bin, xp  # noqa: F401
import keytext  # noqa: E402  (tests/memcached/keytext.py, on the path test_mctop_module set)

MCTOP = os.path.join(BUILD, "mctop")


def _mcload_tests():
    """tests/mcload/test_mcload.py, for its reader of mcload's --truth."""
    path = os.path.join(ROOT, "tests", "mcload", "test_mcload.py")
    spec = importlib.util.spec_from_file_location("mctop_cli_mcload_tests", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


truth_counts = _mcload_tests().read_truth  # {key: (gets, sets)}
SAFETY = 120  # seconds: only catches a hang, never paces a test


@pytest.fixture
def mc(memcached_bin, tmp_path):
    """memcached (2 worker threads) with the agent preloaded, no module."""
    m = _mc.Memcached(memcached_bin, str(tmp_path))
    yield m
    m.stop()


class Mctop:
    """mctop running in the background; its stdout read line by line."""

    def __init__(self, *args, env=None):
        self.proc = subprocess.Popen([MCTOP, *map(str, args)], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env)
        self.lines = queue.Queue()
        self.err = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put),
                         daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.err.append),
                         daemon=True).start()

    @staticmethod
    def _pump(stream, put):
        for line in stream:
            put(line)
        put(None)

    def line(self):
        """The next line of output; fails if mctop ended instead."""
        got = self.lines.get(timeout=SAFETY)
        assert got is not None, "mctop ended: rc %s, %s" % (self.proc.wait(), self.stderr())
        return got

    def frames_until(self, pred):
        """--json frames read up to the first for which pred holds."""
        frames = []
        deadline = time.monotonic() + SAFETY
        while not frames or not pred(frames[-1]):
            assert time.monotonic() < deadline, "no such frame; the last: %s" % frames[-1]
            frames.append(json.loads(self.line()))
        return frames

    def frame_until(self, pred):
        return self.frames_until(pred)[-1]

    def stderr(self):
        return "".join(e for e in self.err if e)

    def stop(self, sig=signal.SIGINT):
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=SAFETY)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def mctop():
    started = []

    def start(*args):
        m = Mctop(*args)
        started.append(m)
        return m
    yield start
    for m in started:
        m.kill()


def module_loaded(pid):
    r = xp(pid, "modules")
    assert r.returncode == 0, r.stderr
    return "mctop.so" in r.stdout


def wait_unloaded(pid):
    deadline = time.monotonic() + SAFETY
    while module_loaded(pid):
        assert time.monotonic() < deadline, "mctop.so is still loaded"
        time.sleep(0.05)  # polling a state, bounded by the deadline


def test_json_top20_agree_with_the_truth(mc, mctop, tmp_path):
    m = mctop("-p", mc.pid, "--json", "-r", 20, 0.2)
    first = json.loads(m.line())  # attached and counting
    assert first["pid"] == mc.pid and first["keys"] == []
    assert first["target"] == "memcached :%d" % mc.port
    truth_file = str(tmp_path / "truth.tsv")
    mcload(mc, "-z", "0.99", "-k", "100000", "-n", "200000", "--seed", "3",
           "--truth", truth_file)
    truth = {k: g + s for k, (g, s) in truth_counts(truth_file).items()}
    frames = [first] + m.frames_until(lambda f: f["total"] == 200000)
    last = frames[-1]
    # An interval after the load: nothing moved in it.
    quiet = json.loads(m.line())
    assert quiet["cmds_per_s"] == 0 and quiet["total"] == 200000
    assert all(k["reqs_per_s"] == 0 and k["bw_kbit_per_s"] == 0 and k["lat_us"] is None
               and not any(k["lat_hist_ns"]) for k in quiet["keys"])
    assert [k["calls"] for k in quiet["keys"]] == [k["calls"] for k in last["keys"]]
    assert m.stop() == 0
    wait_unloaded(mc.pid)

    assert len(last["keys"]) == 20
    true_top = sorted(truth, key=lambda k: -truth[k])[:20]
    assert {k["key"] for k in last["keys"]} == set(true_top)
    for k in last["keys"]:
        assert k["calls"] - k["err"] <= truth[k["key"]] <= k["calls"], k
    calls = [k["calls"] for k in last["keys"]]
    assert calls == sorted(calls, reverse=True)
    assert last["tracked"] >= 20 and last["bound"] <= last["keys"][-1]["calls"]
    # The per-interval rates add up to the counts: the hottest key's
    # reqs x span over every frame is its calls.
    hot = last["keys"][0]
    seen = sum(k["reqs_per_s"] * f["span_s"] for f in frames for k in f["keys"]
               if k["key"] == hot["key"])
    assert abs(seen - hot["calls"]) < 1, (seen, hot)
    assert sum(f["cmds_per_s"] * f["span_s"] for f in frames) == pytest.approx(200000, abs=1)
    assert hot["size_bytes"] == 100
    # Latency over the intervals that had its commands (none after the load).
    lats = [k["lat_us"] for f in frames for k in f["keys"] if k["key"] == hot["key"]]
    assert any(lat and lat > 0 for lat in lats)


def test_cumulative_rates_are_since_attach(mc, mctop):
    m = mctop("-p", mc.pid, "--json", "--cumulative", 0.2)
    m.line()
    mcload(mc, "-k", "1", "-n", "1000", "-r", "1:1", "--key-prefix", "one:")
    frames = m.frames_until(lambda f: f["total"] == 1000)
    frames.append(json.loads(m.line()))
    for f in frames[-2:]:
        k = f["keys"][0]
        assert k["key"] == "one:0" and k["calls"] == 1000
        # Over the whole span since attach, which grows with each frame.
        assert k["reqs_per_s"] * f["span_s"] == pytest.approx(1000, abs=0.01)
        assert k["lat_us"] > 0 and sum(k["lat_hist_ns"]) > 0
    assert frames[-1]["span_s"] > frames[-2]["span_s"]


def test_stream_blocks_show_the_columns_and_the_hottest_key(mc, mctop):
    m = mctop("-p", mc.pid, "-C", "-r", 5, 0.2)
    head = m.line()
    assert "memcached :%d (pid %d)" % (mc.port, mc.pid) in head
    assert m.line().split() == ["MEMCACHED", "KEY", "CALLS", "OBJSIZE", "REQ/S", "BW(kbps)",
                                "TOTAL", "LAT(us)", "ERR"]
    mcload(mc, "-z", "1.2", "-k", "1000", "-n", "20000", "--key-prefix", "hot:")
    # Read blocks until one shows the whole load; its first row is key hot:0.
    while "  total 20000  " not in m.line():
        pass
    assert m.line().startswith("MEMCACHED KEY")
    row = m.line().split()
    assert row[0] == "hot:0" and int(row[1]) > 1000, row
    assert m.stop(signal.SIGTERM) == 0
    wait_unloaded(mc.pid)


def test_commands_filter_counts_only_those(mc, mctop, tmp_path):
    m = mctop("-p", mc.pid, "--json", "-c", "set", "-r", 10, 0.2)
    m.line()
    truth_file = str(tmp_path / "truth.tsv")
    mcload(mc, "-z", "0.9", "-k", "500", "-n", "20000", "-r", "3:1", "--truth", truth_file)
    truth = truth_counts(truth_file)
    last = m.frame_until(lambda f: f["total"] == 20000)
    assert len(last["keys"]) == 10
    for k in last["keys"]:
        sets = truth[k["key"]][1]
        assert k["calls"] - k["err"] <= sets <= k["calls"], k
        assert k["sets"] > 0
    true_top = sorted(truth, key=lambda key: -truth[key][1])
    # Ranked by sets: the busiest setter is first.
    assert last["keys"][0]["key"] == true_top[0]


def test_prefix_groups_by_delimiter_and_by_regex(mc, mctop):
    by_colon = mctop("-p", mc.pid, "--json", "-r", 100, "--prefix", ":", 0.2)
    by_colon.line()
    by_regex = mctop("-p", mc.pid, "--json", "--prefix", "^([a-z]+)[:.]", 0.2)
    by_regex.line()  # a second mctop shares the module
    mcload(mc, "-k", "50", "-n", "3000", "--key-prefix", "user:")
    mcload(mc, "-k", "50", "-n", "1000", "--key-prefix", "sess.")
    f = by_colon.frame_until(lambda f: f["total"] == 4000)
    groups = {k["key"]: k["calls"] for k in f["keys"]}
    assert groups["user:"] == 3000
    assert sum(v for k, v in groups.items() if k.startswith("sess.")) == 1000
    assert len([k for k in groups if k.startswith("sess.")]) == 50  # no ':': keys of their own
    f = by_regex.frame_until(lambda f: f["total"] == 4000)
    assert {k["key"]: k["calls"] for k in f["keys"]} == {"user": 3000, "sess": 1000}
    # The module went with the mctop that loaded it: the other loads it
    # again and carries on from zero.
    assert by_colon.stop() == 0
    f = by_regex.frame_until(lambda f: f["total"] == 0)
    assert f["keys"] == [] and module_loaded(mc.pid)
    assert by_regex.stop() == 0
    wait_unloaded(mc.pid)


def test_binary_keys_and_the_binary_protocol(mc, mctop, tmp_path):
    j = mctop("-p", mc.pid, "--json", "-r", 100, 0.2)
    c = mctop("-p", mc.pid, "-C", "-r", 100, 0.2)
    j.line()
    c.line()
    truth_file = str(tmp_path / "truth.json")
    mcload(mc, "-B", "--binary-keys", "-k", "50", "-n", "5000", "-m", "3",
           "--truth", truth_file, "--truth-format", "json")
    truth = {k: g + s for k, (g, s) in truth_counts(truth_file).items()}
    assert any("\x00" in k for k in truth)
    f = j.frame_until(lambda f: f["total"] == sum(truth.values()))
    # The truth's keys are one code point per byte; mctop's, key texts.
    assert {keytext.to_bytes(k["key"], k["key_escaped"]).decode("latin-1"): k["calls"]
            for k in f["keys"]} == truth
    # The table shows the same key texts: \xNN, never the raw bytes.
    escaped = {keytext.from_bytes(k.encode("latin-1"))[0] for k in truth}
    rows = set()
    while len(rows) < len(escaped):
        line = c.line()
        if line.strip() and line.split()[0] in escaped:
            rows.add(line.split()[0])
    assert rows == escaped


def test_mctops_started_together_share_the_module(mc, mctop):
    """Several mctops that all find the module absent race to load it; the
    losers share the winner's instead of failing with "already loaded"."""
    tops = [mctop("-p", mc.pid, "--json", "-r", 50, 0.2) for _ in range(4)]
    for t in tops:
        json.loads(t.line())
    assert module_loaded(mc.pid)
    # One more that loses the race for certain: it finds the module absent,
    # then its load meets the one already there.
    late = Mctop("-p", mc.pid, "--json", "-r", 50, 0.2,
                 env=dict(os.environ, MCTOP_TEST_LOSE_LOAD_RACE="1"))
    tops.append(late)
    json.loads(late.line())
    for t in tops:
        assert t.stop() == 0, t.stderr()
    wait_unloaded(mc.pid)


def test_meta_commands_counted(mc, mctop):
    m = mctop("-p", mc.pid, "--json", 0.2)
    m.line()
    s = mc.client()
    s.sendall(b"ms meta:k 2 T0\r\nhi\r\n")
    assert _mc.recv_until(s, b"\r\n") == b"HD\r\n"
    s.sendall(b"mg meta:k v\r\n")
    reply = _mc.recv_until(s, b"hi\r\n")
    assert reply.startswith(b"VA 2"), reply
    s.sendall(b"mg meta:missing v\r\n")
    assert _mc.recv_until(s, b"\r\n") == b"EN\r\n"
    s.sendall(b"md meta:k\r\n")
    assert _mc.recv_until(s, b"\r\n") == b"HD\r\n"
    s.close()
    # The delete came last on the connection: once it shows, all were seen.
    f = m.frame_until(lambda f: any(k["key"] == "meta:k" and k["deletes"] for k in f["keys"]))
    keys = {k["key"]: k for k in f["keys"]}
    assert f["total"] == 4, f
    k = keys["meta:k"]
    assert (k["calls"], k["err"], k["sets"], k["get_hits"], k["deletes"]) == (3, 0, 1, 1, 1)
    assert keys["meta:missing"]["get_misses"] == 1


def test_finds_the_one_memcached_or_names_them_all(memcached_bin, mc, tmp_path):
    other = _mc.Memcached(memcached_bin, str(tmp_path))
    try:
        r = subprocess.run([MCTOP, "--json", "0.1", "1"], capture_output=True, text=True,
                           timeout=SAFETY, stdin=subprocess.DEVNULL)
        assert r.returncode == 1 and r.stdout == ""
        assert "memcached processes are running; choose one with -p:" in r.stderr, r.stderr
        listed = r.stderr.split("-p:", 1)[1].split()
        assert {str(mc.pid), str(other.pid)} <= set(listed)
    finally:
        other.stop()
    # With exactly one running (ours: no other test's), it is found.
    running = [p for p in os.listdir("/proc") if p.isdigit() and _comm(p) == "memcached"]
    if running != [str(mc.pid)]:
        pytest.skip("other memcached processes run: %s" % running)
    r = subprocess.run([MCTOP, "--json", "0.1", "1"], capture_output=True, text=True,
                       timeout=SAFETY, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["pid"] == mc.pid


def _comm(pid):
    try:
        with open("/proc/%s/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def test_injects_the_agent_when_memcached_has_none(memcached_bin, tmp_path):
    bare = _mc.Memcached(memcached_bin, str(tmp_path), preload=False)
    try:
        r = subprocess.run([MCTOP, "-p", str(bare.pid), "--json", "0.1", "2"],
                           capture_output=True, text=True, timeout=SAFETY,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        assert "injecting" in r.stderr
        assert [json.loads(line)["pid"] for line in r.stdout.splitlines()] == [bare.pid] * 2
        wait_unloaded(bare.pid)
    finally:
        bare.stop()


def test_sigkill_leaves_memcached_serving_and_unloads(mc, mctop):
    m = mctop("-p", mc.pid, "--json", 0.1)
    m.line()
    assert module_loaded(mc.pid)
    m.proc.kill()
    m.proc.wait()
    wait_unloaded(mc.pid)
    s = mc.client()
    s.sendall(b"set after 0 0 2\r\nok\r\nget after\r\n")
    assert _mc.recv_until(s, b"END\r\n") == b"STORED\r\nVALUE after 0 2\r\nok\r\nEND\r\n"
    s.close()
    # A later mctop attaches again, to a fresh module.
    r = subprocess.run([MCTOP, "-p", str(mc.pid), "--json", "0.1", "1"], capture_output=True,
                       text=True, timeout=SAFETY, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["total"] == 0


def test_budget_is_set_and_reported(mc):
    r = subprocess.run([MCTOP, "-p", str(mc.pid), "--json", "--budget", "4M", "0.1", "1"],
                       capture_output=True, text=True, timeout=SAFETY, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["budget_bytes"] == 4 << 20


def test_latency_is_set_for_the_module_and_shown(mc, mctop):
    # By default (auto, a thread this idle) every command is timed, and
    # the frames say so; --latency 4 sets the module, and the frames show
    # LAT as of one command in 4 once a worker has keys (lat_every is the
    # sparsest timing among workers with a feed).
    r = subprocess.run([MCTOP, "-p", str(mc.pid), "--json", "0.1", "1"], capture_output=True,
                       text=True, timeout=SAFETY, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["lat_every"] == 1
    m = mctop("-p", mc.pid, "--json", "--latency", "4", 0.1)
    m.line()
    r = xp(mc.pid, "command", "mctop.so", "latency")
    assert r.stdout == "latency every 4\n", r.stdout + r.stderr
    s = mc.client()
    s.sendall(b"get shown\r\n")
    _mc.recv_until(s, b"END\r\n")
    s.close()
    assert m.frame_until(lambda f: f["total"] == 1)["lat_every"] == 4


@pytest.mark.parametrize("budget,unit,most", [("1K", "K", "1073741824K"),
                                              ("1M", "M", "1048576M"),
                                              ("1000", "", "1099511627776 bytes")])
def test_a_budget_under_the_modules_least_is_refused_in_the_units_typed(mc, budget, unit,
                                                                          most):
    r = subprocess.run([MCTOP, "-p", str(mc.pid), "--json", "--budget", budget, "0.1", "1"],
                       capture_output=True, text=True, timeout=SAFETY, stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stdout + r.stderr
    # The least depends on memcached's threads; it is a whole number of
    # the unit typed.
    assert re.match(r"mctop: --budget %s refused: the module takes \d+%s to %s[ \n]"
                    % (budget, unit, most), r.stderr), r.stderr
    assert r.stdout == ""
    wait_unloaded(mc.pid)


def test_the_least_budget_the_module_names_is_accepted(mc):
    r = subprocess.run([MCTOP, "-p", str(mc.pid), "--json", "--budget", "1M", "0.1", "1"],
                       capture_output=True, text=True, timeout=SAFETY, stdin=subprocess.DEVNULL)
    least = r.stderr.split("the module takes ")[1].split()[0]
    assert least.endswith("M"), r.stderr
    r = subprocess.run([MCTOP, "-p", str(mc.pid), "--json", "--budget", least, "0.1", "1"],
                       capture_output=True, text=True, timeout=SAFETY, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["budget_bytes"] == int(least[:-1]) << 20
    wait_unloaded(mc.pid)


@pytest.mark.parametrize("budget", ["2048G", "2T"])
def test_a_budget_over_the_most_is_a_usage_error_before_attaching(mc, budget):
    r = subprocess.run([MCTOP, "-p", str(mc.pid), "--json", "--budget", budget, "0.1", "1"],
                       capture_output=True, text=True, timeout=SAFETY, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, r.stdout + r.stderr
    most = "1024G" if budget.endswith("G") else "1T"
    assert r.stderr.startswith(f"mctop: --budget {budget} is more than the most, {most}\n")
    assert r.stdout == ""


def test_help_gives_the_budgets_range():
    out = subprocess.run([MCTOP, "--help"], capture_output=True, text=True).stdout
    assert "--budget SIZE" in out and "4M" in out and "to 1T" in out, out


@pytest.mark.parametrize("args,complaint", [
    (["-x"], "unknown option '-x'"),
    (["--frobnicate"], "unknown option '--frobnicate'"),
    (["-p"], "-p needs a value"),
    (["-p", "abc"], "-p wants a process id, not 'abc'"),
    (["-r", "0"], "-r wants a number of rows"),
    (["-c", "get,flush"], "unknown command 'flush'"),
    (["--prefix", "(x"], "is not a regular expression"),
    (["--sort", "fastest"], "--sort wants calls, size, reqs, bw, newest or lat"),
    (["--budget", "12Q"], "--budget wants a size"),
    (["--latency", "3"], "--latency wants auto or a power of two from 1 to 1024, not '3'"),
    (["--latency", "often"], "--latency wants auto or a power of two"),
    (["--latency", "2048"], "--latency wants auto or a power of two"),
    (["--metrics", "9100"], "--metrics wants ADDR:PORT"),
    (["-o", "/nonexistent/dir/top.json"], "-o /nonexistent/dir/top.json: cannot write"),
    (["-o", ""], "-o wants a file name"),
    (["-C", "--json"], "choose one"),
    (["--no-ui"], "--no-ui shows nothing"),
    (["0"], "the interval is seconds"),
    (["1", "x"], "the count is a number of intervals"),
    (["1", "2", "3"], "unexpected argument '3'"),
    (["1", "-1"], "'-1': the interval and the count are positive numbers"),
])
def test_bad_options_exit_2_naming_the_problem(args, complaint):
    r = subprocess.run([MCTOP, *args], capture_output=True, text=True, timeout=SAFETY,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert complaint in r.stderr
    assert r.stdout == ""


def test_help_and_version():
    r = subprocess.run([MCTOP, "--help"], capture_output=True, text=True, timeout=SAFETY)
    assert r.returncode == 0 and "--prefix PAT" in r.stdout and "--metrics" in r.stdout
    r = subprocess.run([MCTOP, "--version"], capture_output=True, text=True, timeout=SAFETY)
    assert r.returncode == 0 and r.stdout.startswith("mctop ")
