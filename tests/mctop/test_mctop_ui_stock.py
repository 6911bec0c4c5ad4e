# SPDX-License-Identifier: MIT
"""mctop's full-screen table on Debian's own memcached (the watch stream,
no latency) and on narrow terminals, through tmux: H says there is no
latency rather than showing an empty box, L orders a column of `-` by
calls, the footer keeps `Q quit` at 110 columns and W's confirmation is
whole at 120."""
import os
import shutil

import pytest

from test_mctop_ui import BY_CALLS, MCTOP, Screen, _mc, keys_shown, run_script, shows, status

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

stock = _mc.stock  # the fixture: Debian's memcached


@pytest.fixture
def stock_ui(stock, tmp_path):
    out = str(tmp_path / "table.json")
    screen = Screen("%s -p %d -o %s --cumulative 0.2" % (MCTOP, stock.pid, out))
    try:
        screen.wait_for("source: memcached watch")
        _mc.wait_log_watchers(stock, 1)  # counting from here
        client = run_script(stock)
        screen.wait(shows(BY_CALLS), "the scripted keys by calls")
        screen.out = out
        yield screen
        client.close()
    finally:
        screen.close()


def test_l_on_no_latency_sorts_by_calls_and_h_says_why(stock_ui):
    ui = stock_ui
    ui.keys("L")
    text = ui.wait(lambda t: status(t).startswith("sort LAT(us)"), "L")
    assert keys_shown(text) == BY_CALLS, text
    ui.keys("T")  # flipped: the ties' order flips with it
    text = ui.wait(lambda t: "ascending" in status(t), "T")
    assert keys_shown(text) == BY_CALLS[::-1], text
    ui.keys("H")
    text = ui.wait_for("latency histogram of")
    assert "no latency: memcached's watch stream has none" in text, text


def last_line(text):
    return text.rstrip("\n").splitlines()[-1]


def test_narrow_footer_keeps_quit_and_w_message_whole(stock_ui):
    ui = stock_ui
    ui.tmux("resize-window", "-t", "ui", "-x", "110", "-y", "40")
    # tmux cuts the old screen to 110 columns at once; mctop's redraw at
    # 110 ends the help with Q quit (the 118-column one would lose it).
    ui.wait(lambda t: last_line(t).rstrip().endswith("Q quit"), "the footer at 110 columns")
    ui.tmux("resize-window", "-t", "ui", "-x", "120", "-y", "40")
    ui.wait(lambda t: last_line(t).rstrip().endswith("Q quit"), "the footer at 120 columns")
    ui.keys("W")
    text = ui.wait_for("(5 keys)")
    assert "wrote %s (5 keys)" % ui.out in text, text
    assert os.path.exists(ui.out)
    ui.tmux("resize-window", "-t", "ui", "-x", "60", "-y", "40")
    ui.keys("j")  # any key: the help comes back, as wide as 60 columns allow
    text = ui.wait(lambda t: "(5 keys)" not in t and any(
        line.startswith("> warm") for line in t.splitlines()), "j at 60 columns")
    assert last_line(text).rstrip().endswith("Q quit"), text
