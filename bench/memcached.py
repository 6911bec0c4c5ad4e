#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""memcached throughput with and without XProbes (benchmark).

Variants, each a fresh `memcached -t 1` driven by `memaslap -T 1 -c 32`
(the default 9:1 get/set mix) for a fixed time, rounds interleaved:

  plain      Debian's memcached source built without dtrace
  detached   built with xprobes-dtrace, agent preloaded, nothing attached
  attached   the same with bench/mod_mc_hits.so counting command__get/command__set
  bpftrace   built with the systemtap dtrace stub, bpftrace counting the
             same two probes through USDT

Prints a table of median ops/s and the cost relative to `plain`, and adds a
"memcached" section to bench/results.json.  Stdlib only.
"""
import argparse
import json
import collections
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Server and load generator on different CPUs: less run-to-run noise than
# letting them fight over both.
_taskset = shutil.which("taskset") if (os.cpu_count() or 1) >= 2 else None
PIN_SERVER = [_taskset, "-c", "1"] if _taskset else []
PIN_CLIENT = [_taskset, "-c", "0"] if _taskset else []
ROOT = os.path.dirname(HERE)


def build(variant, build_dir):
    args = [os.path.join(ROOT, "scripts", "build-memcached.sh"), variant]
    if variant == "xprobes":
        args.append(os.path.join(build_dir, "xprobes-dtrace"))
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("bench/memcached.py: cannot build memcached (%s): %s" % (variant, r.stderr))
    return r.stdout.strip()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_listening(proc, port):
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            sys.exit("bench/memcached.py: memcached exited early")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                sys.exit("bench/memcached.py: memcached never listened")
            os.sched_yield()


def xp(build_dir, *args):
    r = subprocess.run([os.path.join(build_dir, "xprobes"), *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit("bench/memcached.py: xprobes %s failed: %s" % (" ".join(map(str, args)), r.stderr))
    return r.stdout


def interrupt_bpftrace(proc, tries=10):
    """SIGINT until bpftrace exits (it prints its maps on the way out).
    bpftrace 0.17 now and then loses a SIGINT that arrives while it is in
    its event loop; a second one is harmless."""
    for _ in range(tries):
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=2)
            return
        except subprocess.TimeoutExpired:
            continue
    proc.kill()
    proc.wait()
    sys.exit("bench: bpftrace did not exit after %d SIGINTs" % tries)


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memaslap_argv(port, seconds, pin=PIN_CLIENT):
    """memaslap (Debian calls it memcaslap): one thread, 32 connections, the
    default 9:1 get/set mix, for `seconds`."""
    return [*pin, "memcaslap", "-s", "127.0.0.1:%d" % port, "-T", "1", "-c", "32",
            "-t", "%ds" % seconds]


def memaslap_result(text):
    """(ops/s, ops) from memaslap's last line, or None if it has none:
    "Run time: 3.0s Ops: 263980 TPS: 87968 Net_rate: 98.4M/s"."""
    for line in text.splitlines():
        if line.startswith("Run time:"):
            f = line.split()
            return int(f[f.index("TPS:") + 1]), int(f[f.index("Ops:") + 1])
    return None


def memaslap(port, seconds):
    r = subprocess.run(memaslap_argv(port, seconds), capture_output=True, text=True,
                       timeout=seconds + 60)
    res = memaslap_result(r.stdout)
    if res is None:
        sys.exit("bench/memcached.py: cannot read memaslap's output:\n" + r.stdout + r.stderr)
    return res


def perf_samples(data):
    """{"DSO  [.] SYMBOL": samples} from a perf.data file (perf report)."""
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "-F", "sample,dso,sym",
                          "--sort", "dso,sym"], capture_output=True, text=True).stdout
    out = collections.Counter()
    for line in rep.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].isdigit():
            out[parts[1].strip()] += int(parts[0])
    return out


def teardown(load, mc, tmp=None):
    """Kill the load generator and memcached (either may be None), wait
    for both, and remove the scratch directory TMP."""
    for proc in (load, mc):
        if proc:
            proc.kill()
            proc.wait()
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


def spawn(binary, port, agent_build=None, threads=1, pin=PIN_SERVER, extra=(), **popen):
    """memcached on 127.0.0.1:port (TCP only), with the agent of agent_build
    preloaded when given."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if agent_build:
        env["LD_PRELOAD"] = os.path.join(agent_build, "libxprobes.so")
    return subprocess.Popen([*pin, binary, "-u", "root", "-l", "127.0.0.1", "-p", str(port),
                             "-U", "0", "-t", str(threads), *extra], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen)


class Stats:
    """A persistent text-protocol connection for `stats`."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""

    def fields(self):
        """memcached's `stats`, as a dict of strings."""
        self.sock.sendall(b"stats\r\n")
        while not self.buf.endswith(b"END\r\n"):
            chunk = self.sock.recv(65536)
            if not chunk:
                sys.exit("bench: memcached closed the stats connection")
            self.buf += chunk
        fields = {}
        for line in self.buf.decode().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "STAT":
                fields[parts[1]] = parts[2]
        self.buf = b""
        return fields

    def ops(self):
        """GETs and SETs served so far."""
        f = self.fields()
        return int(f["cmd_get"]) + int(f["cmd_set"])


