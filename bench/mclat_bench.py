#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mclat's cost on memcached at saturation.

Measured for mclat's default (sampled: programs attached for 5% of each
interval) and for --all, against bpftrace running the same stages
(bench/mclat_stages.bt) and against empty programs on the same hooks;
then, on a steady open-loop mcload workload, each stage's p50 and p99 in
sampled mode beside --all's, ABBA runs, with each mode's run-to-run spread.

One `memcached -t 1` (xprobes build, agent preloaded) under one continuous
memaslap load (-T 1 -c 32), windows in ABBA order with mclat attached (B:
the real CLI, BPF programs and modules/mclat.so, started before and stopped
after each B window, outside the measured interval) and not (A), through
bench/memcached_paired.py's measure().  Reports the median paired change in
throughput and in memcached's CPU time per operation, and the BPF
programs' own run time per request from the kernel's BPF statistics
(kernel.bpf_stats_enabled, on for the whole run: it adds two clock reads
to every program run, so the figures are upper bounds): part of that runs in the client's context
(loopback delivers a request in the sender's softirq), where memcached's
CPU time does not see it.  Adds a "mclat" section to bench/results.json.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import shutil
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import memcached as mcb  # noqa: E402
import memcached_paired as paired  # noqa: E402

# The syscall boundaries' programs are the ev_* ones (syscalls:* trace
# events) or, without tracefs, on_enter/on_exit: whichever mclat loaded.
PROGS = ("on_rx", "on_tcp", "on_ready", "ev_read", "ev_readv", "ev_recvfrom", "ev_recvmsg",
         "ev_epoll_wait", "ev_epoll_pwait", "ev_epoll_pwait2", "on_enter", "on_exit",
         "on_recv", "on_send", "on_xmit")
BPF_STATS = "/proc/sys/kernel/bpf_stats_enabled"


def bpf_run_time():
    """{program: (run_time_ns, run_cnt)} of mclat's programs now loaded."""
    r = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True)
    out = {}
    for p in json.loads(r.stdout or "[]"):
        if p.get("name") in PROGS:
            out[p["name"]] = (p.get("run_time_ns", 0), p.get("run_cnt", 0))
    return out


class MclatToggle:
    label = "mclat (sampled, the default)"
    variant = "xprobes"
    args = []

    def __init__(self, build_dir, pid, control):
        self.build_dir, self.pid, self.control = build_dir, pid, control
        self.proc = None
        self.batches = 0
        self.seconds = 0.0
        self.attach_us = []
        self.sampled = []  # each interval's sampled_fraction (the batch budget shortens windows)
        self.bpf = {name: [0, 0] for name in PROGS}

    def _stop(self):
        # The programs' totals before they go away with mclat.
        for name, (ns, cnt) in bpf_run_time().items():
            self.bpf[name][0] += ns
            self.bpf[name][1] += cnt
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        self.out.seek(0)
        for line in self.out:
            obj = json.loads(line)
            self.batches += obj.get("count", 0)
            self.seconds += obj.get("interval_s", 0)
            if obj.get("attach_us") is not None:
                self.attach_us.append(obj["attach_us"])
            if obj.get("count"):
                self.sampled.append(obj["sampled_fraction"])
        self.out.close()
        self.proc = None

    def set(self, attached):
        if self.proc:
            self._stop()
        if attached and not self.control:
            self.out = tempfile.TemporaryFile(mode="w+")
            self.proc = subprocess.Popen(
                [os.path.join(self.build_dir, "mclat"), "-p", str(self.pid), *self.args,
                 "--json", "1"],
                stdout=self.out, stderr=subprocess.PIPE, text=True)
            for line in self.proc.stderr:  # until it says it is tracing
                if line.startswith("mclat: tracing"):
                    break
            else:
                sys.exit("bench/mclat_bench.py: mclat did not start")
            if "with BPF" not in line and "--no-bpf" not in self.args:
                sys.exit("bench/mclat_bench.py: mclat could not load its BPF programs")

    def close(self):
        self.set(False)
        return self.batches


class MclatAllToggle(MclatToggle):
    label = "mclat --all"
    args = ["--all"]


class MclatNoBpfToggle(MclatToggle):
    """The user-space side alone, sampled: the probe sites, the module
    recording in windows, the agent answering mclat's polls."""
    label = "mclat --no-bpf (sampled)"
    args = ["--no-bpf"]


class MclatNoBpfAllToggle(MclatToggle):
    label = "mclat --no-bpf --all"
    args = ["--no-bpf", "--all"]


