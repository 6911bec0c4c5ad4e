#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import memcached as mcb  # noqa: E402  (shares build and process helpers)


def cpu_ns(pid, comm=None):
    """Total run time of every thread of pid, or of those named COMM, in ns
    (/proc/PID/task/*/schedstat)."""
    total = 0
    for task in glob.glob("/proc/%d/task/*" % pid):
        try:
            if comm is not None:
                with open(task + "/comm") as f:
                    if f.read().strip() != comm:
                        continue
            with open(task + "/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that exited between glob and open
    return total


def bootstrap_ci(values, n=2000, seed=1):
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


class XprobesToggle:
    """Window B: bench/mod_mc_hits.so enabled (loaded once, disabled in A)."""
    label = "xprobes module"
    variant = "xprobes"
    module = ("bench", "mod_mc_hits.so")

    def __init__(self, build_dir, pid, control):
        self.build_dir, self.pid, self.control = build_dir, pid, control
        self.name = self.module[-1]
        mcb.xp(build_dir, pid, "load", os.path.join(build_dir, *self.module))
        mcb.xp(build_dir, pid, "disable", self.name)

    def set(self, attached):
        on = attached and not self.control
        mcb.xp(self.build_dir, self.pid, "enable" if on else "disable", self.name)

    def close(self):
        t = dict(line.split() for line in mcb.xp(self.build_dir, self.pid, "command",
                                                 self.name).splitlines())
        return int(t["get"]) + int(t["set"])


class MctopToggle(XprobesToggle):
    """Window B: modules/mctop.so (hot-key tables) enabled."""
    label = "mctop module"
    module = ("modules", "mctop.so")

    def close(self):
        out = mcb.xp(self.build_dir, self.pid, "command", self.name, "top", "0", "json")
        return int(json.loads(out)["total"])


class BpftraceToggle:
    """Window B: bpftrace counting the same two probes through USDT (the
    systemtap-stub build); it is started before and stopped after each B
    window, outside the measured interval."""
    label = "bpftrace"
    variant = "stap"

    def __init__(self, build_dir, pid, control):
        self.pid, self.control, self.proc, self.hits = pid, control, None, 0

    def set(self, attached):
        if self.proc:
            mcb.interrupt_bpftrace(self.proc)
            self.out.seek(0)
            self.hits += sum(int(l.split(b": ")[1]) for l in self.out if l.startswith(b"@"))
            self.out.close()
            self.proc = None
        if attached and not self.control:
            # Output to a file, read back after exit: a pipe left half-read
            # between windows once stalled bpftrace's exit.
            self.out = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(
                [*mcb.PIN_CLIENT, "bpftrace", "-p", str(self.pid), "-e",
                 'usdt:*:memcached:command__get { @g = count(); } '
                 'usdt:*:memcached:command__set { @s = count(); } '
                 'BEGIN { printf("armed\\n"); }'],
                stdout=self.out, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while True:  # until the probes are attached
                self.out.seek(0)
                if b"armed" in self.out.read():
                    break
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    sys.exit("bench/memcached_paired.py: bpftrace did not attach")
                time.sleep(0.02)

    def close(self):
        self.set(False)
        return self.hits


def measure(toggle_cls, build_dir, pairs, window, control):
    """ABBA windows on one memcached under one continuous memaslap load."""
    binary = mcb.build(toggle_cls.variant, build_dir)
    port = mcb.free_port()
    mc = mcb.spawn(binary, port, build_dir if toggle_cls.variant == "xprobes" else None)
    load = toggle = None
    try:
        mcb.wait_listening(mc, port)
        toggle = toggle_cls(build_dir, mc.pid, control)
        total = int(pairs * 2 * (window + 3) + 60)  # bpftrace start-up counts too
        load = subprocess.Popen(mcb.memaslap_argv(port, total),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stats = mcb.Stats(port)
        # Wait until the load generator is really running before the first window.
        while stats.ops() < 10000:
            if load.poll() is not None:
                sys.exit("bench/memcached_paired.py: memaslap exited early")
            time.sleep(0.05)
        state = {False: [], True: []}  # attached? -> [(ops/s, cpu ns/op)]
        print("%s: memcached -t 1 (%s build), memaslap -T 1 -c 32 running throughout; "
              "%d ABBA pairs of %.1f s windows" % (toggle.label, toggle_cls.variant, pairs, window))
        for p in range(pairs):
            order = (False, True) if p % 2 == 0 else (True, False)
            for attached in order:
                toggle.set(attached)
                ops0, cpu0, t0 = stats.ops(), cpu_ns(mc.pid), time.monotonic()
                time.sleep(window)  # the measurement window itself, not synchronisation
                ops1, cpu1, t1 = stats.ops(), cpu_ns(mc.pid), time.monotonic()
                ops = ops1 - ops0
                state[attached].append((ops / (t1 - t0), (cpu1 - cpu0) / ops))
            print("  pair %2d: detached %7.0f ops/s %6.0f ns/op   attached %7.0f ops/s %6.0f ns/op"
                  % (p + 1, *state[False][-1], *state[True][-1]), flush=True)
        hits = toggle.close()
        toggle = None
    finally:
        if toggle and isinstance(toggle, BpftraceToggle) and toggle.proc:
            toggle.proc.kill()
            toggle.proc.wait()
        mcb.teardown(load, mc)

    tput = [(att[0] - det[0]) / det[0] * 100 for det, att in zip(state[False], state[True])]
    cpu = [(att[1] - det[1]) / det[1] * 100 for det, att in zip(state[False], state[True])]
    res = {"pairs": pairs, "window_s": window, "build": toggle_cls.variant,
           "detached_ops_s": statistics.median(x[0] for x in state[False]),
           "attached_ops_s": statistics.median(x[0] for x in state[True]),
           "detached_cpu_ns_per_op": statistics.median(x[1] for x in state[False]),
           "attached_cpu_ns_per_op": statistics.median(x[1] for x in state[True]),
           "throughput_change_pct": statistics.median(tput),
           "throughput_change_ci95": bootstrap_ci(tput),
           "cpu_per_op_change_pct": statistics.median(cpu),
           "cpu_per_op_change_ci95": bootstrap_ci(cpu),
           "paired_throughput_pct": tput, "paired_cpu_pct": cpu,
           "probe_hits_counted": hits}
    print("check: %s counted %d GET/SET hits while attached\n" % (toggle_cls.label, hits))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(mcb.ROOT, "build"))
    ap.add_argument("--pairs", type=int, default=40, help="ABBA pairs for the xprobes module")
    ap.add_argument("--mctop-pairs", type=int, default=0,
                    help="ABBA pairs for modules/mctop.so (0: skip)")
    ap.add_argument("--bpftrace-pairs", type=int, default=12,
                    help="ABBA pairs for bpftrace (0: skip); each attach takes seconds")
    ap.add_argument("--window", type=float, default=1.0, help="seconds per window")
    ap.add_argument("--control", action="store_true",
                    help="A/A check: keep the tracer detached in both windows")
    ap.add_argument("--out", default=os.path.join(mcb.ROOT, "bench", "results.json"))
    a = ap.parse_args()
    build_dir = os.path.abspath(a.build)
    if mcb.PIN_CLIENT:
        # This script, the stats reads, every `xprobes` call and bpftrace stay
        # off the server's CPU: an unpinned toggle would steal the time measured.
        os.sched_setaffinity(0, {0})
    results_now = {}
    if a.pairs > 0:
        results_now["xprobes"] = measure(XprobesToggle, build_dir, a.pairs, a.window, a.control)
    if a.mctop_pairs > 0:
        results_now["mctop"] = measure(MctopToggle, build_dir, a.mctop_pairs, a.window, a.control)
    skipped = None
    if a.bpftrace_pairs <= 0:
        skipped = "--bpftrace-pairs 0"
    elif shutil.which("bpftrace") is None or os.geteuid() != 0:
        skipped = "bpftrace needs root and the bpftrace package"
    else:
        results_now["bpftrace"] = measure(BpftraceToggle, build_dir, a.bpftrace_pairs, a.window,
                                          a.control)

    print("attached vs detached in the same process, median of paired differences "
          "[bootstrap 95% interval]:")
    print("%-16s %6s %24s %24s %14s" % ("tracer", "pairs", "throughput", "CPU per op",
                                        "CPU ns/op added"))
    for name, r in results_now.items():
        print("%-16s %6d %+8.2f%% [%+.2f, %+.2f] %+8.2f%% [%+.2f, %+.2f] %+14.0f" % (
            name, r["pairs"], r["throughput_change_pct"], *r["throughput_change_ci95"],
            r["cpu_per_op_change_pct"], *r["cpu_per_op_change_ci95"],
            r["attached_cpu_ns_per_op"] - r["detached_cpu_ns_per_op"]))
    if skipped:
        print("%-16s skipped: %s" % ("bpftrace", skipped))
    try:
        with open(a.out) as f:
            results = json.load(f)
    except (OSError, ValueError):
        results = {}
    results["memcached_paired"] = dict(results_now, bpftrace_skipped=skipped)
    with open(a.out, "w") as f:
        json.dump(results, f, indent=2)
    print("results in %s" % os.path.relpath(a.out, mcb.ROOT))


if __name__ == "__main__":
    main()
