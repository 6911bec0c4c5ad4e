#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Where mctop's cost lands in memcached: perf(1) of the whole process
with a build of modules/mctop.so enabled against disabled.

    bench/mctop_perfcmp.py [--rounds N] [--window S] [--freq HZ] [--budget B] MODULE.so

One memcached (-t 1 on CPU 1, as bench/mctop_bench.py runs it) under
mcload Zipf(0.99) over 1M keys at saturation, the module loaded once;
then rounds of two windows, one with the module enabled and one with it
disabled (every site detached), in alternating order, each recorded with
`perf record -p PID`.  Per state, samples are summed over the rounds and
turned into ns of CPU per memcached request (samples / HZ / requests).
Requests are counted from just before perf starts to just after it
exits, a little longer than it samples, so the figures read a few
percent low in both states alike: compare the states, not the totals.

Printed: the total ns per request in each state; the same by shared
object (the module's own code, memcached's, libc's, the kernel's); the
symbols whose ns per request changed most.  What the throughput bench
cannot say: whether the cost is the module's own code or the code around
it running slower (docs/design.md, "Where the cost stands").  Each run
drifts with this VM's phase, tens of ns a request on the kernel's share,
so compare runs, not single figures.  Needs root and perf.  Stdlib only."""
import argparse
import collections
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import memcached as mcb  # noqa: E402  (build, spawn, Stats, xp)


def die(msg):
    sys.stderr.write("mctop_perfcmp: %s\n" % msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("module", help="a build of modules/mctop.so")
    ap.add_argument("--build", default=os.path.join(mcb.ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=16, help="rounds (default 16)")
    ap.add_argument("--window", type=float, default=4.0, help="seconds per window (default 4)")
    ap.add_argument("--freq", type=int, default=2999, help="perf's sampling rate (default 2999)")
    ap.add_argument("--budget", type=int, default=0, help="the module's budget in bytes")
    a = ap.parse_args()
    if a.rounds < 1 or a.window <= 0 or a.freq < 1:
        ap.error("--rounds, --window and --freq must be positive")
    if not os.path.isfile(a.module):
        die("%s: no such module" % a.module)
    if shutil.which("perf") is None or os.geteuid() != 0:
        die("needs root and perf")
    build_dir = os.path.abspath(a.build)
    for f in ("mcload", "xprobes"):
        if not os.path.exists(os.path.join(build_dir, f)):
            die("%s/%s is missing: make B=%s all" % (build_dir, f, a.build))
    if mcb.PIN_CLIENT:
        os.sched_setaffinity(0, {0})  # perf report and the toggles stay off memcached's CPU
    binary = mcb.build("xprobes", build_dir)
    port = mcb.free_port()
    mc = mcb.spawn(binary, port, build_dir, threads=1, extra=("-m", "1024"))
    load = None
    tmp = "/tmp/mctop_perfcmp.%d" % os.getpid()
    os.makedirs(tmp, exist_ok=True)
    try:
        mcb.wait_listening(mc, port)
        name = os.path.basename(a.module)
        mcb.xp(build_dir, mc.pid, "load", os.path.abspath(a.module))
        if a.budget:
            mcb.xp(build_dir, mc.pid, "command", name, "budget", str(a.budget))
        load = subprocess.Popen(
            [*mcb.PIN_CLIENT, os.path.join(build_dir, "mcload"), "-s", "127.0.0.1:%d" % port,
             "-T", "1", "-c", "32", "-z", "0.99", "-k", "1000000", "-r", "9:1", "-d", "86400"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        stats = mcb.Stats(port)
        time.sleep(5)  # the cache and the module's tables fill, not a synchronisation
        samples = {"on": collections.Counter(), "off": collections.Counter()}
        ops = {"on": 0, "off": 0}
        for r in range(a.rounds):
            for state in (("off", "on") if r % 2 == 0 else ("on", "off")):
                mcb.xp(build_dir, mc.pid, "enable" if state == "on" else "disable", name)
                data = os.path.join(tmp, state + ".data")
                o0 = stats.ops()
                subprocess.run(["perf", "record", "-F", str(a.freq), "-o", data, "-p",
                                str(mc.pid), "--", "sleep", str(a.window)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
                ops[state] += stats.ops() - o0
                samples[state] += mcb.perf_samples(data)
            print("round %d of %d" % (r + 1, a.rounds), file=sys.stderr, flush=True)
    finally:
        mcb.teardown(load, mc, tmp)

    def ns(state, n):
        return n / a.freq * 1e9 / ops[state]
    print("%s: %d rounds of %.1f s windows; requests: enabled %d, disabled %d"
          % (name, a.rounds, a.window, ops["on"], ops["off"]))
    tot = {s: ns(s, sum(samples[s].values())) for s in samples}
    print("ns of memcached CPU a request: enabled %.0f, disabled %.0f, added %+.0f"
          % (tot["on"], tot["off"], tot["on"] - tot["off"]))
    by_dso = {s: collections.Counter() for s in samples}
    for s in samples:
        for key, n in samples[s].items():
            by_dso[s][key.split()[0]] += n
    print("\n%9s %9s %9s  %s" % ("enabled", "disabled", "added", "shared object"))
    for d in sorted(set(by_dso["on"]) | set(by_dso["off"]), key=lambda d: -by_dso["on"][d]):
        on, off = ns("on", by_dso["on"][d]), ns("off", by_dso["off"][d])
        if abs(on) >= 0.1 or abs(off) >= 0.1:
            print("%9.1f %9.1f %+9.1f  %s" % (on, off, on - off, d))
    print("\n%9s %9s %9s  %s" % ("enabled", "disabled", "added", "symbol"))
    keys = set(samples["on"]) | set(samples["off"])
    changed = sorted(keys, key=lambda k: -abs(ns("on", samples["on"][k]) -
                                              ns("off", samples["off"][k])))
    for k in changed[:30]:
        on, off = ns("on", samples["on"][k]), ns("off", samples["off"][k])
        print("%9.1f %9.1f %+9.1f  %s" % (on, off, on - off, k[:100]))


if __name__ == "__main__":
    main()
