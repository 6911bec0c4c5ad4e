#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What watching memcached's hot keys costs, mctop against bpftrace.

Throughput: one memcached (the xprobes-dtrace build, agent preloaded) under
one continuous mcload load at saturation: closed loop, one thread, 32
connections, Zipf(0.99) popularity over 1,000,000 keys, 9 gets to 1 set.
Windows of a few seconds alternate between nothing attached (A) and a tool
attached (B) in ABBA order, so drift in this shared 2-vCPU machine's speed
cancels in each pair; the pairs of the two tools are interleaved, so both
see the same drift.  Per window: operations (memcached's own cmd_get +
cmd_set over the window, read over a separate connection) and memcached's
CPU time per operation (its threads' schedstat run time).  Reported: the
median paired difference with a bootstrap 95% interval, as
bench/memcached_paired.py does (whose helpers this imports).

Why `memcached -t 1` on CPU 1 and mcload (and every other process of ours)
on CPU 0: with two cores, saturation means memcached's core is busy and the
load generator's is not the bottleneck.  One worker thread per core is
memcached's own advice; -t 2 on one core only adds switches between two
workers, and -t 2 over both cores would share a core with mcload, so that a
tool's cost would be hidden in (or blamed on) the load generator's
slowdown.  On CPU 1 run memcached's worker, the agent's thread answering
mctop, and the kernel's uprobe handling of bpftrace's probes: every cost of
watching lands on the core whose throughput is measured.

The tools:
  mctop     the real CLI, `mctop -p PID --json 1`, polling the module once a
            second as someone watching would.  modules/mctop.so (default
            8 MiB budget) is loaded once, enabled for a warm-up so its
            tables fill (1M keys overflow them: evictions, the steady state
            of a long watch), then enabled only in B windows, with the CLI
            started before each B window (after its first line: attached
            and polling) and stopped after it; the CLI finds the module
            loaded and leaves it so.  A windows have the module disabled
            (every site detached, as if never attached) and no CLI.  Starting
            a fresh module per window would measure its first second of
            table growth, not what a watch costs.
  bpftrace  counting keys on the same USDT probes of the same process:
            @[str(key, keylen)] = count() on command__get and command__set,
            started before and stopped after each B window, outside it.  Its
            map has bpftrace's default size (the one-liner a user types);
            the trap per command, not the map, is its cost.

Top-100 recall: a fresh memcached (-t 2, both cores) with modules/mctop.so
loaded with its default budget, mcload Zipf(0.99) over 10,000,000 keys with
--truth, then `top 100 raw`: recall is the share of the module's top 100
whose true count is at least the true 100th largest count (ties at the
boundary are all "top 100"; recall_strict breaks ties by key).  Also the
module's bytes against its budget, memcached's RSS growth during the run,
the RSS unloading the module gives back, and memcached's own item memory.

Prints a table and writes the "mctop" section of bench/results.json.
Goals: mctop costs at most 2% of throughput and at most a fifth
of bpftrace's cost; recall at least 99%.  Stdlib only.
"""
import argparse
import heapq
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import memcached as mcb  # noqa: E402  (build, spawn, Stats, xp)
import memcached_paired as mcp  # noqa: E402  (cpu_ns, bootstrap_ci)

THREADS = 1
CONNECTIONS = 32
KEYS = 1000000
# This script pins itself to CPU 0, and children inherit that: the recall
# run asks for every CPU again.
ALL_CPUS = ([mcb._taskset, "-c", "0-%d" % (os.cpu_count() - 1)] if mcb.PIN_SERVER else [])


def die(msg):
    sys.exit("bench/mctop_bench.py: " + msg)


def wait_for_line(f, proc, what, timeout=60):
    """Until the file f (written by proc) holds a whole line."""
    deadline = time.monotonic() + timeout
    while True:
        f.seek(0)
        if b"\n" in f.read():
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            f.seek(0)
            die("%s never started: %r" % (what, f.read()[-500:]))
        time.sleep(0.02)  # polling the file


def stop(proc, what):
    """SIGINT, then wait: mctop finishes cleanly on it."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        die("%s did not stop on SIGINT" % what)


class Mctop:
    """B: modules/mctop.so enabled and `mctop -p PID --json 1` polling it."""
    label = "mctop"

    budget = None  # bytes; None: the module's default

    def __init__(self, build_dir, pid):
        self.build_dir, self.pid, self.proc = build_dir, pid, None
        self.top_keys = []  # the hottest key of each B window's last line
        mcb.xp(build_dir, pid, "load", os.path.join(build_dir, "modules", "mctop.so"))
        if self.budget:
            mcb.xp(build_dir, pid, "command", "mctop.so", "budget", str(self.budget))
        mcb.xp(build_dir, pid, "disable", "mctop.so")

    def warm_up(self, seconds):
        mcb.xp(self.build_dir, self.pid, "enable", "mctop.so")
        time.sleep(seconds)  # the tables filling under load, not a synchronisation
        mcb.xp(self.build_dir, self.pid, "disable", "mctop.so")

    def set(self, on):
        if self.proc and not on:
            rc = stop(self.proc, "mctop")
            self.out.seek(0)
            lines = self.out.read().splitlines()
            self.out.close()
            self.proc = None
            if rc != 0 or not lines:
                die("mctop exited %d after %d lines" % (rc, len(lines)))
            keys = json.loads(lines[-1])["keys"]
            self.top_keys.append(keys[0]["key"] if keys else None)
            mcb.xp(self.build_dir, self.pid, "disable", "mctop.so")
        elif on and not self.proc:
            mcb.xp(self.build_dir, self.pid, "enable", "mctop.so")
            self.out = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(
                [*mcb.PIN_CLIENT, os.path.join(self.build_dir, "mctop"), "-p", str(self.pid),
                 "--json", "1"], stdout=self.out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)
            wait_for_line(self.out, self.proc, "mctop")

    def close(self):
        self.set(False)
        mcb.xp(self.build_dir, self.pid, "unload", "mctop.so")
        return {"hottest_key_per_window": sorted(set(map(str, self.top_keys)))}


class Bpftrace:
    """B: bpftrace counting keys on command__get and command__set."""
    label = "bpftrace"
    PROGRAM = ('usdt:*:memcached:command__get, usdt:*:memcached:command__set '
               '{ @keys[str(arg1, arg2)] = count(); @hits = count(); } '
               'BEGIN { printf("armed\\n"); } '
               'END { clear(@keys); }')  # print only the total on exit

    def __init__(self, pid, map_keys):
        self.pid, self.proc, self.hits = pid, None, 0
        self.env = dict(os.environ)
        if map_keys:
            self.env["BPFTRACE_MAP_KEYS_MAX"] = str(map_keys)

    def set(self, on):
        if self.proc and not on:
            mcb.interrupt_bpftrace(self.proc)  # SIGINTs until it exits
            self.out.seek(0)
            # "@hits: N"; the rest is bpftrace's noise about detaching.
            self.hits += sum(int(line.split(b":")[1]) for line in self.out
                             if line.startswith(b"@hits:"))
            self.out.close()
            self.proc = None
        elif on and not self.proc:
            # A file, not a pipe: a half-read pipe once stalled bpftrace's exit.
            self.out = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(
                [*mcb.PIN_CLIENT, "bpftrace", "-p", str(self.pid), "-e", self.PROGRAM],
                stdout=self.out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                env=self.env)
            # BEGIN runs once every probe is attached.
            deadline = time.monotonic() + 60
            while True:
                self.out.seek(0)
                if b"armed" in self.out.read():
                    break
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    die("bpftrace did not attach")
                time.sleep(0.02)  # polling the file

    def close(self):
        self.set(False)
        return {"probe_hits_counted": self.hits}


FAST_WITHIN = 0.07  # a "fast" pair: its mean within 7% of the run's 90th percentile


def fast_phase(pairs):
    """This VM's throughput has two plateaus (~150,000 and ~120,000
    requests a second with nothing attached, for minutes at a time), and
    a pair whose windows straddle a change of plateau measures the change,
    not the tool.  The pairs that ran on the fast plateau: their count, the
    plateau's threshold, and their median throughput change and memcached
    CPU added per request (ns).  A pair is chosen by the mean of its two
    windows, not by its detached one alone: choosing pairs whose detached
    window was fast also chooses, by chance, attached windows slower than
    theirs (regression to the mean), which overstated the cost by 10 to 90
    ns in the runs of 2026-11-26 (docs/design.md, "Where the cost
    stands")."""
    means = sorted((a[0] + b[0]) / 2 for a, b in pairs)
    p90 = means[min(len(means) - 1, int(0.9 * len(means)))]
    fast = [(a, b) for a, b in pairs if (a[0] + b[0]) / 2 >= (1 - FAST_WITHIN) * p90]
    return {"pairs": len(fast), "threshold_ops_s": (1 - FAST_WITHIN) * p90,
            "throughput_change_pct": statistics.median((b[0] - a[0]) / a[0] * 100
                                                       for a, b in fast),
            "cpu_ns_per_op_added": statistics.median(b[1] - a[1] for a, b in fast)}


def summarise(pairs):
    """pairs: [((ops/s, ns/op, drainer ns/op) detached, (the same) attached)]."""
    tput = [(b[0] - a[0]) / a[0] * 100 for a, b in pairs]
    cpu = [(b[1] - a[1]) / a[1] * 100 for a, b in pairs]
    return {"pairs": len(pairs), "fast_phase": fast_phase(pairs),
            # The module's drainer thread: its CPU per request with mctop
            # attached, the steadiest part of the cost (bpftrace: none).
            "drainer_cpu_ns_per_op": statistics.median(b[2] for _, b in pairs),
            "detached_ops_s": statistics.median(a[0] for a, _ in pairs),
            "attached_ops_s": statistics.median(b[0] for _, b in pairs),
            "detached_cpu_ns_per_op": statistics.median(a[1] for a, _ in pairs),
            "attached_cpu_ns_per_op": statistics.median(b[1] for _, b in pairs),
            "throughput_change_pct": statistics.median(tput),
            "throughput_change_ci95": mcp.bootstrap_ci(tput),
            "cpu_per_op_change_pct": statistics.median(cpu),
            "cpu_per_op_change_ci95": mcp.bootstrap_ci(cpu),
            "paired_throughput_pct": tput, "paired_cpu_pct": cpu}


DRAINER = "mctop-drain"  # the module's drainer thread's name (modules/mctop.c)


def throughput(a, build_dir, binary, use_bpftrace):
    port = mcb.free_port()
    mc = mcb.spawn(binary, port, build_dir, threads=THREADS, extra=("-m", "1024"))
    load = None
    tools = []
    try:
        mcb.wait_listening(mc, port)
        tools.append(Mctop(build_dir, mc.pid))
        if use_bpftrace:
            tools.append(Bpftrace(mc.pid, a.bpftrace_map_keys))
        load = subprocess.Popen(
            [*mcb.PIN_CLIENT, os.path.join(build_dir, "mcload"), "-s", "127.0.0.1:%d" % port,
             "-T", "1", "-c", str(a.connections), "-z", "0.99", "-k", str(KEYS), "-r", "9:1",
             "-d", "86400"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL)
        stats = mcb.Stats(port)
        while stats.ops() < 10000:  # the load is really running
            if load.poll() is not None:
                die("mcload exited early")
            time.sleep(0.05)
        print("memcached -t %d (xprobes build, agent preloaded)%s; mcload -T 1 -c %d, "
              "Zipf(0.99) over %d keys, 9:1, closed loop" % (
                  THREADS, " on CPU 1, the rest on CPU 0" if mcb.PIN_SERVER else "",
                  a.connections, KEYS))
        print("warm-up %.0f s (the cache and mctop.so's tables fill); then ABBA pairs of "
              "%.1f s windows: mctop %d, bpftrace %d" % (
                  a.warmup, a.window, a.pairs, a.bpftrace_pairs if use_bpftrace else 0))
        tools[0].warm_up(a.warmup)
        results = {t.label: [] for t in tools}
        want = {"mctop": a.pairs, "bpftrace": a.bpftrace_pairs}
        for p in range(max(want[t.label] for t in tools)):
            for tool in tools:
                if p >= want[tool.label]:
                    continue
                window = {}
                for attached in ((False, True) if p % 2 == 0 else (True, False)):
                    tool.set(attached)
                    ops0, cpu0, t0 = stats.ops(), mcp.cpu_ns(mc.pid), time.monotonic()
                    dr0 = mcp.cpu_ns(mc.pid, DRAINER)
                    time.sleep(a.window)  # the measurement window itself
                    ops1, cpu1, t1 = stats.ops(), mcp.cpu_ns(mc.pid), time.monotonic()
                    dr1 = mcp.cpu_ns(mc.pid, DRAINER)
                    window[attached] = ((ops1 - ops0) / (t1 - t0), (cpu1 - cpu0) / (ops1 - ops0),
                                        (dr1 - dr0) / (ops1 - ops0))
                tool.set(False)
                results[tool.label].append((window[False], window[True]))
                print("  %-8s pair %2d: detached %7.0f ops/s %6.0f ns/op   attached %7.0f ops/s "
                      "%6.0f ns/op" % (tool.label, p + 1, *window[False][:2], *window[True][:2]),
                      flush=True)
        out = {}
        for tool in tools:
            out[tool.label] = dict(summarise(results[tool.label]), **tool.close())
            if tool.label != "mctop":  # the module idles, disabled, in its windows
                del out[tool.label]["drainer_cpu_ns_per_op"]
        tools = []
        return out
    finally:
        for tool in tools:
            if tool.proc:
                tool.proc.kill()
                tool.proc.wait()
        mcb.teardown(load, mc)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    die("no VmRSS for %d" % pid)


def slab_bytes(port):
    """memcached's slab memory: `stats slabs` total_malloced."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"stats slabs\r\n")
        buf = b""
        while not buf.endswith(b"END\r\n"):
            chunk = sock.recv(65536)
            if not chunk:
                die("memcached closed the stats connection")
            buf += chunk
    for line in buf.decode().splitlines():
        if line.startswith("STAT total_malloced "):
            return int(line.split()[2])
    die("no total_malloced in stats slabs")


def parse_raw(text):
    """`top N raw` (tools/mctop/mctop.h): (header dict, [(key, calls, err)])."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("mctop 1 ") or lines[-1] != "end":
        die("not the raw format: %r" % text[:200])
    head = {k: int(v) for k, v in (f.split("=") for f in lines[0].split()[2:])}
    rows = []
    for line in lines[1:-1]:
        f = line.split("\t")
        rows.append((f[0], int(f[1]), int(f[2])))
    return head, rows


def true_top(path, n, wanted):
    """From mcload's TSV truth: (the n largest true counts as [(count, key)],
    {key: true count} for the keys in wanted).  One pass, small memory."""
    heap, found = [], {}
    with open(path) as f:
        for line in f:
            key, gets, sets = line.rstrip("\n").split("\t")
            c = int(gets) + int(sets)
            if key in wanted:
                found[key] = c
            if len(heap) < n:
                heapq.heappush(heap, (c, key))
            elif c > heap[0][0]:
                heapq.heapreplace(heap, (c, key))
    return sorted(heap, key=lambda ck: (-ck[0], ck[1])), found


def recall(a, build_dir, binary, tmp):
    port = mcb.free_port()
    # Both cores: the two worker threads' tables are merged, the harder case.
    mc = mcb.spawn(binary, port, build_dir, threads=2, pin=ALL_CPUS, extra=("-m", "1024"))
    try:
        mcb.wait_listening(mc, port)
        rss0 = rss_kib(mc.pid)
        slabs0 = slab_bytes(port)
        mcb.xp(build_dir, mc.pid, "load", os.path.join(build_dir, "modules", "mctop.so"))
        if a.budget:
            mcb.xp(build_dir, mc.pid, "command", "mctop.so", "budget", str(a.budget))
        truth = os.path.join(tmp, "truth.tsv")
        print("\ntop-100 recall: memcached -t 2, mctop.so with its default budget, mcload -T 2 "
              "Zipf(0.99) over %d keys, %d requests" % (a.recall_keys, a.recall_requests),
              flush=True)
        t0 = time.monotonic()
        r = subprocess.run([*ALL_CPUS, os.path.join(build_dir, "mcload"), "-s", "127.0.0.1:%d" % port,
                            "-T", "2", "-c", "8", "-z", "0.99", "-k", str(a.recall_keys),
                            "-n", str(a.recall_requests), "--truth", truth, "--json"],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            die("mcload failed: " + r.stdout + r.stderr)
        load_s = time.monotonic() - t0
        rss1 = rss_kib(mc.pid)
        slabs = slab_bytes(port)
        head, rows = parse_raw(mcb.xp(build_dir, mc.pid, "command", "mctop.so", "top", "100",
                                      "raw"))
        mcb.xp(build_dir, mc.pid, "unload", "mctop.so")
        rss2 = rss_kib(mc.pid)
    finally:
        mc.kill()
        mc.wait()
    reported = [k for k, _, _ in rows]
    top, found = true_top(truth, 100, set(reported))
    floor = top[-1][0]  # the true 100th largest count
    hits = sum(1 for k in reported if found.get(k, 0) >= floor)
    strict = len(set(reported) & {k for _, k in top})
    within = sum(1 for k, calls, err in rows if calls - err <= found.get(k, 0) <= calls)
    return {"keys": a.recall_keys, "requests": a.recall_requests, "load_seconds": load_s,
            "module_total": head["total"], "reported": len(rows),
            "recall": hits / 100, "recall_strict": strict / 100,
            "within_bounds": within, "true_100th_count": floor,
            "tracked": head["tracked"], "bound": head["bound"],
            "module_bytes": head["bytes"], "budget": head["budget"],
            "within_budget": head["bytes"] <= head["budget"],
            "rss_before_kib": rss0, "rss_after_kib": rss1,
            "rss_growth_kib": rss1 - rss0, "rss_released_by_unload_kib": rss1 - rss2,
            "memcached_slab_growth_bytes": slabs - slabs0,
            # What the slabs do not explain: the module, memcached's hash
            # table growing with its items, and malloc's slack.
            "rss_growth_beyond_slabs_kib": rss1 - rss0 - (slabs - slabs0) // 1024}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(mcb.ROOT, "build"))
    ap.add_argument("--window", type=float, default=2.0, help="seconds per window (default 2)")
    ap.add_argument("--pairs", type=int, default=16, help="ABBA pairs for mctop (default 16)")
    ap.add_argument("--bpftrace-pairs", type=int, default=8,
                    help="ABBA pairs for bpftrace (default 8; 0: skip)")
    ap.add_argument("--bpftrace-map-keys", type=int, default=0,
                    help="BPFTRACE_MAP_KEYS_MAX for its key map (default: bpftrace's own)")
    ap.add_argument("--warmup", type=float, default=5.0,
                    help="seconds of load with mctop.so enabled before the windows (default 5)")
    ap.add_argument("--connections", type=int, default=CONNECTIONS,
                    help="mcload connections (default %d)" % CONNECTIONS)
    ap.add_argument("--budget", type=int, default=0,
                    help="mctop.so's budget in bytes for both runs (default: the module's)")
    ap.add_argument("--recall-keys", type=int, default=10000000)
    ap.add_argument("--recall-requests", type=int, default=5000000,
                    help="requests of the recall run (default 5,000,000; 0: skip)")
    ap.add_argument("--out", default=os.path.join(mcb.ROOT, "bench", "results.json"))
    a = ap.parse_args()
    if a.pairs < 1:
        ap.error("--pairs must be at least 1")
    Mctop.budget = a.budget or None
    build_dir = os.path.abspath(a.build)
    for f in ("mctop", "mcload", "xprobes", "modules/mctop.so"):
        if not os.path.exists(os.path.join(build_dir, f)):
            die("%s/%s is missing: make B=%s all" % (build_dir, f, a.build))
    skipped = None
    if a.bpftrace_pairs <= 0:
        skipped = "--bpftrace-pairs 0"
    elif shutil.which("bpftrace") is None or os.geteuid() != 0:
        skipped = "bpftrace needs root and the bpftrace package"
    if mcb.PIN_CLIENT:
        # This script, the stats reads and every `xprobes` call stay off
        # memcached's CPU: an unpinned toggle would steal the time measured.
        os.sched_setaffinity(0, {0})
    binary = mcb.build("xprobes", build_dir)

    tput = throughput(a, build_dir, binary, skipped is None)
    rec = None
    if a.recall_requests > 0:
        with tempfile.TemporaryDirectory(prefix="mctop-bench-") as tmp:
            rec = recall(a, build_dir, binary, tmp)

    m = tput["mctop"]
    mctop_cost = -m["throughput_change_pct"]
    print("\nattached vs detached in the same process, median of paired differences "
          "[bootstrap 95% interval]:")
    print("%-9s %5s %26s %26s %10s" % ("tool", "pairs", "throughput", "CPU per op",
                                       "cost"))
    for name, r in tput.items():
        if name in ("mctop", "bpftrace"):
            print("%-9s %5d %+8.2f%% [%+6.2f, %+6.2f] %+8.2f%% [%+6.2f, %+6.2f] %9.2f%%" % (
                name, r["pairs"], r["throughput_change_pct"], *r["throughput_change_ci95"],
                r["cpu_per_op_change_pct"], *r["cpu_per_op_change_ci95"],
                -r["throughput_change_pct"]))
    summary = {"mctop_cost_pct": mctop_cost, "goal_mctop_cost_pct": 2.0}
    print("mctop's cost: %.2f%% of throughput (goal: at most 2%%)" % mctop_cost)
    f = m["fast_phase"]
    print("  in its %d fast pairs (their mean %.0f ops/s or more): %+.2f%% of throughput, "
          "%+.0f ns of memcached CPU a request" % (
              f["pairs"], f["threshold_ops_s"], f["throughput_change_pct"],
              f["cpu_ns_per_op_added"]))
    print("  its drainer thread: %.0f ns of CPU a request (median of the attached windows)"
          % m["drainer_cpu_ns_per_op"])
    if skipped:
        print("bpftrace skipped: %s" % skipped)
    else:
        bt_cost = -tput["bpftrace"]["throughput_change_pct"]
        ratio = mctop_cost / bt_cost if bt_cost > 0 else None
        m_cpu, bt_cpu = m["cpu_per_op_change_pct"], tput["bpftrace"]["cpu_per_op_change_pct"]
        summary.update(bpftrace_cost_pct=bt_cost, mctop_over_bpftrace=ratio,
                       goal_mctop_over_bpftrace=0.2,
                       mctop_over_bpftrace_cpu=m_cpu / bt_cpu if bt_cpu > 0 else None)
        print("bpftrace's cost: %.2f%% of throughput; mctop/bpftrace: %s (goal: at most 0.2)"
              % (bt_cost, "%.3f" % ratio if ratio is not None else "n/a (bpftrace cost <= 0)"))
        if bt_cpu > 0:
            print("in CPU per operation: mctop %+.2f%%, bpftrace %+.2f%%, mctop/bpftrace %.3f"
                  % (m_cpu, bt_cpu, m_cpu / bt_cpu))
        print("check: bpftrace counted %d probe hits" % tput["bpftrace"]["probe_hits_counted"])
    print("check: mctop's hottest key in its B windows: %s"
          % ", ".join(m["hottest_key_per_window"]))
    if rec:
        summary.update(recall=rec["recall"], goal_recall=0.99)
        print("top-100 recall: %.2f (strict %.2f; goal at least 0.99); %d/%d reported counts "
              "within their bounds; module total %d for %d requests"
              % (rec["recall"], rec["recall_strict"], rec["within_bounds"], rec["reported"],
                 rec["module_total"], rec["requests"]))
        print("memory: module %.1f MiB of its %.1f MiB budget (%s); memcached's RSS grew "
              "%.1f MiB during the run, %.1f MiB beyond its slabs' growth; unloading the "
              "module gave back %.1f MiB" % (
                  rec["module_bytes"] / 2**20, rec["budget"] / 2**20,
                  "within" if rec["within_budget"] else "OVER", rec["rss_growth_kib"] / 1024,
                  rec["rss_growth_beyond_slabs_kib"] / 1024,
                  rec["rss_released_by_unload_kib"] / 1024))

    try:
        with open(a.out) as f:
            results = json.load(f)
    except (OSError, ValueError):
        results = {}
    results["mctop"] = {"window_s": a.window, "warmup_s": a.warmup, "threads": THREADS,
                        "connections": a.connections, "keys": KEYS, "summary": summary,
                        "throughput": tput, "recall": rec, "bpftrace_skipped": skipped}
    with open(a.out, "w") as f:
        json.dump(results, f, indent=2)
    print("results in %s" % os.path.relpath(a.out, mcb.ROOT))


if __name__ == "__main__":
    main()
