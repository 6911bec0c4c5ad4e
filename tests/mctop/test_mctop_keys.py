# SPDX-License-Identifier: MIT
"""Keys as people write them: UTF-8 keys (a wide CJK one, one
with a combining accent) come out as the same text in mctop's --json, its
-C table, its full-screen view and its Prometheus labels (mcsnoop:
tests/mcsnoop/test_mcsnoop_keys.py);
keys that are not UTF-8 (\\xff), hold a control or a backslash come out
escaped by the one rule (tests/memcached/keytext.py), flagged in the JSON,
and reverse to the exact bytes sent.  Columns stay aligned by terminal
width.  Plus the full-screen view keeping its place under a sort that
changes every second, and "omitted" meaning one thing everywhere."""
import os
import json
import re
import shutil
import subprocess
import time
import unicodedata

import pytest

from test_mctop_module import BUILD, _mc, memcached_bin  # noqa: F401
from test_mctop_cli import mctop  # noqa: F401  (the fixture)
from test_mctop_metrics import Mctop as Exporter, prometheus_bin, query, start_prometheus  # noqa: F401
import keytext  # noqa: E402  (tests/memcached/keytext.py, on the path test_mctop_module set)
from keytext import KEYS, cols, send_keys  # noqa: E402

MCTOP = os.path.join(BUILD, "mctop")
MCLOAD = os.path.join(BUILD, "mcload")

CALLS = {k: 1 + gets for k, gets in KEYS}
TOTAL = sum(CALLS.values())
TEXT = {k: keytext.from_bytes(k)[0] for k, _ in KEYS}
ESCAPED = {b"bad\xff", b"ctl\x01x", b"back\\slash"}


@pytest.fixture
def memcached(memcached_bin, tmp_path):  # noqa: F811
    mc = _mc.Memcached(memcached_bin, str(tmp_path))
    yield mc
    mc.stop()


def test_json_keys_are_their_text_and_reverse_to_the_bytes(memcached, mctop):  # noqa: F811
    # The oracle itself, on the keys this test sends.
    assert TEXT[b"bad\xff"] == "bad\\xff" and TEXT[b"back\\slash"] == "back\\\\slash"
    for key, _ in KEYS:
        text, escaped = keytext.from_bytes(key)
        assert keytext.to_bytes(text, escaped) == key and escaped == (key in ESCAPED)
    j = mctop("-p", memcached.pid, "--json", "-r", 50, 0.2)
    j.line()  # attached: counting from here
    send_keys(memcached)
    f = j.frame_until(lambda f: f["total"] == TOTAL)
    got = {keytext.to_bytes(k["key"], k["key_escaped"]): k for k in f["keys"]}
    assert {k: v["calls"] for k, v in got.items()} == CALLS
    for key, k in got.items():
        assert k["key"] == TEXT[key]
        assert k["key_escaped"] == (key in ESCAPED), k["key"]
        if key not in ESCAPED:
            assert k["key"] == key.decode("utf-8")  # as people wrote it


def block_rows(m, want):
    """The first -C block holding every key of want: its column line and
    its rows, as {key text: line}."""
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "no block with every key"
        line = m.line()
        if not line.startswith("MEMCACHED KEY"):
            continue
        header, rows = line.rstrip("\n"), {}
        while True:
            line = m.line().rstrip("\n")
            if not line:
                break
            rows[line.split()[0]] = line
        if set(want) <= set(rows):
            return header, rows


def calls_end(line, key):
    """The terminal column where the CALLS number after key ends."""
    assert line.startswith(key), (line, key)
    m = re.match(r" +\d+", line[len(key):])
    return cols(key) + m.end()


def test_table_shows_key_texts_aligned(memcached, mctop):  # noqa: F811
    c = mctop("-p", memcached.pid, "-C", "-r", 50, 0.2)
    c.line()
    send_keys(memcached)
    header, rows = block_rows(c, TEXT.values())
    end = header.index("CALLS") + len("CALLS")
    for key, text in TEXT.items():
        line = rows[text]
        assert int(line.split()[1]) == CALLS[key]
        assert calls_end(line, text) == end, (line, header)  # aligned by width


