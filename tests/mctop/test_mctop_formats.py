# SPDX-License-Identifier: MIT
"""How mctop writes its numbers and names its tables: the target's uptime
in the hundredths it is measured in (never a binary rounding error such as
22.1300000000001), JSON's lat_every a count (an integer; null without
latency), and in watch mode (Debian's memcached) the HELP of the tables'
families says they are mctop's own, not the module's inside memcached."""
import json
import re
import time
import urllib.request

from test_mctop_cli import SAFETY, mc, mctop  # noqa: F401 (fixtures)
from test_mctop_ui import memcached_bin  # noqa: F401 (a fixture)
from test_mctop_module import _mc

stock = _mc.stock  # the fixture: Debian's memcached
UPTIME = re.compile(r"^mctop_target_uptime_seconds (\S+)$", re.M)


def metrics_port(m):
    deadline = time.monotonic() + SAFETY
    while True:
        found = re.search(r"metrics at http://127\.0\.0\.1:(\d+)/metrics", m.stderr())
        if found:
            return int(found.group(1))
        assert time.monotonic() < deadline, m.stderr()
        time.sleep(0.02)  # polling mctop's stderr, bounded by the deadline


def scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30) as r:
        return r.read().decode()


def test_watch_mode_uptime_and_help(stock, mctop):
    m = mctop("-p", stock.pid, "--no-ui", "--metrics", "127.0.0.1:0", 0.1)
    port = metrics_port(m)
    deadline = time.monotonic() + SAFETY
    seen = set()
    while len(seen) < 5:  # several uptimes: each a difference of two readings
        text = scrape(port)
        found = UPTIME.search(text)
        if found:
            assert re.fullmatch(r"\d+(\.\d\d?)?", found.group(1)), found.group(0)
            seen.add(found.group(1))
        assert time.monotonic() < deadline, (seen, text)
        time.sleep(0.05)  # the next interval's frame, bounded by the deadline
    helps = dict(re.findall(r"^# HELP (mctop_memory\w*|mctop_keys_tracked) (.*)$", text, re.M))
    assert set(helps) == {"mctop_memory_bytes", "mctop_memory_budget_bytes",
                          "mctop_keys_tracked"}, text
    for name, help_ in helps.items():
        assert "mctop's" in help_ and "module" not in help_, (name, help_)
    assert "nothing inside memcached" in helps["mctop_memory_bytes"]
    assert m.stop() == 0


def test_json_lat_every_is_a_count(mc, mctop):
    m = mctop("-p", mc.pid, "--json", "-r", 5, 0.1)
    raw = m.line()
    assert isinstance(json.loads(raw)["lat_every"], int), raw
    assert re.search(r'"lat_every":\d+,', raw), raw


def test_json_lat_every_without_latency_is_null(stock, mctop):
    m = mctop("-p", stock.pid, "--json", "-r", 5, 0.1)
    assert json.loads(m.line())["lat_every"] is None
