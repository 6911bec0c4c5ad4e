# SPDX-License-Identifier: MIT
"""mclat on Debian's own memcached (/usr/bin/memcached, no probe sites):
the kernel stages need no probes, so it measures rx, tcpip_rx,
epoll, wait, read and total, names the stages it cannot (memcached and tx
need the module's end of each batch), injects nothing, and counts every
read batch of a known load.  Without BPF it has nothing to measure and
says so."""
import json
import subprocess

from test_mclat import (DEADLINE, KERNEL_STAGES, MCLAT, MCLOAD, Mclat, _mc, in_a_window, mcload,
                         parse_json)

stock = _mc.stock  # the fixture: Debian's memcached


def test_kernel_stages_on_stock_memcached(stock):
    m = Mclat(stock, "--json", "--all", 0.2)  # every request: the count is exact
    said = "\n".join(m.errors)
    assert "no probe sites" in said and "memcached and tx need its probe sites" in said
    assert "total here runs from rx to the reply's transmission" in said
    # One connection, one request at a time: one read batch per request.
    mcload(stock, "-c", "1", "-P", "1", "-n", "500", "-k", "10")
    lines = m.finish()
    intervals = [json.loads(line) for line in lines]
    assert all(set(i["stages"]) == set(KERNEL_STAGES + ["total"]) for i in intervals)
    got = sum(i["count"] + i["partial"] for i in intervals)
    assert got == 500, intervals
    busy = [i for i in intervals if i["count"]]
    assert busy
    for i in busy:
        # Per batch total = xmit - rx >= the read's end - rx = the sum of
        # the stages before it; so for their means too.
        parts = sum(i["stages"][s]["mean_us"] for s in KERNEL_STAGES)
        assert i["stages"]["total"]["mean_us"] + 0.01 >= parts, i
    with open("/proc/%d/maps" % stock.pid) as f:
        assert "libxprobes" not in f.read()


def test_without_bpf_nothing_to_measure(stock):
    r = subprocess.run([MCLAT, "-p", str(stock.pid), "--no-bpf", "1", "1"], capture_output=True,
                       text=True, timeout=DEADLINE, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("mclat: process %d has no probe sites" % stock.pid), r.stderr
    assert "nothing to measure" in r.stderr


# The sampled means may differ from --all's by what a 50 ms window sees
# of a loaded machine's queueing (a few times --all's mean at most), not
# by the ~1 s between two windows: one batch carrying that in a thousand
# adds ~1,000 us to a mean.  So: at most 3 times --all's mean plus 500 us.
MEAN_FACTOR, MEAN_SLACK_US = 3, 500


def pooled_mean(intervals, stage):
    n = sum(i["stages"][stage]["count"] for i in intervals)
    s = sum(i["stages"][stage]["count"] * i["stages"][stage]["mean_us"]
            for i in intervals if i["stages"][stage]["count"])
    return s / n if n else None


def test_sampled_on_stock_memcached_agrees_with_all(stock):
    """The default (sampled) mode on Debian's memcached beside --all at the
    same moment, under a steady load: no measured batch lies outside a
    window (a socket's rx/ready boundaries left over from the detaching
    after a window's close once made a batch in the next window whose epoll
    stage was the whole gap between windows), and the means agree within
    the bound above."""
    load = subprocess.Popen([MCLOAD, "-s", "127.0.0.1:%d" % stock.port, "-R", "4000", "-c", "4",
                             "-d", str(DEADLINE)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        full = Mclat(stock, "--json", "--all", 1)
        sampled = Mclat(stock, "--json", "--batches", 1)
        seen = []
        sampled.wait_line(lambda l: '"interval_s"' in l and len(seen.append(l) or seen) >= 6,
                          "six intervals")
        windows = []
        s_iv, batches = parse_json(sampled.finish(), windows)
        f_iv, _ = parse_json(full.finish())
    finally:
        load.kill()
        load.wait()
    s_iv, f_iv = s_iv[1:], f_iv[1:]  # the first of each began before the load settled
    assert windows and batches
    outside = [b for b in batches if not in_a_window(b, windows)]
    assert outside == [], (len(outside), len(batches), outside[:5], windows)
    assert sum(i["count"] for i in s_iv) > 0, s_iv
    for stage in KERNEL_STAGES + ["total"]:
        got, ref = pooled_mean(s_iv, stage), pooled_mean(f_iv, stage)
        assert got is not None and ref is not None, (stage, s_iv, f_iv)
        assert got <= MEAN_FACTOR * ref + MEAN_SLACK_US, (stage, got, ref)
