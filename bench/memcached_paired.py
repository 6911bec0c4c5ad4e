#!/usr/bin/env python3
"""The cost of attaching, measured inside one memcached process.

bench/memcached.py compares fresh processes, and on a 2-vCPU VM two fresh
memcached processes differ by tens of percent for reasons that have nothing
to do with probes (memory layout, which vCPU the hypervisor is stealing
from).  That noise is far larger than the effect the goal is about (attached
costs at most 1%), so here the comparison is made where nothing else
changes: one `memcached -t 1` (the xprobes build, agent preloaded) under one
continuous memaslap load, bench/mod_mc_hits.so loaded once, and the module
switched between disabled (every site detached) and enabled (counting
command__get and command__set) for alternating windows in ABBA order.

For each window: operations completed (memcached's own cmd_get + cmd_set
counters, read over a separate connection) and memcached's CPU time (the sum
of its threads' schedstat run time, in ns).  Each pair of adjacent windows
gives one paired difference, so drift in the machine's speed cancels.
Reports the median paired difference in throughput and in CPU time per
operation, with a bootstrap 95% interval, and adds a "memcached_paired"
section to bench/results.json.  Stdlib only.
"""
import argparse
import glob
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import memcached as mcb  # noqa: E402  (shares build and process helpers)


def cpu_ns(pid):
    """Total run time of every thread of pid, in ns (/proc/PID/task/*/schedstat)."""
    total = 0
    for path in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that exited between glob and open
    return total


class Stats:
    """A persistent text-protocol connection for `stats`."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""

    def ops(self):
        self.sock.sendall(b"stats\r\n")
        while not self.buf.endswith(b"END\r\n"):
            chunk = self.sock.recv(65536)
            if not chunk:
                sys.exit("bench/memcached_paired.py: memcached closed the stats connection")
            self.buf += chunk
        fields = {}
        for line in self.buf.decode().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "STAT":
                fields[parts[1]] = parts[2]
        self.buf = b""
        return int(fields["cmd_get"]) + int(fields["cmd_set"])


def bootstrap_ci(values, n=2000, seed=1):
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(mcb.ROOT, "build"))
    ap.add_argument("--pairs", type=int, default=60)
    ap.add_argument("--window", type=float, default=0.5, help="seconds per window")
    ap.add_argument("--control", action="store_true",
                    help="A/A check: keep the module disabled in both windows")
    ap.add_argument("--out", default=os.path.join(mcb.ROOT, "bench", "results.json"))
    a = ap.parse_args()
    build_dir = os.path.abspath(a.build)
    if mcb.PIN_CLIENT:
        # This script, the stats reads and every `xprobes` call stay off the
        # server's CPU: an unpinned toggle would steal the very time measured.
        os.sched_setaffinity(0, {0})
    binary = mcb.build("xprobes", build_dir)
    module = os.path.join(build_dir, "bench", "mod_mc_hits.so")

    port = mcb.free_port()
    env = dict(os.environ, LD_PRELOAD=os.path.join(build_dir, "libxprobes.so"))
    mc = subprocess.Popen([*mcb.PIN_SERVER, binary, "-u", "root", "-l", "127.0.0.1", "-p", str(port),
                           "-U", "0", "-t", "1"], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    load = None
    try:
        mcb.wait_listening(mc, port)
        mcb.xp(build_dir, mc.pid, "load", module)
        mcb.xp(build_dir, mc.pid, "disable", "mod_mc_hits.so")
        total = int(a.pairs * 2 * a.window + 60)
        load = subprocess.Popen([*mcb.PIN_CLIENT, "memcaslap", "-s", "127.0.0.1:%d" % port, "-T", "1",
                                 "-c", "32", "-t", "%ds" % total],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stats = Stats(port)
        # Wait until the load generator is really running before the first window.
        while stats.ops() < 10000:
            if load.poll() is not None:
                sys.exit("bench/memcached_paired.py: memaslap exited early")
            time.sleep(0.05)
        state = {False: [], True: []}  # attached? -> [(ops/s, cpu ns/op)]
        hits0 = None
        print("memcached -t 1 (xprobes build), memaslap -T 1 -c 32 running throughout; "
              "%d ABBA pairs of %.1f s windows" % (a.pairs, a.window))
        for p in range(a.pairs):
            order = (False, True) if p % 2 == 0 else (True, False)
            for attached in order:
                mcb.xp(build_dir, mc.pid, "enable" if attached and not a.control else "disable", "mod_mc_hits.so")
                ops0, cpu0, t0 = stats.ops(), cpu_ns(mc.pid), time.monotonic()
                time.sleep(a.window)  # the measurement window itself, not synchronisation
                ops1, cpu1, t1 = stats.ops(), cpu_ns(mc.pid), time.monotonic()
                ops = ops1 - ops0
                state[attached].append((ops / (t1 - t0), (cpu1 - cpu0) / ops))
            print("  pair %2d: detached %7.0f ops/s %6.0f ns/op   attached %7.0f ops/s %6.0f ns/op"
                  % (p + 1, *state[False][-1], *state[True][-1]), flush=True)
        t = dict(line.split() for line in mcb.xp(build_dir, mc.pid, "command", "mod_mc_hits.so").splitlines())
        hits0 = int(t["get"]) + int(t["set"])
    finally:
        if load:
            load.kill()
            load.wait()
        mc.kill()
        mc.wait()

    tput = [(att[0] - det[0]) / det[0] * 100 for det, att in zip(state[False], state[True])]
    cpu = [(att[1] - det[1]) / det[1] * 100 for det, att in zip(state[False], state[True])]
    res = {"pairs": a.pairs, "window_s": a.window,
           "detached_ops_s": statistics.median(x[0] for x in state[False]),
           "attached_ops_s": statistics.median(x[0] for x in state[True]),
           "detached_cpu_ns_per_op": statistics.median(x[1] for x in state[False]),
           "attached_cpu_ns_per_op": statistics.median(x[1] for x in state[True]),
           "throughput_change_pct": statistics.median(tput),
           "throughput_change_ci95": bootstrap_ci(tput),
           "cpu_per_op_change_pct": statistics.median(cpu),
           "cpu_per_op_change_ci95": bootstrap_ci(cpu),
           "paired_throughput_pct": tput, "paired_cpu_pct": cpu,
           "probe_hits_counted": hits0}
    print("\nattached vs detached, median of %d paired differences [bootstrap 95%% interval]:" % a.pairs)
    print("  throughput      %+6.2f%%  [%+.2f%%, %+.2f%%]" % (res["throughput_change_pct"],
                                                           *res["throughput_change_ci95"]))
    print("  CPU per op      %+6.2f%%  [%+.2f%%, %+.2f%%]" % (res["cpu_per_op_change_pct"],
                                                           *res["cpu_per_op_change_ci95"]))
    print("  medians: detached %.0f ops/s, %.0f ns CPU/op; attached %.0f ops/s, %.0f ns CPU/op"
          % (res["detached_ops_s"], res["detached_cpu_ns_per_op"], res["attached_ops_s"],
             res["attached_cpu_ns_per_op"]))
    print("check: the module counted %d GET/SET hits while enabled" % hits0)
    try:
        with open(a.out) as f:
            results = json.load(f)
    except (OSError, ValueError):
        results = {}
    results["memcached_paired"] = res
    with open(a.out, "w") as f:
        json.dump(results, f, indent=2)
    print("results in %s" % os.path.relpath(a.out, mcb.ROOT))


if __name__ == "__main__":
    main()
