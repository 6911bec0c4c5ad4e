#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Drive bench/hitloop and report what a site costs per hit.

    /usr/bin/python3 bench/run.py [--build build] [--rounds 7] ...

Variants (each a fresh hitloop process; see bench/hitloop.c):
  a  baseline           loop calling a noinline function, no site
  b  sdt detached       + <sys/sdt.h> STAP_PROBE2, never armed
  c  site detached      + XPROBES_SITE with two arguments, nothing attached
  d  site attached      + bench/mod_count.so loaded through the agent
  e  bpftrace usdt      site armed by bpftrace counting it (fewer iterations)
  f  attached, 2 thr    two threads hitting the attached site at once
  a2 baseline, 2 thr    the 2-thread baseline that f is compared with

Every round runs every variant once, in an order rotated each round, so a
slow drift of the machine (frequency, a neighbour VM) spreads over all of
them instead of biasing one.  We report the median of the rounds and their
min and max.  "added" is the variant's median minus the median of the
baseline with the same thread count.

Counters are checked, not trusted: after an attached run the module's hit
count must equal the number of site executions; after a bpftrace run its
count must cover at least the timed iterations.

Stdlib only; writes bench/results.json (relative to the repository root).
"""

import argparse
import json
import os
import platform
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Safety bounds only: nothing below waits for a fixed time to synchronise.
READY_TIMEOUT = 30.0
RUN_TIMEOUT = 300.0
BPFTRACE_ATTACH_TIMEOUT = 60.0

GOAL_ATTACHED_NS = 5.0
GOAL_BPFTRACE_RATIO = 100.0


class BenchError(Exception):
    pass


class Lines:
    """Line reader over a pipe with a deadline (select + os.read), so a
    wedged child makes the bench fail instead of hang."""

    def __init__(self, f):
        self.fd = f.fileno()
        self.buf = b""
        self.seen = []

    def readline(self, timeout, what):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError("timed out waiting for " + what)
            r, _, _ = select.select([self.fd], [], [], left)
            if not r:
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise BenchError("EOF while waiting for %s (output so far: %r)"
                                 % (what, b"".join(self.seen)[-500:]))
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        self.seen.append(line + b"\n")
        return line.decode(errors="replace")


def raise_memlock():
    # bpftrace wants a large RLIMIT_MEMLOCK on old kernels; lifting it
    # here (where permitted) spares us its warning.  Harmless if refused.
    try:
        resource.setrlimit(resource.RLIMIT_MEMLOCK,
                           (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        pass


class Bench:
    def __init__(self, args):
        self.build = os.path.abspath(os.path.join(ROOT, args.build))
        self.hitloop = os.path.join(self.build, "bench", "hitloop")
        self.module = os.path.join(self.build, "bench", "mod_count.so")
        self.xprobes = os.path.join(self.build, "xprobes")
        self.pin = args.pin and len(os.sched_getaffinity(0)) >= 2
        for p in (self.hitloop, self.module, self.xprobes):
            if not os.path.exists(p):
                raise BenchError("missing %s: run `make bench`" % p)

    def xp(self, pid, *cmd):
        r = subprocess.run([self.xprobes, str(pid)] + list(cmd),
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise BenchError("xprobes %s %s failed: %s"
                             % (pid, " ".join(cmd), r.stderr.strip()))
        return r.stdout

    def run(self, v, iters):
        """One hitloop process: returns a dict with ns_per_iter etc."""
        argv = [self.hitloop, v["mode"], str(iters), str(v["threads"])]
        if self.pin:
            argv.append("--pin")
        if v["attach"] == "bpftrace":
            argv.append("--wait-armed")
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        out = Lines(proc.stdout)
        tracer = None
        try:
            ready = out.readline(READY_TIMEOUT, "hitloop's ready line")
            if not ready.startswith("ready "):
                raise BenchError("hitloop said %r" % ready)
            pid = int(ready.split()[1])
            if v["attach"] == "module":
                said = self.xp(pid, "load", self.module)
                if "1 attachment" not in said:
                    raise BenchError("module did not attach: %r" % said)
            elif v["attach"] == "bpftrace":
                tracer = self.start_bpftrace(pid)
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
            line = out.readline(RUN_TIMEOUT, "hitloop's result")
            if not line.startswith("result "):
                raise BenchError("hitloop said %r" % line)
            res = dict(kv.split("=") for kv in line.split()[1:])
            r = {"ns_per_iter": float(res["ns_per_iter"]),
                 "thread_min": float(res["min"]),
                 "thread_max": float(res["max"]),
                 "cpu_ns_per_iter": float(res["cpu_ns_per_iter"]),
                 "hits": int(res["hits"])}
            if v["attach"] == "module":
                said = self.xp(pid, "command", "mod_count.so").split()
                counted = int(said[1])
                if counted != r["hits"]:
                    raise BenchError("module counted %d hits, hitloop made %d"
                                     % (counted, r["hits"]))
                r["counted"] = counted
            elif v["attach"] == "bpftrace":
                counted = self.stop_bpftrace(tracer)
                tracer = None
                # Counting began during the warm-up, so it covered the
                # whole timed loop.
                if counted < iters * v["threads"]:
                    raise BenchError("bpftrace counted %d hits, the timed "
                                     "loop alone made %d" % (counted, iters))
                r["counted"] = counted
            proc.stdin.close()
            if proc.wait(timeout=READY_TIMEOUT) != 0:
                raise BenchError("hitloop exited with %d" % proc.returncode)
            return r
        finally:
            if tracer and tracer.poll() is None:
                tracer.kill()
                tracer.wait()
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def start_bpftrace(self, pid):
        # bpftrace prints "Attaching N probes..." before it attaches them;
        # BEGIN runs once they are attached.
        prog = ('usdt:%s:xprobes:hit { @c = count(); } BEGIN { printf("armed\\n"); }'
                % self.hitloop)
        tracer = subprocess.Popen(["bpftrace", "-e", prog, "-p", str(pid)],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT,
                                  preexec_fn=raise_memlock)
        lines = Lines(tracer.stdout)
        tracer.lines = lines
        try:
            while True:
                if lines.readline(BPFTRACE_ATTACH_TIMEOUT,
                                  "bpftrace's BEGIN line").startswith("armed"):
                    return tracer
        except BenchError:
            tracer.kill()
            tracer.wait()
            raise BenchError("bpftrace did not attach: " + b"".join(
                lines.seen + [lines.buf]).decode(errors="replace").strip())

    def stop_bpftrace(self, tracer):
        # bpftrace now and then loses a SIGINT that arrives while it is in
        # its event loop: send it again until the count comes out.
        tracer.send_signal(signal.SIGINT)
        sent = 1
        try:
            while True:
                try:
                    line = tracer.lines.readline(2, "bpftrace's @c line")
                except BenchError:
                    if sent >= 10:
                        raise
                    tracer.send_signal(signal.SIGINT)
                    sent += 1
                    continue
                if line.startswith("@c:"):
                    tracer.wait(timeout=60)
                    return int(line.split()[1])
        except BenchError as e:
            raise BenchError("%s: %s" % (e, b"".join(tracer.lines.seen)
                                         .decode(errors="replace").strip()))


def cpu_counters():
    """(busy, steal) seconds of all CPUs from /proc/stat, and the CPU time
    of this process and its (waited-for) children."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal ...
    busy = (f[0] + f[1] + f[2] + f[5] + f[6]) / hz
    steal = (f[7] if len(f) > 7 else 0) / hz
    t = os.times()
    return busy, steal, t.user + t.system + t.children_user + t.children_system