def run_one(variant, bins, build_dir, seconds):
    port = free_port()
    binary = bins["plain"] if variant == "plain" else bins["stap"] if variant == "bpftrace" else bins["xprobes"]
    mc = spawn(binary, port, build_dir if variant in ("detached", "attached") else None)
    bt = None
    counted = None
    try:
        wait_listening(mc, port)
        if variant == "attached":
            xp(build_dir, mc.pid, "load", os.path.join(build_dir, "bench", "mod_mc_hits.so"))
        if variant == "bpftrace":
            bt = subprocess.Popen(["bpftrace", "-p", str(mc.pid), "-e",
                                   'usdt:*:memcached:command__get { @g = count(); } '
                                   'usdt:*:memcached:command__set { @s = count(); } '
                                   'BEGIN { printf("armed\\n"); }'],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for line in bt.stdout:
                if "armed" in line:
                    break
        cpu0 = cpu_seconds(mc.pid)
        tps, ops = memaslap(port, seconds)
        cpu_us_per_op = (cpu_seconds(mc.pid) - cpu0) / ops * 1e6
        if variant == "attached":
            t = dict(l.split() for l in xp(build_dir, mc.pid, "command", "mod_mc_hits.so").splitlines())
            counted = int(t["get"]) + int(t["set"])
        if bt:
            interrupt_bpftrace(bt)
            out = bt.stdout.read()
            counted = sum(int(l.split(": ")[1]) for l in out.splitlines() if l.startswith("@"))
            bt = None
        return tps, ops, counted, cpu_us_per_op
    finally:
        if bt:
            bt.kill()
            bt.wait()
        mc.kill()
        mc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results.json"))
    a = ap.parse_args()
    build_dir = os.path.abspath(a.build)
    if shutil.which("memcaslap") is None:
        sys.exit("bench/memcached.py: memcaslap (libmemcached-tools) is not installed")
    bins = {v: build(v, build_dir) for v in ("plain", "xprobes", "stap")}
    variants = ["plain", "detached", "attached"]
    skipped = None
    if shutil.which("bpftrace") is None or os.geteuid() != 0:
        skipped = "bpftrace needs root and the bpftrace package"
    else:
        variants.append("bpftrace")
    samples = {v: [] for v in variants}
    cpu = {v: [] for v in variants}
    counts = {v: [] for v in variants}
    print("memcached -t 1, memaslap -T 1 -c 32, %d s per run, %d interleaved rounds%s"
          % (a.seconds, a.rounds, ", server on CPU 1, client on CPU 0" if PIN_SERVER else ""))
    for r in range(a.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        line = []
        for v in order:
            tps, ops, counted, cpu_op = run_one(v, bins, build_dir, a.seconds)
            samples[v].append(tps)
            cpu[v].append(cpu_op)
            if counted is not None:
                counts[v].append((ops, counted))
            line.append("%s=%d" % (v, tps))
        print("  round %d: %s" % (r + 1, " ".join(line)), flush=True)

    base = statistics.median(samples["plain"])
    rows = []
    base_cpu = statistics.median(cpu["plain"])
    print("\n%-10s %12s %10s %10s %10s %14s %16s" % ("variant", "median ops/s", "min", "max",
                                                    "vs plain", "cpu us/op", "cpu vs plain"))
    for v in variants:
        med = statistics.median(samples[v])
        cost = (base - med) / base * 100
        mcpu = statistics.median(cpu[v])
        cpu_cost = (mcpu - base_cpu) / base_cpu * 100
        rows.append({"variant": v, "median_tps": med, "min": min(samples[v]),
                     "max": max(samples[v]), "cost_pct_vs_plain": cost, "samples": samples[v],
                     "cpu_us_per_op": mcpu, "cpu_cost_pct_vs_plain": cpu_cost,
                     "cpu_samples": cpu[v], "ops_and_probe_hits": counts[v]})
        print("%-10s %12d %10d %10d %+9.1f%% %14.2f %+15.1f%%" % (
            v, med, min(samples[v]), max(samples[v]), -cost, mcpu, cpu_cost))
    print("(cpu us/op: memcached's own user+system CPU time per operation, which a busy\n"
          " load generator on the same 2 cores disturbs less than ops/s)")
    if skipped:
        print("%-10s skipped: %s" % ("bpftrace", skipped))
    spread = max((max(samples[v]) - min(samples[v])) / statistics.median(samples[v]) * 100
                 for v in variants)
    print("\nnoise: the widest min-max spread of a variant is %.1f%% of its median" % spread)
    for v in ("attached", "bpftrace"):
        if counts.get(v):
            ops, hits = counts[v][-1]
            print("check: %s counted %d probe hits for %d memaslap ops in its last run" % (v, hits, ops))

    try:
        with open(a.out) as f:
            results = json.load(f)
    except (OSError, ValueError):
        results = {}
    results["memcached"] = {"rounds": a.rounds, "seconds": a.seconds, "variants": rows,
                            "noise_pct": spread, "bpftrace_skipped": skipped}
    with open(a.out, "w") as f:
        json.dump(results, f, indent=2)
    print("results in %s" % os.path.relpath(a.out, ROOT))


if __name__ == "__main__":
    main()
