# SPDX-License-Identifier: MIT
"""mclat --metrics scraped by Debian's real Prometheus: each
stage a histogram, so histogram_quantile(0.99, ...) answers a p99 of
total (and of every stage) through Prometheus' HTTP API.  Started as in
tests/mctop/test_mctop_metrics.py."""
import json
import math
import re
import shutil
import subprocess
import time
import urllib.request

import pytest

import test_mclat as t
from test_mclat import Mclat, memcached, memcached_bin  # noqa: F401  (fixtures)


def query(prom_port, promql):
    """An instant query through Debian's promtool (the HTTP API's
    /api/v1/query); [] while Prometheus is not answering yet."""
    r = subprocess.run(["promtool", "query", "instant", "-o", "json",
                        "http://127.0.0.1:%d" % prom_port, promql],
                       capture_output=True, text=True, timeout=60)
    return json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else []


def metrics_port(m):
    def said():
        return any("metrics at http://" in e for e in m.errors)
    t.wait_for(said, "mclat's metrics address")
    line = next(e for e in m.errors if "metrics at http://" in e)
    return int(re.search(r":(\d+)/metrics", line).group(1))


def test_prometheus_gets_a_p99_of_total_and_each_stage(memcached, tmp_path):
    prometheus = shutil.which("prometheus")
    if not prometheus:
        pytest.skip("no prometheus binary (Debian's package `prometheus`; make deps installs it)")
    m = Mclat(memcached, "--no-ui", "--metrics", "127.0.0.1:0", "--sample", "50%", "0.5")
    port = metrics_port(m)
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30) as r:
        text = r.read().decode()
    assert "# TYPE mclat_stage_seconds histogram" in text
    load = subprocess.Popen([t.MCLOAD, "-s", "127.0.0.1:%d" % memcached.port, "-R", "5000",
                             "-c", "2", "-d", "300"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    prom_port = t._mc.free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                      "scrape_configs:\n  - job_name: mclat\n    static_configs:\n"
                      "      - targets: ['127.0.0.1:%d']\n" % port)
    log_path = tmp_path / "prometheus.log"
    with open(log_path, "w") as log:
        prom = subprocess.Popen([prometheus, "--config.file=%s" % config,
                                 "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
                                 "--web.listen-address=127.0.0.1:%d" % prom_port],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    p99 = ('histogram_quantile(0.99, sum by (stage, le) '
           '(rate(mclat_stage_seconds_bucket[20s])))')
    try:
        deadline = time.monotonic() + 120
        while True:
            assert prom.poll() is None, log_path.read_text()
            assert load.poll() is None, "mcload ended"
            result = query(prom_port, p99)
            by_stage = {r["metric"]["stage"]: float(r["value"][1]) for r in result}
            if "total" in by_stage and not math.isnan(by_stage["total"]):
                break
            assert time.monotonic() < deadline, (result, log_path.read_text())
            time.sleep(0.2)  # the next poll of the API, not a synchronisation
        # A p99 per stage, the total's within the buckets (1 us .. 1 s)
        # and no less than any one stage's.
        assert set(by_stage) == set(t.STAGES + ["total"]), by_stage
        assert 1e-6 <= by_stage["total"] <= 1, by_stage
        assert all(math.isnan(v) or v <= by_stage["total"] + 1e-9 for v in by_stage.values())
        with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/metadata?metric="
                                    "mclat_stage_seconds" % prom_port, timeout=30) as r:
            meta = json.loads(r.read())["data"]["mclat_stage_seconds"][0]
        assert meta["type"] == "histogram"
    finally:
        prom.terminate()
        prom.wait(timeout=60)
        load.terminate()
        load.wait(timeout=60)
    m.finish()
    assert m.lines == []  # --no-ui: nothing on stdout


def test_no_ui_needs_metrics():
    r = subprocess.run([t.MCLAT, "--no-ui"], capture_output=True, text=True,
                       timeout=t.DEADLINE, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stderr.startswith("mclat: ") and "--metrics" in r.stderr
