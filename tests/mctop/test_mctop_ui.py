# SPDX-License-Identifier: MIT
"""mctop's full-screen table driven in tmux against the real
memcached build: a scripted client gives five keys known, distinct counts,
sizes and first-seen order, so every order the keys can sort the table in
is exact; then send-keys and capture-pane check the sort keys, T, the
selection, the H and I panels, W, resize, and every way out (Q, Ctrl-C,
SIGTERM, memcached dying) leaving the terminal restored."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
MCTOP = os.path.join(BUILD, "mctop")

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


sys.path.insert(0, os.path.join(ROOT, "tests", "memcached"))
import mcserver as _mc  # noqa: E402  (the real memcached, tests/memcached/mcserver.py)
memcached_bin = _mc.memcached_bin  # the fixture that builds it (cached)

# key: (value size, gets after its one set); the set and the gets are its calls.
# "absent" is never set: 3 gets that miss.  Touched in this order, so
# "newest first" is the reverse of it.
SCRIPT = [("hot", 10, 49), ("warm", 300, 19), ("cool", 20, 7), ("absent", None, 3),
          ("cold", 5000, 1)]
CALLS = {k: (0 if size is None else 1) + gets for k, size, gets in SCRIPT}
BY_CALLS = sorted(CALLS, key=lambda k: -CALLS[k])          # hot warm cool absent cold
BY_SIZE = ["cold", "warm", "cool", "hot", "absent"]         # 5000 300 20 10 none
NEWEST_FIRST = [k for k, _, _ in reversed(SCRIPT)]

def run_script(mc):
    s = mc.client()
    for key, size, gets in SCRIPT:
        if size is not None:
            s.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (key.encode(), size, b"v" * size))
            _mc.recv_until(s, b"STORED\r\n")
        for _ in range(gets):
            s.sendall(b"get %s\r\n" % key.encode())
            _mc.recv_until(s, b"END\r\n")
    return s


class Screen:
    """One tmux server of our own (-S) with one 160x40 pane running CMD
    under sh; after CMD, 'DONE-<status>' and then cat, which keeps the pane
    open (reading the terminal) for the test to look at."""

    def __init__(self, cmd):
        # The server's socket in a short directory of our own (a socket
        # path has 108 bytes at most), removed with it.
        self.dir = tempfile.mkdtemp(prefix="mctop-ui-")
        self.sock = os.path.join(self.dir, "tmux")
        shell = "%s; echo DONE-$?; exec cat" % cmd
        self.tmux("new-session", "-d", "-s", "ui", "-x", "160", "-y", "40", shell)

    def tmux(self, *args):
        r = subprocess.run(["tmux", "-S", self.sock, "-f", "/dev/null", *args],
                           capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, (args, r.stderr)
        return r.stdout

    def text(self):
        return self.tmux("capture-pane", "-p", "-t", "ui")

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "ui", *keys)

    def wait(self, pred, what, timeout=60):
        """The screen once pred(screen) is true; polled, with a deadline
        that only catches a hang."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            if pred(text):
                return text
            assert time.monotonic() < deadline, "never saw %s:\n%s" % (what, text)
            time.sleep(0.05)  # the poll's pace, not a synchronisation

    def wait_for(self, needle, timeout=60):
        return self.wait(lambda t: needle in t, repr(needle), timeout)

    def program_pid(self):
        """The pid of the command sh runs in the pane (its one child)."""
        sh = int(self.tmux("display-message", "-p", "-t", "ui", "#{pane_pid}").strip())
        with open("/proc/%d/task/%d/children" % (sh, sh)) as f:
            return int(f.read().split()[0])

    def close(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True,
                       timeout=30, stdin=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


def table(text):
    """[(selected, key, calls)] of the rows on screen."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if "MEMCACHED KEY" in l) + 1
    rows = []
    for line in lines[start:]:
        if line.startswith("sort ") or not line.strip():
            break
        parts = line[2:].split()
        rows.append((line[0] == ">", parts[0], parts[1]))
    return rows


def keys_shown(text):
    return [k for _, k, _ in table(text)]


def status(text):
    """The footer's status line: 'sort NAME DIRECTION | page N/M | selected: KEY'."""
    return next(l for l in text.splitlines() if l.startswith("sort "))


def shows(order):
    return lambda t: "MEMCACHED KEY" in t and keys_shown(t)[:len(order)] == order


@pytest.fixture
def ui(memcached_bin, tmp_path):
    """memcached, mctop on it in tmux, then the script's traffic, once the
    table shows all of it (hottest first)."""
    mc = _mc.Memcached(memcached_bin, str(tmp_path))
    out = str(tmp_path / "table.json")
    # --cumulative: H's histogram since attach, not emptied by the next
    # interval (CALLS and the orders the tests check are the same either way).
    screen = Screen("%s -p %d -o %s --cumulative 0.2" % (MCTOP, mc.pid, out))
    try:
        screen.wait_for("keys tracked")  # attached: the module counts from here
        client = run_script(mc)
        screen.wait(shows(BY_CALLS), "the scripted keys by calls")
        screen.mc, screen.out, screen.client = mc, out, client
        yield screen
        client.close()
    finally:
        screen.close()
        mc.stop()


def test_hottest_first_with_exact_calls(ui):
    text = ui.text()
    rows = table(text)
    assert [(k, int(c)) for _, k, c in rows] == [(k, CALLS[k]) for k in BY_CALLS]
    assert rows[0][0], "the first row starts selected"
    assert "sort CALLS descending, highest first" in status(text)
    assert "page 1/1" in status(text) and "selected: hot" in status(text)


def test_sort_keys_and_t_flip(ui):
    # (key pressed, the rows then, the footer's label): T reverses the
    # rows exactly (the orders have no ties) and the label says so.
    steps = [("S", BY_SIZE, "OBJSIZE descending, highest first"),
             ("T", BY_SIZE[::-1], "OBJSIZE ascending, lowest first"),
             ("N", NEWEST_FIRST, "NEWEST newest first"),
             ("T", NEWEST_FIRST[::-1], "NEWEST oldest first"),
             ("L", None, "LAT(us) descending"), ("R", None, "REQ/S descending"),
             ("B", None, "BW(kbps) descending"),
             ("C", BY_CALLS, "CALLS descending, highest first"),
             ("T", BY_CALLS[::-1], "CALLS ascending, lowest first")]
    for key, order, label in steps:
        ui.keys(key)
        ui.wait(lambda t: status(t).startswith("sort " + label)
                and (order is None or keys_shown(t) == order), "%s: %s" % (key, label))


def test_selection_moves_and_follows_its_key(ui):
    ui.keys("j")
    ui.wait(lambda t: "selected: warm" in status(t), "j selecting the second row")
    ui.keys("j", "j")
    ui.wait(lambda t: "selected: absent" in status(t), "j j")
    ui.keys("k")
    text = ui.wait(lambda t: "selected: cool" in status(t), "k")
    assert [k for sel, k, _ in table(text) if sel] == ["cool"]
    ui.keys("G")
    ui.wait(lambda t: "selected: cold" in status(t), "G the last row")
    ui.keys("g")
    ui.wait(lambda t: "selected: hot" in status(t), "g the first row")
    ui.keys("Down")
    ui.wait(lambda t: "selected: warm" in status(t), "the down arrow")
    # 30 more gets make cool busier than warm: the next refresh reorders
    # the rows and the selection stays on warm, now third.
    for _ in range(30):
        ui.client.sendall(b"get cool\r\n")
        _mc.recv_until(ui.client, b"END\r\n")
    text = ui.wait(shows(["hot", "cool", "warm"]), "cool above warm")
    assert [k for sel, k, _ in table(text) if sel] == ["warm"]
    assert "selected: warm" in status(text)


def test_histogram_and_inspect_panels(ui):
    ui.keys("H")
    text = ui.wait_for("latency histogram of hot")
    assert "log2 ns buckets, since attach" in text
    # One bucket a line ("256ns - 512ns   12 |####"): every one of hot's
    # 50 requests is in one of them.
    buckets = re.findall(r"(\d+(?:\.\d)?(?:ns|us|ms|s)) +- +\S+ +(\d+) \|(#*)", text)
    assert sum(int(n) for _, n, _ in buckets) == CALLS["hot"], text
    assert all((int(n) > 0) == (bar != "") for _, n, bar in buckets), text
    ui.keys("x")  # any key closes it
    ui.wait(lambda t: "latency histogram" not in t, "the histogram closed")
    ui.keys("I")
    text = ui.wait_for("inspect hot")
    assert re.search(r"get hits +49 +get misses +0\b", text), text
    assert re.search(r"sets +1 +adds +0\b", text), text
    assert re.search(r"calls 50 +error bound 0\b", text), text
    assert "objsize 10 bytes" in text
    ui.keys("Escape")
    ui.wait(lambda t: "inspect hot" not in t, "the inspect panel closed")
    ui.keys("j", "j", "j", "I")  # the key no set ever stored
    text = ui.wait_for("inspect absent")
    assert re.search(r"get hits +0 +get misses +3\b", text), text
    assert "objsize none seen" in text


def test_w_writes_the_table_as_json(ui):
    ui.keys("W")
    ui.wait_for("wrote %s (5 keys)" % ui.out)
    with open(ui.out) as f:
        doc = json.load(f)
    assert [(k["key"], k["calls"]) for k in doc["keys"]] == [(k, CALLS[k]) for k in BY_CALLS]
    assert doc["keys"][0]["size_bytes"] == 10 and doc["keys"][0]["get_hits"] == 49


def test_z_resets_the_counts(ui):
    ui.keys("Z")
    text = ui.wait_for("(no keys yet)")
    assert "reset: counting from now" in text.rstrip("\n").splitlines()[-1]
    ui.client.sendall(b"get warm\r\n")
    _mc.recv_until(ui.client, b"END\r\n")
    text = ui.wait(shows(["warm"]), "warm alone after the reset")
    assert table(text) == [(True, "warm", "1")]


def assert_left_screen(ui, status_text):
    text = ui.wait_for(status_text)
    assert "MEMCACHED KEY" not in text, text
    assert ui.tmux("display-message", "-p", "-t", "ui", "#{alternate_on}").strip() == "0"
    return text


@pytest.mark.parametrize("how", ["Q", "q", "C-c", "C-\\", "SIGTERM", "SIGHUP"])
def test_every_way_out_restores_the_terminal(ui, how):
    assert ui.tmux("display-message", "-p", "-t", "ui", "#{alternate_on}").strip() == "1"
    if how.startswith("SIG"):
        os.kill(ui.program_pid(), getattr(signal, how))
    else:
        ui.keys(how)
    assert_left_screen(ui, "DONE-0")
    # And memcached serves on, its module let go of.
    ui.client.sendall(b"get hot\r\n")
    assert _mc.recv_until(ui.client, b"END\r\n").startswith(b"VALUE hot 0 10\r\n")


def test_memcached_exiting_ends_it_with_the_message_after_the_screen(ui):
    pid = ui.mc.pid
    ui.mc.stop()
    text = assert_left_screen(ui, "DONE-1")
    # What went wrong was held while the screen was ours, then printed on
    # the restored terminal, before the shell's next line.
    said = text.split("DONE-1")[0]
    assert re.search(r"\b%d\b" % pid, said), text


def test_resize_redraws_and_keeps_running(ui):
    ui.tmux("resize-window", "-t", "ui", "-x", "90", "-y", "9")
    # 9 lines: 4 rows a page, so the 5 keys take two; the footer moves up.
    text = ui.wait(lambda t: "page 1/2" in t, "the table redrawn for 90x9")
    lines = text.splitlines()
    assert lines[7].startswith("sort CALLS") and keys_shown(text) == BY_CALLS[:4], text
    ui.keys("G")
    text = ui.wait(lambda t: "page 2/2" in t and "selected: cold" in t, "G on the second page")
    assert keys_shown(text) == BY_CALLS[4:]
    ui.tmux("resize-window", "-t", "ui", "-x", "160", "-y", "40")
    text = ui.wait(lambda t: "page 1/1" in t, "40 lines again")
    assert keys_shown(text) == BY_CALLS and "selected: cold" in status(text)
    ui.keys("Q")
    assert_left_screen(ui, "DONE-0")


def test_without_o_w_writes_here_and_the_count_ends_it(memcached_bin, tmp_path):
    mc = _mc.Memcached(memcached_bin, str(tmp_path))
    # 40 frames of 0.1 s: time enough for W, then it ends by itself.
    screen = Screen("cd %s && %s -p %d 0.1 40" % (tmp_path, MCTOP, mc.pid))
    try:
        screen.wait_for("keys tracked")
        screen.keys("W")
        screen.wait_for("wrote mctop.json (0 keys) in the current directory")
        with open(tmp_path / "mctop.json") as f:
            assert json.load(f)["keys"] == []
        assert_left_screen(screen, "DONE-0")
    finally:
        screen.close()
        mc.stop()
