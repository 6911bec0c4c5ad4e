#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A library call's cost, traced by us and by uftrace (make bench-trace).

    /usr/bin/python3 bench/libcall_bench.py [--build build] [--rounds 7] [--n 200000]

bench/libcall.c makes N calls of strlen through the PLT and times them
inside the program (CLOCK_MONOTONIC and the thread's CPU time).  Variants,
each a fresh process, in an order rotated each round:

  base     libcall-gcc, untraced (gcc -O2 -fno-builtin)
  ours     `xprobes trace --libcall -b KIB -- libcall-traced N` (the same
           source with our trace flags); checked: the graph shows every call
  uftrace  `uftrace record` of libcall-pg (gcc -pg): uftrace traces
           library calls unless told --no-libcall

"added" is a variant's median CPU time per call minus the base's.  The
goal: ours at least 2.5 times cheaper than uftrace.  Stdlib only; prints
a table, writes the "libcall" section of bench/results.json."""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GOAL_RATIO = 2.5
RUN_TIMEOUT = 300.0


def run(argv, n, cwd):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=cwd)
    if r.returncode != 0:
        sys.exit("libcall_bench: %s exited with %d: %s" % (" ".join(argv), r.returncode,
                                                            r.stderr.strip()[-300:]))
    for line in r.stdout.splitlines() + r.stderr.splitlines():
        w = line.split()
        if len(w) >= 4 and w[0] == "libcall" and w[1] == str(n):
            kv = dict(x.split("=", 1) for x in w[2:])
            if argv[1:3] == ["trace", "--libcall"] and r.stdout.count("strlen();") != n:
                sys.exit("libcall_bench: ours recorded %d strlen calls of %d"
                         % (r.stdout.count("strlen();"), n))
            return int(kv["cpu_ns"]) / n, int(kv["ns"]) / n
    sys.exit("libcall_bench: %s printed no result" % " ".join(argv))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=200000)
    a = ap.parse_args()
    bench = os.path.join(a.build, "bench")
    xprobes = os.path.join(a.build, "xprobes")
    kib = max(1024, a.n * 2 * 16 * 2 // 1024)  # every record kept
    variants = {
        "base": [os.path.join(bench, "libcall-gcc"), str(a.n)],
        "ours": [xprobes, "trace", "--libcall", "-b", str(kib), "--",
                 os.path.join(bench, "libcall-traced"), str(a.n)],
    }
    skip = {}
    if shutil.which("uftrace"):
        variants["uftrace"] = ["uftrace", "record", "-d", "ufdata",
                               os.path.join(bench, "libcall-pg"), str(a.n)]
    else:
        skip["uftrace"] = "uftrace not installed"
    keys = list(variants)
    cpu = {k: [] for k in keys}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for k in keys[r % len(keys):] + keys[:r % len(keys)]:
                shutil.rmtree(os.path.join(tmp, "ufdata"), ignore_errors=True)
                cpu[k].append(run(variants[k], a.n, tmp)[0])
    med = {k: statistics.median(v) for k, v in cpu.items()}
    added = {k: med[k] - med["base"] for k in keys if k != "base"}
    print("library call (strlen through the PLT), CPU ns a call, median of %d rounds, N=%d"
          % (a.rounds, a.n))
    for k in keys:
        print("  %-8s %8.1f ns%s" % (k, med[k], "" if k == "base" else
                                     "   added %.1f ns" % added[k]))
    for k, why in skip.items():
        print("  %-8s skipped: %s" % (k, why))
    res = {"n": a.n, "rounds": a.rounds, "cpu_ns_per_call": med, "added_ns": added}
    if "uftrace" in added and added["ours"] > 0:
        ratio = added["uftrace"] / added["ours"]
        res["ratio"] = ratio
        print("goal: ours at least %.1fx cheaper than uftrace: %.2fx, %s"
              % (GOAL_RATIO, ratio, "met" if ratio >= GOAL_RATIO else "NOT met"))
    path = os.path.join(HERE, "results.json")
    try:
        with open(path) as f:
            allres = json.load(f)
    except (OSError, ValueError):
        allres = {}
    allres["libcall"] = res
    with open(path, "w") as f:
        json.dump(allres, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
