#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Side by side: builds or modes of mclat against each other on one
memcached, each paired with an adjacent window without mclat.

    bench/mclat_variants.py [--rounds N] [--window S] LABEL=MCLAT[,ARG...] ...

One `memcached -t 1` (the xprobes build, agent preloaded, CPU 1) under one
memaslap load (-T 1 -c 32, CPU 0), as bench/mclat_bench.py.  Each round
takes the variants in an order drawn at random (seeded), and for each
runs an attached window (that mclat started, as the bench does, once it
says it is tracing) and a detached one, in ABBA order round by round.
Why not one `make bench-mclat` per build: this shared 2-vCPU VM drifts
by more than a change is worth between runs; in one run every variant
sees the same drift.  Per variant: the median paired change in
throughput and in memcached's CPU per operation, bootstrap 95% intervals.

MCLAT is a path to an mclat binary; ARGs are passed to it before
`--json 1` (e.g. `new=build/mclat,--sample,0.02,0.2`); an ARG of the
form ENV=VALUE (a name in capitals) goes to its environment instead.
The module is this build's modules/mclat.so (--module), so a binary
built elsewhere needs none of its own.
"""
import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import memcached as mcb  # noqa: E402
import memcached_paired as paired  # noqa: E402


def variant(spec):
    label, _, rest = spec.partition("=")
    path, *args = rest.split(",")
    env = dict(a.split("=", 1) for a in args if "=" in a and a.split("=")[0].isupper())
    return label, path, [a for a in args if a.split("=")[0] not in env], env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", nargs="+", help="LABEL=MCLAT[,ARG...]")
    ap.add_argument("--build", default=os.path.join(mcb.ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--window", type=float, default=2.0, help="seconds per window")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    module = os.path.join(build, "modules", "mclat.so")
    vs = [variant(s) for s in a.variants]
    if mcb.PIN_CLIENT:
        os.sched_setaffinity(0, {0})  # this script and mclat off the server's CPU
    binary = mcb.build("xprobes", build)
    port = mcb.free_port()
    mc = mcb.spawn(binary, port, build)
    load = None
    try:
        mcb.wait_listening(mc, port)
        load = subprocess.Popen(mcb.memaslap_argv(port, int(a.rounds * len(vs) * 4 *
                                                            (a.window + 3) + 60)),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stats = mcb.Stats(port)
        while stats.ops() < 10000:
            time.sleep(0.05)  # until memaslap runs (a poll interval)

        def window():
            o0, c0, t0 = stats.ops(), paired.cpu_ns(mc.pid), time.monotonic()
            time.sleep(a.window)  # the measurement itself
            o1, c1, t1 = stats.ops(), paired.cpu_ns(mc.pid), time.monotonic()
            return (o1 - o0) / (t1 - t0), (c1 - c0) / max(o1 - o0, 1)

        def start(path, args, env):
            p = subprocess.Popen([path, "-p", str(mc.pid), "--module", module, *args, "--json",
                                  "1"], env=dict(os.environ, **env), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            for line in p.stderr:
                if line.startswith("mclat: tracing"):
                    return p
            sys.exit("bench/mclat_variants.py: %s did not start" % path)

        res = {label: [] for label, *_ in vs}
        rng = random.Random(a.seed)
        for r in range(a.rounds):
            order = list(range(len(vs)))
            rng.shuffle(order)
            for i in order:
                label, path, args, env = vs[i]
                got = {}
                for on in ((False, True) if (r + i) % 2 == 0 else (True, False)):
                    p = start(path, args, env) if on else None
                    got[on] = window()
                    if p:
                        p.send_signal(signal.SIGINT)
                        p.wait(timeout=60)
                off, on = got[False], got[True]
                res[label].append(((on[0] - off[0]) / off[0] * 100,
                                   (on[1] - off[1]) / off[1] * 100))
            print("round %d: %s" % (r + 1, "  ".join("%s %+.1f%%/%+.1f%%" % (l, *v[-1])
                                                     for l, v in res.items())), flush=True)
    finally:
        mcb.teardown(load, mc)
    print("%d rounds of %.1f s windows, medians [bootstrap 95%%]:" % (a.rounds, a.window))
    for label, v in res.items():
        tp, cpu = [x[0] for x in v], [x[1] for x in v]
        print("  %-10s throughput %+6.2f%% [%+.2f, %+.2f]   memcached CPU per op %+6.2f%% "
              "[%+.2f, %+.2f]" % (label, statistics.median(tp), *paired.bootstrap_ci(tp),
                                  statistics.median(cpu), *paired.bootstrap_ci(cpu)))


if __name__ == "__main__":
    main()
