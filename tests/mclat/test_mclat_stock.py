"""mclat on Debian's own memcached (/usr/bin/memcached, no probe sites;
issue 29): the kernel stages need no probes, so it measures rx, tcpip_rx,
epoll, wait, read and total, names the stages it cannot (memcached and tx
need the module's end of each batch), injects nothing, and counts every
read batch of a known load.  Without BPF it has nothing to measure and
says so."""
import json
import subprocess

from test_mclat import DEADLINE, KERNEL_STAGES, MCLAT, Mclat, _mc, mcload

stock = _mc.stock  # the fixture: Debian's memcached


def test_kernel_stages_on_stock_memcached(stock):
    m = Mclat(stock, "--json", "--all", 0.2)  # every request: the count is exact
    said = "\n".join(m.errors)
    assert "no probe sites" in said and "memcached and tx need its probe sites" in said
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
