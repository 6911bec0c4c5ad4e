#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What mctop's fallback on a stock memcached costs, and what it loses.

On Debian's own memcached (/usr/bin/memcached, no probe sites) mctop reads
memcached's `watch fetchers mutations` stream: every worker thread then
writes a log entry per item fetch and store, and memcached's logger thread
formats each as a text line and sends it to mctop.

Cost at saturation: one memcached (-t 1, CPU 1) under one continuous mcload
load (closed loop, one thread, 32 connections, Zipf(0.99) over 100,000 keys,
9 gets to 1 set; mcload and mctop on CPU 0), as bench/mctop_bench.py does
for the probes.  Windows alternate between no watcher (A) and `mctop -p PID
--json 1` running (B) in ABBA order, so drift cancels in each pair; mctop is
started before each B window (after its first line: the watch is on) and
stopped after it.  Per window: operations (memcached's cmd_get + cmd_set)
per second and memcached's CPU time per operation (all its threads, the
logger's included).  Reported: the median paired difference with a
bootstrap 95% interval (bench/memcached_paired.py's helpers).  Also, from
each B window's last frame, the share of commands mctop lost (memcached's
skipped lines and its workers' dropped entries) at saturation.

Falling behind: mctop stopped (SIGSTOP) for STALL seconds under the same
load, then continued: the commands lost over its run, as mctop reports
them, and whether the accounting holds (seen + lost = commands memcached
served while watched, within the commands of the two looks' edges).

Prints a table and writes the "mctop_watch" section of bench/results.json.
Stdlib only.  Noisy on a shared 2-vCPU machine: quote medians.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import memcached as mcb  # noqa: E402  (spawn, Stats, PIN_*, teardown)
import memcached_paired as mcp  # noqa: E402  (cpu_ns, bootstrap_ci)

STOCK = "/usr/bin/memcached"
CONNECTIONS = 32
KEYS = 100000


class Watch:
    """mctop --json on pid, running; its frames read as they come."""

    def __init__(self, build_dir, pid):
        self.proc = subprocess.Popen([*mcb.PIN_CLIENT, os.path.join(build_dir, "mctop"), "-p",
                                      str(pid), "--json", "-r", "20", "1"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self.last = json.loads(self.proc.stdout.readline())  # the watch is on
        assert self.last["source"] == "memcached watch", self.last

    def stop(self):
        """SIGINT; the last frame it printed."""
        self.proc.send_signal(signal.SIGINT)
        for line in self.proc.stdout:
            self.last = json.loads(line)
        self.proc.wait()
        return self.last


def window(stats, pid, seconds):
    ops0, cpu0, t0 = stats.ops(), mcp.cpu_ns(pid), time.monotonic()
    time.sleep(seconds)  # a measurement window, not a synchronisation
    ops1, cpu1, t1 = stats.ops(), mcp.cpu_ns(pid), time.monotonic()
    return ((ops1 - ops0) / (t1 - t0), (cpu1 - cpu0) / max(1, ops1 - ops0),
            (cpu1 - cpu0) / 1e9 / (t1 - t0))


def lost_share(frame):
    seen = frame["total"] + frame["lost"]
    return frame["lost"] / seen if seen else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--window", type=float, default=3.0)
    ap.add_argument("--stall", type=float, default=2.0)
    ap.add_argument("--pipeline", type=int, default=1,
                    help="mcload -P: requests in flight per connection (more: nearer saturation "
                         "on a busy machine)")
    a = ap.parse_args()
    if not os.path.exists(STOCK):
        sys.exit("bench: Debian's memcached (%s) is not installed" % STOCK)
    tmp = tempfile.mkdtemp(prefix="mctop-watch-bench.")
    port = mcb.free_port()
    mc = mcb.spawn(STOCK, port, threads=1)
    mcb.wait_listening(mc, port)
    load = subprocess.Popen([*mcb.PIN_CLIENT, os.path.join(a.build, "mcload"), "-s",
                             "127.0.0.1:%d" % port, "-c", str(CONNECTIONS), "-T", "1", "-z",
                             "0.99", "-k", str(KEYS), "-P", str(a.pipeline), "-d", "100000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        stats = mcb.Stats(port)
        window(stats, mc.pid, a.window)  # warm-up: the keys get set
        ops, cpu, busy = {"A": [], "B": []}, {"A": [], "B": []}, {"A": [], "B": []}
        lost = []
        for p in range(a.pairs):
            for w in ("AB" if p % 2 == 0 else "BA"):
                watch = Watch(a.build, mc.pid) if w == "B" else None
                o, c, u = window(stats, mc.pid, a.window)
                if watch:
                    lost.append(lost_share(watch.stop()))
                ops[w].append(o)
                cpu[w].append(c)
                busy[w].append(u)
        d_ops = [(b - x) / x * 100 for x, b in zip(ops["A"], ops["B"])]
        d_cpu = [(b - x) / x * 100 for x, b in zip(cpu["A"], cpu["B"])]
        # Falling behind: a watcher that stops reading.
        f0 = stats.fields()
        watch = Watch(a.build, mc.pid)
        time.sleep(a.window / 2)  # load while watched, before the stall
        watch.proc.send_signal(signal.SIGSTOP)
        time.sleep(a.stall)  # the stall being measured
        watch.proc.send_signal(signal.SIGCONT)
        time.sleep(a.window)  # catching up, then a look after it
        stalled = watch.stop()
        f1 = stats.fields()
    finally:
        mcb.teardown(load, mc, tmp)
    served = (int(f1["cmd_get"]) + int(f1["cmd_set"])) - (int(f0["cmd_get"]) + int(f0["cmd_set"]))
    res = {
        "pairs": a.pairs, "window_s": a.window, "connections": CONNECTIONS, "keys": KEYS,
        "pipeline": a.pipeline,
        "ops_per_s_unwatched_median": statistics.median(ops["A"]),
        "ops_per_s_watched_median": statistics.median(ops["B"]),
        "cpu_ns_per_op_unwatched_median": statistics.median(cpu["A"]),
        "cpu_ns_per_op_watched_median": statistics.median(cpu["B"]),
        "cores_busy_unwatched_median": statistics.median(busy["A"]),
        "cores_busy_watched_median": statistics.median(busy["B"]),
        "throughput_change_pct_median": statistics.median(d_ops),
        "throughput_change_pct_ci95": mcp.bootstrap_ci(d_ops),
        "cpu_per_op_change_pct_median": statistics.median(d_cpu),
        "cpu_per_op_change_pct_ci95": mcp.bootstrap_ci(d_cpu),
        "lost_share_at_saturation_median": statistics.median(lost),
        "lost_share_at_saturation_max": max(lost),
        "stall_s": a.stall,
        "stall_seen": stalled["total"], "stall_lost": stalled["lost"],
        "stall_served_while_watched": served,
        "stall_lost_share": lost_share(stalled),
    }
    print("mctop's watch fallback on %s, -t 1, mcload -c %d -P %d Zipf(0.99) closed loop, "
          "%d ABBA pairs of %.0f s windows (noisy: medians)" % (STOCK, CONNECTIONS, a.pipeline,
                                                                a.pairs, a.window))
    print("  ops/s unwatched %.0f, watched %.0f" % (res["ops_per_s_unwatched_median"],
                                                    res["ops_per_s_watched_median"]))
    print("  memcached CPU (cores busy) unwatched %.2f, watched %.2f; ns per op %.0f, %.0f"
          % (res["cores_busy_unwatched_median"], res["cores_busy_watched_median"],
             res["cpu_ns_per_op_unwatched_median"], res["cpu_ns_per_op_watched_median"]))
    print("  throughput change %+.1f%% (95%% CI %+.1f .. %+.1f)" %
          (res["throughput_change_pct_median"], *res["throughput_change_pct_ci95"]))
    print("  memcached CPU per op change %+.1f%% (95%% CI %+.1f .. %+.1f)" %
          (res["cpu_per_op_change_pct_median"], *res["cpu_per_op_change_pct_ci95"]))
    print("  lost at saturation: median %.3f%%, max %.3f%% of commands" %
          (100 * res["lost_share_at_saturation_median"],
           100 * res["lost_share_at_saturation_max"]))
    print("  stalled %.0f s: seen %d, lost %d (%.1f%%); memcached served %d while watched" %
          (a.stall, stalled["total"], stalled["lost"], 100 * res["stall_lost_share"], served))
    path = os.path.join(HERE, "results.json")
    try:
        with open(path) as f:
            results = json.load(f)
    except (OSError, ValueError):
        results = {}
    results["mctop_watch"] = res
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
