#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Starting and stopping the tracer in a big program: every function of a
program of N functions (default 20,000), each on its own page, the worst
case for switching (tests/trace/gen_bigprog.py; builds: bench/trace.mk).

    /usr/bin/python3 bench/trace_big.py [--build build] [--n 20000] [--cycles 3]

For each compiler's build, one process: `xprobes PID trace start -b 64`
then `trace stop`, --cycles times, each command's wall time (the tool's
whole run, as a user sees it), and the process's mappings (lines of
/proc/PID/maps) before, after each start and stop, and at their peak
(sampled as fast as the maps can be read while each command runs), with
its anonymous memory (RssAnon).  Checked every time: every function
computes the same.  Then a start with the process a few mappings short of
vm.max_map_count (the program maps pages of its own until it is): it
must be refused, and the program run on.

Goals: start and stop each under 1 s at 20,000 functions; after a stop
the mappings of before, within a few; no cycle leaves more behind.

Stdlib only; writes the "trace_big" section of bench/results.json (the
other sections are kept)."""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "trace"))
from gen_bigprog import expected_sum  # noqa: E402

TIMEOUT = 600.0  # a bound, never a synchronisation
GOAL_S = 1.0


def count_maps(pid):
    with open(f"/proc/{pid}/maps") as f:
        return sum(1 for _ in f)


def rss_anon_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


class Prog:
    def __init__(self, path):
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        line = self.p.stdout.readline().split()
        if not line or line[0] != "ready":
            raise SystemExit(f"trace_big: {path} did not start")
        self.pid = int(line[1])

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def close(self):
        self.ask("quit")
        self.p.wait(timeout=TIMEOUT)


def timed(xprobes, pid, script):
    """The command's wall time, its output, and the most mappings seen
    while it ran."""
    peak = [count_maps(pid)]
    done = threading.Event()

    def sample():
        while not done.is_set():
            try:
                peak[0] = max(peak[0], count_maps(pid))
            except OSError:
                return

    th = threading.Thread(target=sample)
    th.start()
    t0 = time.monotonic()
    r = subprocess.run([xprobes, str(pid)], input=script, capture_output=True, text=True,
                       timeout=TIMEOUT)
    took = time.monotonic() - t0
    done.set()
    th.join()
    return took, r, peak[0]


def run(xprobes, path, n, cycles):
    prog = Prog(path)
    want = f"sum {expected_sum(n)}"
    res = {"maps_before": count_maps(prog.pid), "rss_anon_kib_before": rss_anon_kib(prog.pid),
           "start_s": [], "stop_s": [], "maps_traced": [], "maps_after": [], "maps_peak": [],
           "rss_anon_kib_traced": [], "rss_anon_kib_after": []}
    try:
        for _ in range(cycles):
            took, r, peak = timed(xprobes, prog.pid, "trace start -b 64\n")
            if r.returncode != 0 or "tracing" not in r.stdout:
                raise SystemExit(f"trace_big: start failed: {r.stdout}{r.stderr}")
            res["start_s"].append(round(took, 3))
            res["maps_traced"].append(count_maps(prog.pid))
            res["rss_anon_kib_traced"].append(rss_anon_kib(prog.pid))
            if prog.ask("call") != want:
                raise SystemExit("trace_big: wrong result while traced")
            took, r, peak2 = timed(xprobes, prog.pid, "trace stop\n")
            if r.returncode != 0 or "tracing stopped" not in r.stdout:
                raise SystemExit(f"trace_big: stop failed: {r.stdout}{r.stderr}")
            res["stop_s"].append(round(took, 3))
            res["maps_peak"].append(max(peak, peak2))
            res["maps_after"].append(count_maps(prog.pid))
            res["rss_anon_kib_after"].append(rss_anon_kib(prog.pid))
            if prog.ask("call") != want:
                raise SystemExit("trace_big: wrong result after stop")
        filled = prog.ask("fill 6")
        took, r, _ = timed(xprobes, prog.pid, "trace start -b 64\n")
        res["near_limit"] = {"maps": filled, "refused": r.returncode != 0 and
                             "vm.max_map_count" in r.stdout + r.stderr,
                             "message": (r.stdout + r.stderr).strip()[-300:],
                             "seconds": round(took, 3),
                             "runs_on": prog.ask("call") == want}
        prog.ask("unfill")
    finally:
        prog.close()
    res["start_s_median"] = statistics.median(res["start_s"])
    res["stop_s_median"] = statistics.median(res["stop_s"])
    res["goals_met"] = (max(res["start_s"]) < GOAL_S and max(res["stop_s"]) < GOAL_S and
                        max(res["maps_after"]) <= res["maps_before"] + 8 and
                        res["maps_after"][-1] <= res["maps_after"][0] and
                        res["near_limit"]["refused"] and res["near_limit"]["runs_on"])
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results.json"))
    a = ap.parse_args()
    xprobes = os.path.join(a.build, "xprobes")
    out = {"n": a.n, "cycles": a.cycles, "kernel": platform.release(),
           "loadavg": open("/proc/loadavg").read().split()[:3]}
    for cc in ("gcc", "clang"):
        path = os.path.join(a.build, "bench", f"big{a.n}-{cc}")
        if not os.path.exists(path):
            print(f"trace_big: {path} is missing (make bench-trace-big): {cc} skipped")
            continue
        r = run(xprobes, path, a.n, a.cycles)
        out[cc] = r
        print(f"{cc}: {a.n} functions: start {r['start_s']} s, stop {r['stop_s']} s; "
              f"mappings before {r['maps_before']}, traced {r['maps_traced']}, "
              f"peak {r['maps_peak']}, after {r['maps_after']}; RssAnon KiB before "
              f"{r['rss_anon_kib_before']}, traced {r['rss_anon_kib_traced']}, after "
              f"{r['rss_anon_kib_after']}; near the limit ({r['near_limit']['maps']}): "
              f"{'refused' if r['near_limit']['refused'] else 'NOT refused'}"
              f"{', runs on' if r['near_limit']['runs_on'] else ', BROKEN'}; "
              f"goals {'met' if r['goals_met'] else 'NOT met'}")
    try:
        with open(a.out) as f:
            results = json.load(f)
    except (OSError, ValueError):
        results = {}
    results["trace_big"] = out
    with open(a.out, "w") as f:
        json.dump(results, f, indent=1)
    if not all(out[cc]["goals_met"] for cc in ("gcc", "clang") if cc in out):
        sys.exit(1)


if __name__ == "__main__":
    main()