def test_omitted_means_one_thing(memcached, mctop, tmp_path):  # noqa: F811
    """tracked keys not among the rows shown, plus untracked commands: the
    same in --json -r 2, -C -r 2 and --metrics -r 2."""
    j = mctop("-p", memcached.pid, "--json", "-r", 2, 0.2)
    c = mctop("-p", memcached.pid, "-C", "-r", 2, 0.2)
    j.line()
    c.line()
    send_keys(memcached)
    f = j.frame_until(lambda f: f["total"] == TOTAL and f["tracked"] == len(KEYS))
    assert len(f["keys"]) == 2 and f["omitted"] == len(KEYS) - 2
    deadline = time.monotonic() + 60
    while True:
        line = c.line()
        m = re.search(r"total (\d+)  tracked (\d+)  omitted (\d+)", line)
        if m and int(m.group(1)) == TOTAL:
            assert (int(m.group(2)), int(m.group(3))) == (len(KEYS), len(KEYS) - 2), line
            break
        assert time.monotonic() < deadline
    e = Exporter(memcached.pid, tmp_path, rows=2)
    try:
        while True:
            _, text = e.get()
            if "\nmctop_commands_total %d\n" % TOTAL in text:
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.1)  # mctop's next interval, not a synchronisation
        assert "\nmctop_keys_omitted %d\n" % (len(KEYS) - 2) in text
    finally:
        e.stop()


def test_prometheus_returns_the_utf8_label(memcached, prometheus_bin, tmp_path):
    e = Exporter(memcached.pid, tmp_path, rows=10)
    send_keys(memcached)
    prom, prom_port = start_prometheus(prometheus_bin, tmp_path, e.port)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert prom.poll() is None, (tmp_path / "prometheus.log").read_text()
            try:
                result = query(prom_port, "mctop_key_calls_total")
            except OSError:
                result = []  # not listening yet
            labels = {r["metric"]["key"]: int(float(r["value"][1])) for r in result}
            if len(labels) == len(KEYS):
                break
            assert time.monotonic() < deadline, result
            time.sleep(0.2)  # the next poll of the API, not a synchronisation
        # Every key's label is its key text: the UTF-8 ones as people wrote them.
        assert labels == {TEXT[k]: n for k, n in CALLS.items()}
        # And a query by the UTF-8 key finds it.
        hit = query(prom_port, 'mctop_key_calls_total{key="商品:热门"}')
        assert [int(float(r["value"][1])) for r in hit] == [CALLS["商品:热门".encode()]]
    finally:
        prom.terminate()
        prom.wait(timeout=60)
        e.stop()


# ---- The full-screen view (tmux; the harness of test_mctop_ui.py) ----

def screen_for(mc, *args, locale="C.UTF-8"):
    from test_mctop_ui import Screen
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    # A UTF-8 locale, as a user's terminal has: mctop takes LC_CTYPE from it.
    return Screen("LC_ALL=%s %s -p %d %s" % (locale, MCTOP, mc.pid, " ".join(map(str, args))))


def written(ui, path):
    """W's file, once the footer says it was written: {key bytes: row}."""
    ui.keys("W")
    ui.wait_for("wrote " + path)
    with open(path, encoding="utf-8") as f:
        return {keytext.to_bytes(k["key"], k["key_escaped"]): k for k in json.load(f)["keys"]}


def test_ui_shows_key_texts_aligned(memcached, tmp_path):
    out = str(tmp_path / "w.json")
    ui = screen_for(memcached, "--cumulative", "-o", out, 0.2)
    try:
        ui.wait_for("keys tracked")
        send_keys(memcached)
        # tmux keeps a combining accent in its letter's cell; compare composed.
        nfc = {unicodedata.normalize("NFC", t): k for k, t in TEXT.items()}
        text = ui.wait(lambda t: all(n in unicodedata.normalize("NFC", t) for n in nfc),
                       "every key text")
        lines = [unicodedata.normalize("NFC", line) for line in text.splitlines()]
        header = next(line for line in lines if "MEMCACHED KEY" in line)
        end = header.index("CALLS") + len("CALLS")
        for shown, key in nfc.items():
            line = next(line for line in lines if line[2:].split()[:1] == [shown])
            assert int(line[2:].split()[1]) == CALLS[key], line
            assert 2 + calls_end(line[2:], shown) == end, (line, header)
        # W writes the same key texts, flagged, reversing to the bytes sent.
        rows = written(ui, out)
        assert {k: r["calls"] for k, r in rows.items()} == CALLS
        assert all(r["key"] == TEXT[k] and r["key_escaped"] == (k in ESCAPED)
                   for k, r in rows.items())
    finally:
        ui.close()


