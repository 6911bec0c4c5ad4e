#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Side by side: builds of modules/mctop.so against each other, inside one
memcached, to measure what a change to the module costs per request.

    bench/mctop_variants.py [--rounds N] [--window S] [--rate OPS] A.so B.so ...

Why one memcached and not one per variant: the throughput of this shared
2-vCPU VM drifts by more than the few percent a change is worth, and
separate runs see different drifts.  Here every variant is loaded at once
(each a copy under its own name, so the agent takes it as another module),
all disabled; then, round after round, each in turn (and "none") is
enabled alone for a window, in an order drawn at random each round
(seeded: --seed), so that what a window leaves to the next (the caches, a
feed the drainer has yet to take) falls on every variant alike; a fixed
rotation put one variant after "none" two rounds in three.  memcached
runs `-t 1` on CPU 1, mcload Zipf(0.99) over 1M keys, 9 gets to 1 set,
32 connections on CPU 0 (bench/memcached.py's pinning, as in
bench/mctop_bench.py).

Per variant, the medians over rounds of:
  ops/s      memcached's cmd_get + cmd_set over the window
  paired     the window's ops/s against the round's "none" window
  cpu/op     memcached's threads' run time (schedstat) per operation
  +cpu/op    the window's cpu/op less the round's "none" window's: what
             the variant costs memcached per request, all told (its code,
             and what it does to memcached's caches)
  drainer/op the variant's own mctop-drain thread's run time per operation:
             the steadiest figure, since no other thread's time is in it
Then, for two variants or more, each against the first, round by round:
the median difference of their cpu/op with a bootstrap 95% interval.
With the order rotated instead of drawn, two copies of the same build
differed by -49 ns a request [-99, +1] over 100 rounds; drawn, by -16
[-69, +81] over 60 (docs/experiments.md, "Tried and not kept (2026-11-26,
fifth session)"): a difference under ~50 ns needs repeated runs.
--reload K loads every variant afresh (and warms it up again) every K
rounds, so that a run spans several placements of each in memory.

At saturation (the default) cpu/op is nearly 1/throughput and as noisy;
the drainer's figure is the one that resolves tens of ns.  --rate makes
mcload open-loop, so that cpu/op is the work done per request.  --perf
samples memcached with perf(1) during every window and adds, per
variant, the CPU per operation of its own code (its copy's samples),
split into the handlers (memcached's threads) and the drainer (drain_*
and ss_* functions): the handlers' cost, which no thread's run time
isolates.  Stdlib only."""
import argparse
import collections
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
import memcached as mcb  # noqa: E402  (build, spawn, Stats, xp, pinning)
import memcached_paired as mcp  # noqa: E402  (cpu_ns)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variants", nargs="+", help="mctop.so builds to compare")
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--window", type=float, default=2.0, help="seconds per window")
    ap.add_argument("--rate", type=int, help="open loop at this many requests/s")
    ap.add_argument("--perf", action="store_true", help="the module's own code per operation")
    ap.add_argument("--seed", type=int, default=1, help="for the windows' order (default 1)")
    ap.add_argument("--reload", type=int, default=0, metavar="K",
                    help="load every variant afresh every K rounds (default: never)")
    a = ap.parse_args()
    if a.reload < 0:
        ap.error("--reload wants a number of rounds")
    if a.perf and not shutil.which("perf"):
        sys.exit("bench/mctop_variants.py: --perf: no perf(1) here")
    for v in a.variants:
        if not os.path.isfile(v):
            sys.exit("bench/mctop_variants.py: %s: no such file" % v)
    binary = mcb.build("xprobes", a.build)
    port = mcb.free_port()
    mc = mcb.spawn(binary, port, a.build, threads=1, extra=("-m", "1024"))
    tmp = tempfile.mkdtemp(prefix="mctop_variants.")
    load = None
    try:
        mcb.wait_listening(mc, port)
        pid = mc.pid

        def tids():
            return set(os.listdir("/proc/%d/task" % pid))

        def run_ns(tid):
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                return int(f.read().split()[0])

        def comm(tid):
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                return f.read().strip()

        def load_all(gen):
            """Every variant loaded afresh (a new copy, so a new name), disabled."""
            got = []  # (label, module name, its drainer thread ids)
            for i, v in enumerate(a.variants):
                label = "%d:%s" % (i, os.path.basename(v))
                copy = os.path.join(tmp, "v%d_g%d_%s" % (i, gen, os.path.basename(v)))
                shutil.copy(v, copy)
                before = tids()
                mcb.xp(a.build, pid, "load", copy)
                mcb.xp(a.build, pid, "disable", os.path.basename(copy))
                drainers = [t for t in tids() - before if comm(t) == "mctop-drain"]
                got.append((label, os.path.basename(copy), drainers))
            return got

        def warm_up(variants):
            for _, name, _ in variants:  # each table fills (1M keys overflow it)
                mcb.xp(a.build, pid, "enable", name)
                time.sleep(4)  # a warm-up, not synchronisation
                mcb.xp(a.build, pid, "disable", name)

        variants = load_all(0)
        cmd = [*mcb.PIN_CLIENT, os.path.join(a.build, "mcload"), "-s", "127.0.0.1:%d" % port,
               "-T", "1", "-c", "32", "-z", "0.99", "-k", "1000000", "-r", "9:1", "-d", "86400"]
        if a.rate:
            cmd += ["-R", str(a.rate)]
        load = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        st = mcb.Stats(port)
        warm_up(variants)
        nothing = ("none", None, [])  # the window with every variant disabled
        rng = random.Random(a.seed)
        res = {label: {"ops": [], "cpu": [], "drain": [], "hand": [], "drainer": []}
               for label, _, _ in [nothing] + variants}
        data = os.path.join(tmp, "perf.data")
        for r in range(a.rounds):
            if a.reload and r and r % a.reload == 0:
                for _, name, _ in variants:
                    mcb.xp(a.build, pid, "unload", name)
                variants = load_all(r // a.reload)
                warm_up(variants)
            for label, name, drainers in rng.sample([nothing] + variants, len(variants) + 1):
                if name:
                    mcb.xp(a.build, pid, "enable", name)
                time.sleep(0.3)  # let the switch settle before the window
                o0, t0 = st.ops(), time.monotonic()
                c0 = mcp.cpu_ns(pid)
                d0 = sum(run_ns(t) for t in drainers)
                if a.perf:
                    subprocess.run(["perf", "record", "-q", "-F", str(PERF_HZ), "-o", data, "-p",
                                    str(pid), "--", "sleep", str(a.window)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
                else:
                    time.sleep(a.window)
                o1, t1 = st.ops(), time.monotonic()
                c1 = mcp.cpu_ns(pid)
                d1 = sum(run_ns(t) for t in drainers)
                if name:
                    mcb.xp(a.build, pid, "disable", name)
                n = max(o1 - o0, 1)
                res[label]["ops"].append(n / (t1 - t0))
                res[label]["cpu"].append((c1 - c0) / n)
                res[label]["drain"].append((d1 - d0) / n)
                if a.perf and name:
                    hand, drainer = module_samples(data, name)
                    res[label]["hand"].append(hand / PERF_HZ * 1e9 / n)
                    res[label]["drainer"].append(drainer / PERF_HZ * 1e9 / n)
    finally:
        mcb.teardown(load, mc, tmp)
    none = res["none"]
    print("%-28s %9s %8s %8s %8s %11s%s" % ("variant", "ops/s", "paired", "cpu/op", "+cpu/op",
                                              "drainer/op",
                                              "   perf: handlers drainer" if a.perf else ""))
    for label, x in res.items():
        paired = statistics.median(o / b - 1 for o, b in zip(x["ops"], none["ops"]))
        more_cpu = statistics.median(c - b for c, b in zip(x["cpu"], none["cpu"]))
        extra = ""
        if a.perf and x["hand"]:
            extra = "   %13.1fns %6.1fns" % (statistics.median(x["hand"]),
                                              statistics.median(x["drainer"]))
        print("%-28s %9.0f %+7.2f%% %6.0fns %+6.0fns %9.0fns%s" % (
            label, statistics.median(x["ops"]), 100 * paired, statistics.median(x["cpu"]),
            more_cpu, statistics.median(x["drain"]), extra))
    labels = [label for label in res if label != "none"]
    first = res[labels[0]]["cpu"]
    for label in labels[1:]:
        diff = [c - b for c, b in zip(res[label]["cpu"], first)]
        lo, hi = mcp.bootstrap_ci(diff)
        print("%s against %s: cpu/op %+.0f ns a request, 95%% interval [%+.0f, %+.0f] "
              "over %d rounds" % (label, labels[0], statistics.median(diff), lo, hi, len(diff)))


PERF_HZ = 4999


def module_samples(data, dso):
    """(handler samples, drainer samples) of the module copy DSO in a perf.data."""
    got = collections.Counter()
    for key, n in mcb.perf_samples(data).items():
        f = key.split()  # "name.so  [.] symbol"
        if len(f) >= 3 and f[0] == dso:
            got["drainer" if f[2].startswith(("drain_", "ss_")) else "hand"] += n
    return got["hand"], got["drainer"]


if __name__ == "__main__":
    main()