def bpftrace_unusable():
    """A reason bpftrace cannot run here, or None."""
    if not shutil.which("bpftrace"):
        return "bpftrace not installed (Debian package bpftrace)"
    if os.geteuid() != 0:
        return "needs root (uprobes + BPF); run `sudo make bench`"
    return None


def variants(args):
    v = [
        dict(key="a", label="baseline (no site)", mode="base", threads=1, attach=None),
        dict(key="b", label="sdt STAP_PROBE2 detached", mode="sdt", threads=1, attach=None),
        dict(key="c", label="xprobes site detached", mode="site", threads=1, attach=None),
        dict(key="d", label="xprobes site attached", mode="site", threads=1, attach="module"),
        dict(key="e", label="bpftrace usdt count", mode="site", threads=1, attach="bpftrace"),
        dict(key="a2", label="baseline, 2 threads", mode="base", threads=2, attach=None),
        dict(key="f", label="site attached, 2 threads", mode="site", threads=2, attach="module"),
    ]
    for x in v:
        bpf = x["attach"] == "bpftrace"
        x["iters"] = args.bpf_iters if bpf else args.iters
        x["rounds"] = args.bpf_rounds if bpf else args.rounds
        x["samples"] = []
    return v


def fmt(x, nd=2):
    return "-" if x is None else "%.*f" % (nd, x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=20_000_000)
    ap.add_argument("--bpf-rounds", type=int, default=5)
    ap.add_argument("--bpf-iters", type=int, default=300_000)
    ap.add_argument("--no-pin", dest="pin", action="store_false",
                    help="do not pin hitloop's threads to CPUs")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results.json"))
    args = ap.parse_args()

    bench = Bench(args)
    vs = variants(args)
    byk = {x["key"]: x for x in vs}
    skip = {}
    why = bpftrace_unusable()
    if why:
        skip["e"] = why

    start = time.monotonic()
    cpu0 = cpu_counters()
    print("bench: %d rounds x %d iterations (bpftrace: %d x %d), threads %s"
          % (args.rounds, args.iters, args.bpf_rounds, args.bpf_iters,
             "pinned" if bench.pin else "not pinned"), flush=True)
    for rnd in range(max(args.rounds, args.bpf_rounds)):
        order = vs[rnd % len(vs):] + vs[:rnd % len(vs)]
        done = []
        for v in order:
            if rnd >= v["rounds"] or v["key"] in skip:
                continue
            try:
                r = bench.run(v, v["iters"])
            except BenchError as e:
                if v["attach"] == "bpftrace":
                    skip["e"] = str(e).splitlines()[0][:200]
                    continue
                raise
            v["samples"].append(r)
            done.append("%s=%.2f" % (v["key"], r["ns_per_iter"]))
        print("  round %d: %s" % (rnd + 1, " ".join(done)), flush=True)

    # ---- statistics ------------------------------------------------------
    for v in vs:
        ns = [s["ns_per_iter"] for s in v["samples"]]
        v["median"] = statistics.median(ns) if ns else None
        v["min"] = min(ns) if ns else None
        v["max"] = max(ns) if ns else None
        cpu = [s["cpu_ns_per_iter"] for s in v["samples"]]
        v["cpu_median"] = statistics.median(cpu) if cpu else None
    for v in vs:
        base = byk["a2" if v["threads"] == 2 else "a"]
        v["added"] = (None if v["median"] is None
                      else v["median"] - base["median"])
        v["cpu_added"] = (None if v["median"] is None
                          else v["cpu_median"] - base["cpu_median"])
    a = byk["a"]
    # Run-to-run noise of a comparison: half the min-max range over the
    # rounds of the baseline or of the variant, whichever is wider.
    noise = max((a["max"] - a["min"]) / 2, 0.01)
    for v in vs:
        v["noise"] = (None if v["median"] is None else
                      max(noise, (v["max"] - v["min"]) / 2))
    bpf_added = byk["e"]["added"]
    for v in vs:
        if v["key"] in ("a", "a2") or v["added"] is None or bpf_added is None:
            v["vs_bpftrace"] = None
        elif v["added"] <= v["noise"]:
            v["vs_bpftrace"] = None  # no measurable cost: ratio meaningless
        else:
            v["vs_bpftrace"] = bpf_added / v["added"]

    # ---- table -----------------------------------------------------------
    hdr = ("variant", "ns/iter median", "min", "max", "added ns/hit",
           "vs bpftrace", "cpu-time added")
    rows = []
    for v in vs:
        if v["key"] in skip:
            rows.append(("(%s) %s" % (v["key"], v["label"]),
                         "skipped: " + skip[v["key"]], "", "", "", "", ""))
            continue
        ratio = v["vs_bpftrace"]
        if ratio is not None:
            ratio_s = "%.0fx cheaper" % ratio if ratio >= 2 else "%.2fx" % ratio
        elif v["key"] in ("a", "a2"):
            ratio_s = "-"
        elif v["key"] == "e":
            ratio_s = "1x"
        elif bpf_added is None:
            ratio_s = "n/a"
        else:
            ratio_s = "n/a (within noise)"
        base = v["key"] in ("a", "a2")
        added = "-" if base else "%+.2f" % v["added"]
        cpu_added = "-" if base else "%+.2f" % v["cpu_added"]
        rows.append(("(%s) %s" % (v["key"], v["label"]), fmt(v["median"]),
                     fmt(v["min"]), fmt(v["max"]), added, ratio_s, cpu_added))
    widths = [max(len(r[i]) for r in rows + [hdr]) for i in range(len(hdr))]
    print()
    for r in [hdr] + rows:
        if r[1].startswith("skipped"):
            print("  ".join([r[0].ljust(widths[0]), r[1]]))
            continue
        print("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                        for i, c in enumerate(r)))

    # ---- goals -----------------------------------------------------------
    c, d, f = byk["c"], byk["d"], byk["f"]
    goals = []
    goals.append(dict(
        goal="detached site within noise of no site",
        value="%+.2f ns/hit (noise +/-%.2f ns)" % (c["added"], c["noise"]),
        ok=abs(c["added"]) <= c["noise"]))
    goals.append(dict(
        goal="attached site <= %.0f ns/hit" % GOAL_ATTACHED_NS,
        value="%.2f ns/hit (from CPU time: %.2f)" % (d["added"],
                                                     d["cpu_added"]),
        ok=d["added"] <= GOAL_ATTACHED_NS))
    if d["vs_bpftrace"] is not None:
        goals.append(dict(
            goal=">= %.0fx cheaper than bpftrace" % GOAL_BPFTRACE_RATIO,
            value="%.0fx (bpftrace %.0f ns/hit; from CPU time: %.0fx)"
            % (d["vs_bpftrace"], bpf_added,
               byk["e"]["cpu_added"] / max(d["cpu_added"], 0.01)),
            ok=d["vs_bpftrace"] >= GOAL_BPFTRACE_RATIO))
    else:
        goals.append(dict(
            goal=">= %.0fx cheaper than bpftrace" % GOAL_BPFTRACE_RATIO,
            value="not measured: " + skip.get("e", "attached cost within noise"),
            ok=None))
    scaling = (f["added"] / d["added"]) if d["added"] > noise else None
    cpu_scaling = (f["cpu_added"] / d["cpu_added"]
                   if d["cpu_added"] > noise else None)
    print()
    print("goals:")
    for g in goals:
        mark = {True: "PASS", False: "FAIL", None: "----"}[g["ok"]]
        print("  [%s] %-40s %s" % (mark, g["goal"], g["value"]))
    print()
    print("scaling (f): attached, per hit per thread: 1 thread %.2f ns, "
          "2 threads %.2f ns -> ratio %s (1.00 = perfect); from CPU time: "
          "%.2f ns vs %.2f ns -> ratio %s"
          % (d["added"], f["added"], fmt(scaling), d["cpu_added"],
             f["cpu_added"], fmt(cpu_scaling)))
    best = d["min"] - a["min"]
    print("noise: medians of %d interleaved rounds (bpftrace: %d); the min "
          "and max columns are the spread over the rounds; a difference is "
          "'within noise' when it is smaller than half the wider min-max "
          "range of the two variants compared.  From the fastest runs "
          "instead of the medians, attached costs %.2f ns/hit.  'cpu-time "
          "added' is the same difference from the threads' CPU time "
          "(CLOCK_THREAD_CPUTIME_ID), which leaves out time a thread sat "
          "preempted: trust it more when the machine is busy."
          % (args.rounds, args.bpf_rounds, best))
    # How much of the machine others took while we ran: all CPUs' busy
    # time minus our children's, plus time the hypervisor stole.
    cpu1 = cpu_counters()
    elapsed = time.monotonic() - start
    others = steal = None
    if cpu0 and cpu1:
        cap = elapsed * os.cpu_count()
        others = max(0.0, (cpu1[0] - cpu0[0]) - (cpu1[2] - cpu0[2])) / cap
        steal = (cpu1[1] - cpu0[1]) / cap
    busy = others is not None and others + steal > 0.10
    print("machine: %d CPUs%s; while we ran, other processes used %s and "
          "the hypervisor stole %s of the CPU time%s"
          % (os.cpu_count(), ", hitloop threads pinned" if bench.pin else "",
             "?" if others is None else "%.0f%%" % (100 * others),
             "?" if steal is None else "%.0f%%" % (100 * steal),
             " -- BUSY: figures are inflated and noisy; rerun on an idle "
             "machine" if busy else ""))
    print("took %.0f s; results in %s" % (elapsed, os.path.relpath(args.out)))

    # ---- JSON ------------------------------------------------------------
    cpu = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for ln in fh:
                if ln.startswith("model name"):
                    cpu = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    result = {
        "machine": {"cpu": cpu, "cpus": os.cpu_count(),
                    "kernel": platform.release(), "pinned": bench.pin,
                    "cpu_share_of_other_processes": others,
                    "cpu_share_stolen": steal, "busy": busy},
        "params": {"rounds": args.rounds, "iters": args.iters,
                   "bpf_rounds": args.bpf_rounds, "bpf_iters": args.bpf_iters},
        "noise_ns": noise,
        "variants": [{k: v[k] for k in ("key", "label", "mode", "threads",
                                        "attach", "iters", "median", "min",
                                        "max", "added", "noise",
                                        "vs_bpftrace", "cpu_median",
                                        "cpu_added",
                                        "samples")}
                     | ({"skipped": skip[v["key"]]} if v["key"] in skip else {})
                     for v in vs],
        "goals": goals,
        "scaling_2_threads": scaling,
        "scaling_2_threads_cpu_time": cpu_scaling,
        "attached_added_from_fastest_runs": best,
        "elapsed_s": elapsed,
    }
    # The memcached benchmarks (bench/memcached*.py) write their own
    # sections of the same file: keep them.
    try:
        with open(args.out) as fh:
            kept = {k: v for k, v in json.load(fh).items()
                    if k.startswith(("memcached", "mctop", "trace"))}
    except (OSError, ValueError, AttributeError):
        kept = {}
    with open(args.out, "w") as fh:
        json.dump(kept | result, fh, indent=2)
        fh.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print("bench: " + str(e), file=sys.stderr)
        sys.exit(1)
