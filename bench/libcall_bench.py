#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A call's cost with what uftrace users ask of it, traced by us and by
uftrace with the same options (make bench-trace).

    /usr/bin/python3 bench/libcall_bench.py [--build build] [--rounds 7] [--n 200000]
                                            [--case strlen,add2,strlen-args]

bench/libcall.c makes N calls and times them inside the program
(CLOCK_MONOTONIC and the thread's CPU time).  Cases:

  strlen       strlen through the PLT, a library call; no options
  add2         add2(a, b), a function with two integer arguments and a
               return value: -A 'add2@arg1,arg2' -R 'add2@retval'
  strlen-args  the library call with its string and return value:
               -A 'strlen@arg1/s' -R 'strlen@retval' (shown, not a goal:
               we read a string with a system call, which never faults)

Variants of each case, each a fresh process, in an order rotated each
round:

  base     libcall-gcc, untraced (gcc -O2 -fno-builtin)
  ours     `xprobes trace --libcall [OPTIONS] -b KIB -- libcall-traced N
           CASE` (the same source with our trace flags); checked: the
           graph shows every call
  uftrace  `uftrace record [OPTIONS]` of libcall-pg (gcc -pg): uftrace
           traces library calls unless told --no-libcall

"added" is a variant's median CPU time per call minus the base's.  The
goal, for strlen and add2: ours at least 2.5 times cheaper than uftrace.
Stdlib only; prints a table, writes the "libcall" section of
bench/results.json (one entry a case)."""

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


# case: (the function called, the options both tracers get, a goal)
CASES = {
    "strlen": ("strlen", [], True),
    "add2": ("add2", ["-A", "add2@arg1,arg2", "-R", "add2@retval"], True),
    "strlen-args": ("strlen", ["-A", "strlen@arg1/s", "-R", "strlen@retval"], False),
}


def run(argv, n, cwd, func=None):
    """(CPU ns, wall ns) a call; with func (ours), checks the graph shows
    n calls of it."""
    r = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=cwd)
    if r.returncode != 0:
        sys.exit("libcall_bench: %s exited with %d: %s" % (" ".join(argv), r.returncode,
                                                            r.stderr.strip()[-300:]))
    for line in r.stdout.splitlines() + r.stderr.splitlines():
        w = line.split()
        if len(w) >= 4 and w[0] == "libcall" and w[1] == str(n):
            kv = dict(x.split("=", 1) for x in w[2:])
            if func:
                shown = sum(1 for x in r.stdout.splitlines()
                            if x.split("|")[-1].strip().startswith(func + "("))
                if shown != n:
                    sys.exit("libcall_bench: ours recorded %d %s calls of %d" % (shown, func, n))
            return int(kv["cpu_ns"]) / n, int(kv["ns"]) / n
    sys.exit("libcall_bench: %s printed no result" % " ".join(argv))


def measure(case, a, tmp):
    """The case's medians and added costs."""
    func, opts, goal = CASES[case]
    bench = os.path.join(a.build, "bench")
    kib = max(1024, a.n * 2 * 16 * 8 // 1024)  # every record kept, payloads too
    variants = {
        "base": [os.path.join(bench, "libcall-gcc"), str(a.n), case.split("-")[0]],
        "ours": [os.path.join(a.build, "xprobes"), "trace", "--libcall", *opts, "-b", str(kib),
                 "--", os.path.join(bench, "libcall-traced"), str(a.n), case.split("-")[0]],
    }
    skip = {}
    if shutil.which("uftrace"):
        variants["uftrace"] = ["uftrace", "record", "-d", "ufdata", *opts,
                               os.path.join(bench, "libcall-pg"), str(a.n), case.split("-")[0]]
    else:
        skip["uftrace"] = "uftrace not installed"
    keys = list(variants)
    cpu = {k: [] for k in keys}
    for r in range(a.rounds):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            shutil.rmtree(os.path.join(tmp, "ufdata"), ignore_errors=True)
            cpu[k].append(run(variants[k], a.n, tmp, func if k == "ours" else None)[0])
    med = {k: statistics.median(v) for k, v in cpu.items()}
    added = {k: med[k] - med["base"] for k in keys if k != "base"}
    print("%s%s, CPU ns a call, median of %d rounds, N=%d"
          % (case, " " + " ".join(opts) if opts else " (a library call)", a.rounds, a.n))
    for k in keys:
        print("  %-8s %8.1f ns%s   (min %.1f, max %.1f)"
              % (k, med[k], "" if k == "base" else "   added %.1f ns" % added[k],
                 min(cpu[k]), max(cpu[k])))
    for k, why in skip.items():
        print("  %-8s skipped: %s" % (k, why))
    res = {"options": opts, "cpu_ns_per_call": med, "added_ns": added,
           "cpu_ns_all": cpu}
    if "uftrace" in added and added["ours"] > 0:
        ratio = added["uftrace"] / added["ours"]
        res["ratio"] = ratio
        if goal:
            res["goal_ratio"] = GOAL_RATIO
            print("goal: ours at least %.1fx cheaper than uftrace: %.2fx, %s"
                  % (GOAL_RATIO, ratio, "met" if ratio >= GOAL_RATIO else "NOT met"))
        else:
            print("ours %.2fx cheaper than uftrace (shown, not a goal)" % ratio)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--case", default=",".join(CASES))
    a = ap.parse_args()
    cases = a.case.split(",")
    for c in cases:
        if c not in CASES:
            ap.error("unknown case %r (%s)" % (c, ", ".join(CASES)))
    res = {"n": a.n, "rounds": a.rounds, "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            res["cases"][c] = measure(c, a, tmp)
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