class BpftraceStagesToggle:
    """Window B: bpftrace running bench/mclat_stages.bt (every stage of
    mclat's, the memcached one by USDT), started before and stopped after
    each B window."""
    label = "bpftrace (bench/mclat_stages.bt)"
    variant = "xprobes"

    def __init__(self, build_dir, pid, control):
        self.pid, self.control, self.proc, self.reads = pid, control, None, 0
        self.port = None

    def set(self, attached):
        if self.proc:
            mcb.interrupt_bpftrace(self.proc)
            self.out.seek(0)
            for line in self.out:
                if line.startswith(b"@reads: "):
                    self.reads += int(line.split()[1])
            self.out.close()
            self.proc = None
        if attached and not self.control:
            if self.port is None:
                self.port = listen_port(self.pid)
            with open(os.path.join(HERE, "mclat_stages.bt")) as f:
                script = (f.read().replace("@PID@", str(self.pid))
                          .replace("@PORT@", str(self.port))
                          .replace("@BIN@", os.readlink("/proc/%d/exe" % self.pid)))
            self.out = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(["bpftrace", "-e", script], stdout=self.out,
                                         stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while True:  # until the probes are attached
                self.out.seek(0)
                if b"armed" in self.out.read():
                    break
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    sys.exit("bench/mclat_bench.py: bpftrace did not attach")
                time.sleep(0.02)  # a poll interval

    def close(self):
        self.set(False)
        return self.reads


class FloorToggle:
    """Window B: programs that do nothing on every hook mclat uses
    (bench/bpf_floor.bpf.c), attached before and detached after each B
    window: what running a BPF program at those points costs, before any
    of mclat's work."""
    label = "empty programs on mclat's hooks"
    variant = "xprobes"

    def __init__(self, build_dir, pid, control):
        self.build_dir, self.control, self.proc = build_dir, control, None

    def set(self, attached):
        if self.proc:
            self.proc.send_signal(signal.SIGINT)
            if self.proc.wait(timeout=30) != 0:
                sys.exit("bench/mclat_bench.py: bpf_floor failed")
            self.proc = None
        if attached and not self.control:
            bench = os.path.join(self.build_dir, "bench")
            self.proc = subprocess.Popen([os.path.join(bench, "bpf_floor"),
                                          os.path.join(bench, "bpf_floor.bpf.o")],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = self.proc.stdout.readline()  # blocks until attached or failed
            if not line.startswith("armed"):
                sys.exit("bench/mclat_bench.py: bpf_floor did not attach: " +
                         self.proc.stderr.read())

    def close(self):
        self.set(False)
        return 0


def print_comparison(what, res, pairs):
    """A measure() result against mclat's: its throughput and CPU changes."""
    print("%s, median of %d paired windows:" % (what, pairs))
    print("  throughput     %+6.2f%% [%+.2f, %+.2f]"
          % (res["throughput_change_pct"], *res["throughput_change_ci95"]))
    print("  memcached CPU  %+6.2f%% per op, %+.0f ns per request"
          % (res["cpu_per_op_change_pct"],
             res["attached_cpu_ns_per_op"] - res["detached_cpu_ns_per_op"]))


def listen_port(pid):
    """memcached's port, from its command line (bench/memcached.py passes -p)."""
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        argv = f.read().split(b"\0")
    return int(argv[argv.index(b"-p") + 1])


def tracefs_mounted():
    with open("/proc/mounts") as f:
        return any(line.split()[2] == "tracefs" for line in f)


def mclat_run(build_dir, pid, args, seconds):
    """One mclat run of SECONDS 1 s intervals: each stage's p50 and p99
    (us), the median over the intervals that measured it."""
    r = subprocess.run([os.path.join(build_dir, "mclat"), "-p", str(pid), *args, "--json", "1",
                        str(seconds)], capture_output=True, text=True, timeout=seconds + 120)
    if r.returncode != 0:
        sys.exit("bench/mclat_bench.py: mclat failed: " + r.stderr)
    per = {}
    for obj in map(json.loads, r.stdout.splitlines()[1:]):  # the first starts mid-way
        for stage, st in obj["stages"].items():
            if st["count"]:
                per.setdefault(stage, {"p50_us": [], "p99_us": [], "count": 0})
                per[stage]["p50_us"].append(st["p50_us"])
                per[stage]["p99_us"].append(st["p99_us"])
                per[stage]["count"] += st["count"]
    return {stage: {"p50_us": statistics.median(v["p50_us"]),
                    "p99_us": statistics.median(v["p99_us"]), "count": v["count"]}
            for stage, v in per.items()}


def compare_stages(build_dir, runs, seconds, rate):
    """Sampled against --all on one memcached under a steady open-loop
    mcload (RATE requests/s), runs in ABBA order: per stage and mode the
    median over runs of each run's p50 and p99, and their range (the
    run-to-run spread)."""
    binary = mcb.build("xprobes", build_dir)
    port = mcb.free_port()
    mc = mcb.spawn(binary, port, build_dir)
    load = None
    try:
        mcb.wait_listening(mc, port)
        load = subprocess.Popen([*mcb.PIN_CLIENT, os.path.join(build_dir, "mcload"), "-s",
                                 "127.0.0.1:%d" % port, "-R", str(rate), "-c", "4", "-d",
                                 str(runs * 2 * (seconds + 15) + 60)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        modes = {"sampled": [], "all": ["--all"]}
        got = {m: [] for m in modes}
        for i in range(runs):
            order = ("sampled", "all") if i % 2 == 0 else ("all", "sampled")
            for m in order:
                got[m].append(mclat_run(build_dir, mc.pid, modes[m], seconds))
    finally:
        mcb.teardown(load, mc)
    out = {"rate_per_s": rate, "runs": runs, "seconds_per_run": seconds, "stages": {}}
    for stage in ["rx", "tcpip_rx", "epoll", "wait", "read", "memcached", "tx", "total"]:
        row = {}
        for m in modes:
            vals = [r[stage] for r in got[m] if stage in r]
            if not vals:
                continue
            for q in ("p50_us", "p99_us"):
                xs = [v[q] for v in vals]
                row[m + "_" + q] = statistics.median(xs)
                row[m + "_" + q + "_range"] = [min(xs), max(xs)]
            row[m + "_count"] = sum(v["count"] for v in vals)
        out["stages"][stage] = row
    return out


def print_stages(c):
    print("sampled vs --all, mcload -R %d, %d runs each of %d s (ABBA): median of runs "
          "[run-to-run range], us" % (c["rate_per_s"], c["runs"], c["seconds_per_run"]))
    print("  %-10s %-24s %-24s %-24s %-24s" % ("stage", "p50 sampled", "p50 --all",
                                               "p99 sampled", "p99 --all"))
    for stage, row in c["stages"].items():
        cells = []
        for q in ("p50_us", "p99_us"):
            for m in ("sampled", "all"):
                if m + "_" + q in row:
                    lo, hi = row[m + "_" + q + "_range"]
                    cells.append("%7.1f [%6.1f, %6.1f]" % (row[m + "_" + q], lo, hi))
                else:
                    cells.append("-")
        print("  %-10s %-24s %-24s %-24s %-24s" % (stage, *cells))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(mcb.ROOT, "build"))
    ap.add_argument("--pairs", type=int, default=20, help="ABBA pairs for sampled mclat")
    ap.add_argument("--all-pairs", type=int, default=10, help="ABBA pairs for mclat --all")
    ap.add_argument("--no-bpf-pairs", type=int, default=8,
                    help="ABBA pairs for --no-bpf, sampled and --all (0: skip)")
    ap.add_argument("--compare-runs", type=int, default=4,
                    help="runs of each mode for the stage comparison (0: skip)")
    ap.add_argument("--compare-seconds", type=int, default=6)
    ap.add_argument("--compare-rate", type=int, default=5000,
                    help="mcload requests/s (the loaded 2-core VM queued at 20000)")
    ap.add_argument("--bpftrace-pairs", type=int, default=10,
                    help="ABBA pairs for bpftrace on the stages it can measure (0: skip)")
    ap.add_argument("--floor-pairs", type=int, default=10,
                    help="ABBA pairs for empty programs on mclat's hooks (0: skip)")
    ap.add_argument("--window", type=float, default=2.0, help="seconds per window")
    ap.add_argument("--control", action="store_true", help="A/A: mclat never attached")
    ap.add_argument("--out", default=os.path.join(mcb.ROOT, "bench", "results.json"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/mclat_bench.py: mclat's BPF programs need root")
    build_dir = os.path.abspath(a.build)
    if mcb.PIN_CLIENT:
        os.sched_setaffinity(0, {0})  # this script, mclat and its polls off the server's CPU
    with open(BPF_STATS) as f:
        stats_before = f.read().strip()
    with open(BPF_STATS, "w") as f:
        f.write("1")
    try:
        holder = {}

        class Toggle(MclatToggle):
            def __init__(self, *args):
                super().__init__(*args)
                holder["t"] = self

        res = paired.measure(Toggle, build_dir, a.pairs, a.window, a.control)
        full = None
        if a.all_pairs > 0:
            full = paired.measure(MclatAllToggle, build_dir, a.all_pairs, a.window, a.control)
            res["all"] = full
        nobpf = {}
        if a.no_bpf_pairs > 0:
            for key, cls in (("no_bpf_sampled", MclatNoBpfToggle),
                             ("no_bpf_all", MclatNoBpfAllToggle)):
                nobpf[cls.label] = res[key] = paired.measure(cls, build_dir, a.no_bpf_pairs,
                                                             a.window, a.control)
    finally:
        with open(BPF_STATS, "w") as f:
            f.write(stats_before)
    t = holder["t"]
    bpftrace = floor = None
    # The floor's syscalls:* programs and bpftrace's tracepoint probes need
    # tracefs, which is not mounted here by default: mounted for the run,
    # unmounted again.
    mounted = not tracefs_mounted()
    if mounted:
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], check=True)
    try:
        if a.floor_pairs > 0:
            floor = paired.measure(FloorToggle, build_dir, a.floor_pairs, a.window, a.control)
            res["empty_programs_floor"] = floor
        if a.bpftrace_pairs > 0 and shutil.which("bpftrace"):
            bpftrace = paired.measure(BpftraceStagesToggle, build_dir, a.bpftrace_pairs,
                                      a.window, a.control)
            res["bpftrace_stages"] = bpftrace
    finally:
        if mounted:
            subprocess.run(["umount", "/sys/kernel/tracing"])
    res["mode"] = "sampled (default, --sample 5%)"
    res["measured_requests_per_s"] = t.batches / t.seconds if t.seconds else 0
    res["attach_us_median"] = statistics.median(t.attach_us) if t.attach_us else None
    res["sampled_fraction_median"] = statistics.median(t.sampled) if t.sampled else None
    compare = None
    if a.compare_runs > 0:
        compare = compare_stages(build_dir, a.compare_runs, a.compare_seconds, a.compare_rate)
        res["sampled_vs_all_stages"] = compare
    batches = max(res["probe_hits_counted"], 1)
    bpf_ns = sum(ns for ns, _ in t.bpf.values())
    res["bpf_ns_per_request"] = bpf_ns / batches
    res["bpf_programs"] = {n: {"run_time_ns": ns, "run_cnt": cnt,
                               "ns_per_run": ns / cnt if cnt else 0}
                           for n, (ns, cnt) in t.bpf.items()}
    res["memcached_cpu_ns_per_request_added"] = (res["attached_cpu_ns_per_op"] -
                                                 res["detached_cpu_ns_per_op"])
    print("mclat (sampled) attached vs not, median of %d paired windows [bootstrap 95%%]:"
          % a.pairs)
    print("  throughput     %+6.2f%% [%+.2f, %+.2f]  (goal: no worse than -5%%)"
          % (res["throughput_change_pct"], *res["throughput_change_ci95"]))
    print("  memcached CPU  %+6.2f%% per op [%+.2f, %+.2f], %+.0f ns per request"
          % (res["cpu_per_op_change_pct"], *res.get("cpu_per_op_change_ci95", (0, 0)),
             res["memcached_cpu_ns_per_request_added"]))
    print("  measured       %.0f requests/s (goal: >= 1000), attaching %.0f us a window, "
          "%.1f%% of the time in windows"
          % (res["measured_requests_per_s"], res["attach_us_median"] or 0,
             100 * (res["sampled_fraction_median"] or 0)))
    if full:
        print_comparison("mclat --all", full, a.all_pairs)
    for label, r in nobpf.items():
        print_comparison(label, r, a.no_bpf_pairs)
    print("  BPF programs   %.0f ns per request (all contexts), of which:" % res["bpf_ns_per_request"])
    for n, p in res["bpf_programs"].items():
        if not p["run_cnt"]:
            continue
        print("    %-9s %10d runs %7.0f ns/run" % (n, p["run_cnt"], p["ns_per_run"]))
    if floor:
        print_comparison("the floor: programs that do nothing on the same hooks", floor,
                         a.floor_pairs)
    if bpftrace:
        print_comparison("bpftrace running bench/mclat_stages.bt", bpftrace, a.bpftrace_pairs)
    if compare:
        print_stages(compare)
    try:
        with open(a.out) as f:
            results = json.load(f)
    except (OSError, ValueError):
        results = {}
    results["mclat"] = res
    with open(a.out, "w") as f:
        json.dump(results, f, indent=2)
    print("results in %s" % os.path.relpath(a.out, mcb.ROOT))


if __name__ == "__main__":
    main()