def test_ui_on_a_terminal_that_is_not_utf8(memcached, tmp_path):
    """LC_ALL=C: every byte past 0x7f escaped too, by the same rule, and
    W's file says so (key_escaped) and still reverses to the bytes."""
    out = str(tmp_path / "w.json")
    ui = screen_for(memcached, "--cumulative", "-o", out, 0.2, locale="C")
    try:
        ui.wait_for("keys tracked")
        send_keys(memcached)
        ascii_text = "shop:76:feature|\\xc3\\xa9"
        text = ui.wait_for(ascii_text)
        assert all(ord(c) < 0x80 for c in text), text
        rows = written(ui, out)
        assert {k: r["calls"] for k, r in rows.items()} == CALLS
        assert rows["shop:76:feature|é".encode()]["key"] == ascii_text
        assert rows["shop:76:feature|é".encode()]["key_escaped"] is True
    finally:
        ui.close()


def status(text):
    return next(line for line in text.splitlines() if line.startswith("sort "))


def first_row(text):
    lines = text.splitlines()
    return lines[next(i for i, line in enumerate(lines) if "MEMCACHED KEY" in line) + 1]


def test_ui_keeps_its_place_under_a_changing_sort(memcached, tmp_path):
    """Sorted by LAT, which changes every interval, over 200 keys (several
    pages): the view stays on page 1 with its top row selected; once the
    user pages down, it stays on that page."""
    load = subprocess.Popen([MCLOAD, "-s", "127.0.0.1:%d" % memcached.port, "-k", "200",
                             "-c", "2", "-R", "4000", "-d", "120", "--key-prefix", "k:"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    ui = screen_for(memcached, "-r", 200, 0.3)
    try:
        ui.wait(lambda t: re.search(r"page 1/[2-9]", t), "several pages of keys")
        ui.keys("L")
        ui.wait(lambda t: status(t).startswith("sort LAT(us)"), "L")
        seen, tops = [], set()
        deadline = time.monotonic() + 60
        while len(tops) < 5:  # five refreshes that changed the top row
            text = ui.text()
            if "MEMCACHED KEY" in text and status(text).startswith("sort LAT"):
                seen.append(re.search(r"page (\d+)/", status(text)).group(1))
                top = first_row(text)
                assert top.startswith(">"), text  # the top row stays selected
                tops.add(top.split()[1])
            assert time.monotonic() < deadline, (seen, tops)
            time.sleep(0.05)  # the poll's pace, not a synchronisation
        assert set(seen) == {"1"}, seen
        ui.keys("d")  # the user moves: a page down
        ui.wait(lambda t: "| page 2/" in status(t), "page 2")
        seen, tops = [], set()
        while len(tops) < 3:
            text = ui.text()
            if "MEMCACHED KEY" in text:
                seen.append(re.search(r"page (\d+)/", status(text)).group(1))
                tops.add(first_row(text)[2:].split()[0])
            assert time.monotonic() < deadline, (seen, tops)
            time.sleep(0.05)  # the poll's pace, not a synchronisation
        assert set(seen) == {"2"}, seen
    finally:
        ui.close()
        load.kill()
        load.wait()


def test_ui_never_cuts_the_sort_column(memcached):
    ui = screen_for(memcached, 0.2)
    try:
        ui.wait_for("keys tracked")
        send_keys(memcached)
        ui.tmux("resize-window", "-t", "ui", "-x", "60", "-y", "30")
        for key, name in (("L", "LAT(us)"), ("B", "BW(kbps)"), ("C", "CALLS")):
            ui.keys(key)
            text = ui.wait(lambda t: "MEMCACHED KEY" in t and status(t).startswith("sort " + name),
                           name)
            header = next(line for line in text.splitlines() if "MEMCACHED KEY" in line)
            assert name in header and len(header.rstrip()) <= 60, header
    finally:
        ui.close()
