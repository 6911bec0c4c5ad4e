# SPDX-License-Identifier: MIT
"""mctop --metrics against the real memcached
build: a real Prometheus (Debian's package) scrapes `mctop --no-ui
--metrics` and its query API names the hottest key mcload sent; the
exposition parses line by line with bounded key series and escaped labels;
a client that connects and says nothing does not hold up a scrape; a bad
or busy address is refused with a message."""
import json
import os
import sys
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
MCTOP = os.path.join(BUILD, "mctop")
OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"


sys.path.insert(0, os.path.join(ROOT, "tests", "memcached"))
import mcserver as _mc  # noqa: E402  (the real memcached, tests/memcached/mcserver.py)
from test_mctop_module import mcload, read_truth  # noqa: E402

memcached_bin = _mc.memcached_bin  # the fixture that builds it (cached)
memcached = _mc.memcached  # memcached with the agent preloaded, no module yet


class Mctop:
    """`mctop -p PID --no-ui --metrics 127.0.0.1:0 -r ROWS 0.2`: the port
    is the one it announces on stderr (by then the module is loaded)."""

    def __init__(self, pid, tmp, rows):
        self.errpath = os.path.join(str(tmp), "mctop.err")
        self.err = open(self.errpath, "w+")
        self.proc = subprocess.Popen(
            [MCTOP, "-p", str(pid), "--no-ui", "--metrics", "127.0.0.1:0", "-r", str(rows),
             "0.2"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.err)
        deadline = time.monotonic() + 60
        while True:
            m = re.search(r"metrics at http://127\.0\.0\.1:(\d+)/metrics", self.stderr())
            if m:
                self.port = int(m.group(1))
                return
            assert self.proc.poll() is None, "mctop exited: " + self.stderr()
            assert time.monotonic() < deadline, "mctop never announced its port: " + self.stderr()
            time.sleep(0.05)  # polling a file, not a synchronisation

    def stderr(self):
        with open(self.errpath) as f:
            return f.read()

    def get(self, path="/metrics", accept=None):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path))
        if accept:
            req.add_header("Accept", accept)
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.headers["Content-Type"], r.read().decode("utf-8")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        rc = self.proc.wait(timeout=60)
        self.err.close()
        return rc


@pytest.fixture
def mctop(memcached, tmp_path):
    m = Mctop(memcached.pid, tmp_path, rows=5)
    yield m
    m.stop()


def query(prom_port, promql):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (
        prom_port, urllib.parse.urlencode({"query": promql}))
    with urllib.request.urlopen(url, timeout=30) as r:
        answer = json.loads(r.read())
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def start_prometheus(prometheus_bin, tmp_path, target_port):
    """A real Prometheus scraping 127.0.0.1:TARGET_PORT each second, its
    data and log in tmp_path: (the process, its API's port)."""
    prom_port = _mc.free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                      "scrape_configs:\n  - job_name: mctop\n    static_configs:\n"
                      "      - targets: ['127.0.0.1:%d']\n" % target_port)
    with open(tmp_path / "prometheus.log", "w") as log:
        prom = subprocess.Popen([prometheus_bin, "--config.file=%s" % config,
                                 "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
                                 "--web.listen-address=127.0.0.1:%d" % prom_port],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    return prom, prom_port


@pytest.fixture
def prometheus_bin():
    path = shutil.which("prometheus")
    if not path:
        pytest.skip("no prometheus binary (Debian's package `prometheus`; make deps installs it)")
    return path


def test_prometheus_finds_the_hottest_key(memcached, mctop, prometheus_bin, tmp_path):
    truth_file = str(tmp_path / "truth.tsv")
    mcload(memcached, "-z", "1.1", "-k", "1000", "-n", "30000", "--seed", "7",
           "--truth", truth_file)
    truth = read_truth(truth_file)
    hottest = max(truth, key=truth.get)

    prom, prom_port = start_prometheus(prometheus_bin, tmp_path, mctop.port)
    try:
        deadline = time.monotonic() + 120
        result = []
        while True:
            assert prom.poll() is None, (tmp_path / "prometheus.log").read_text()
            try:
                result = query(prom_port, "topk(1, mctop_key_calls_total)")
            except OSError:
                result = []  # not listening yet
            if result and result[0]["metric"]["key"] == hottest:
                break
            assert time.monotonic() < deadline, (hottest, result,
                                                 (tmp_path / "prometheus.log").read_text())
            time.sleep(0.2)  # the next poll of the API, not a synchronisation
        sample = result[0]
        assert sample["metric"]["job"] == "mctop"
        calls = int(float(sample["value"][1]))
        err = int(float(query(prom_port, 'mctop_key_calls_error{key="%s"}' % hottest)
                        [0]["value"][1]))
        assert calls - err <= truth[hottest] <= calls
        # It scraped the OpenMetrics form: an info family exists only there.
        with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/metadata?metric=mctop_target"
                                    % prom_port, timeout=30) as r:
            meta = json.loads(r.read())["data"]["mctop_target"][0]
        assert meta["type"] == "info"
        target = query(prom_port, "mctop_target_info")[0]["metric"]
        assert target["pid"] == str(memcached.pid)
    finally:
        prom.terminate()
        prom.wait(timeout=60)


# One sample: name, optional {labels}, value (no timestamps from mctop).
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
# A label value: every backslash, double quote and newline escaped.
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def parse(text, openmetrics):
    """{(name, labels tuple): value}, checking the format line by line."""
    types, samples = {}, {}
    lines = text.split("\n")
    assert lines[-1] == "", "the text ends with a newline"
    lines = lines[:-1]
    if openmetrics:
        assert lines[-1] == "# EOF" and "# EOF" not in lines[:-1]
        lines = lines[:-1]
    family = None
    for line in lines:
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(" ")
            assert family not in types, "family %s twice" % family
            types[family] = kind
            continue
        assert not line.startswith("#"), line
        m = SAMPLE.match(line)
        assert m, "not a sample: %r" % line
        name, labels, value = m.groups()
        # Each sample belongs to the family TYPE'd last (families are not
        # interleaved), by the suffix rules of its format.
        assert family is not None, line
        kind = types[family]
        if openmetrics:
            suffix = {"counter": "_total", "info": "_info"}.get(kind, "")
            assert name == family + suffix, (name, family, kind)
        else:
            assert kind in ("counter", "gauge") and name == family, (name, family, kind)
            if kind == "counter":
                assert name.endswith("_total"), name
        pairs = ()
        if labels:
            pos, got = 0, []
            while pos < len(labels):
                lm = LABEL.match(labels, pos)
                assert lm, "badly escaped labels: %r" % labels
                got.append((lm.group(1), lm.group(2)))
                pos = lm.end()
            pairs = tuple(got)
        float(value)
        assert (name, pairs) not in samples, "duplicate %s" % line
        samples[(name, pairs)] = float(value)
    return types, samples


def test_metrics_parse_with_bounded_keys_and_idle_clients(memcached, mctop, tmp_path):
    # Binary keys: the module writes them \xNN-escaped, backslashes that
    # the label values must escape again.
    mcload(memcached, "-B", "--binary-keys", "-z", "0.99", "-k", "500", "-n", "20000")
    deadline = time.monotonic() + 60
    while True:
        ctype, text = mctop.get()
        types, samples = parse(text, openmetrics=False)
        keys = {dict(labels)["key"] for name, labels in samples
                if name == "mctop_key_calls_total"}
        if samples.get(("mctop_commands_total", ())) == 20000 and len(keys) == 5:
            break  # a frame with all the load in it
        assert time.monotonic() < deadline, text
        time.sleep(0.1)  # until mctop's next interval, not a synchronisation
    assert ctype == "text/plain; version=0.0.4; charset=utf-8"
    assert samples[("mctop_key_rows", ())] == 5
    assert samples[("mctop_target_up", ())] == 1
    assert all("\\x" in k for k in keys), keys  # escaped binary bytes arrived
    # Every per-key family holds at most -r 5 series, the same keys.
    for name, labels in samples:
        if name.startswith("mctop_key_") and name != "mctop_key_rows":
            assert dict(labels)["key"] in keys, (name, labels)
    # The busiest five: none left out had more calls (the bound says so).
    assert min(samples[("mctop_key_calls_total", (("key", k),))] for k in keys) >= \
        samples[("mctop_error_bound", ())]

    # Two clients that say nothing, or half a request, then a scrape.
    idle = socket.create_connection(("127.0.0.1", mctop.port), timeout=30)
    half = socket.create_connection(("127.0.0.1", mctop.port), timeout=30)
    half.sendall(b"GET /metr")
    try:
        ctype, text = mctop.get(accept=OPENMETRICS)
        assert ctype == "application/openmetrics-text; version=1.0.0; charset=utf-8"
        om_types, om_samples = parse(text, openmetrics=True)
        assert om_types["mctop_key_calls"] == "counter" and om_types["mctop_target"] == "info"
        assert len([n for n, _ in om_samples if n == "mctop_key_calls_total"]) == 5
        # They are still connected, unanswered: the scrape did not wait
        # for them to be given up on.
        for s in (idle, half):
            s.setblocking(False)
            with pytest.raises(BlockingIOError):
                s.recv(1)
    finally:
        idle.close()
        half.close()
    with pytest.raises(urllib.error.HTTPError) as e:
        mctop.get("/nothing")
    assert e.value.code == 404
    ctype, _ = mctop.get("/")
    assert ctype.startswith("text/html")


def test_bad_or_busy_address_is_refused(memcached, tmp_path):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        for addr, why in (("127.0.0.1:%d" % busy.getsockname()[1], "Address already in use"),
                          ("::1:9150", "expected ADDR:PORT"),
                          ("127.0.0.1:70000", "expected ADDR:PORT")):
            r = subprocess.run([MCTOP, "-p", str(memcached.pid), "--no-ui", "--metrics", addr,
                                "0.2", "1"], capture_output=True, text=True, timeout=120,
                               stdin=subprocess.DEVNULL)
            assert r.returncode != 0 and why in r.stderr, (addr, r.stderr)
    finally:
        busy.close()
