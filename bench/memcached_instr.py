#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Instructions per memcached request, with and without XProbes, under callgrind.

Throughput on a 2-vCPU VM moves by tens of percent between runs and by a few
percent between adjacent windows of one run (bench/memcached.py,
bench/memcached_paired.py), so neither can tell 0.1% from 1%.  Instruction
counts can: callgrind counts every user-space instruction exactly, and a
request's path through memcached is the same every time.

Each variant is run twice under `valgrind --tool=callgrind
--separate-threads=yes`, once serving N and once 2N request pairs (a SET
then a GET of the same key, one at a time on one connection).  The
difference between the two runs, divided by N, is the cost of one pair with
start-up, module loading and shutdown cancelled out.  The worker thread is
the thread whose count grows with N; background threads (LRU maintainer,
logger, clock) wake on timers and are reported separately.

  plain     Debian's memcached built without dtrace
  sdt       built with the systemtap dtrace stub (sys/sdt.h nops), no tracer
  detached  built with xprobes-dtrace, agent preloaded, nothing attached
  attached  the same with bench/mod_mc_hits.so counting command__get/set

Kernel time is invisible to callgrind, so the relative figure is the share
of memcached's user-space instructions; the share of its total CPU time
(user + system) is smaller.  Adds "memcached_instructions" to
bench/results.json.  Stdlib only.
"""
import argparse
import glob
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import memcached as mcb  # noqa: E402  (shares build and process helpers)


def valgrind_fd_reserve():
    """How many descriptors valgrind keeps for itself below the soft limit.

    memcached sets RLIMIT_NOFILE to exactly its -c value, and valgrind only
    allows a hard limit equal to its own view of the limit; so -c must be
    that view."""
    r = subprocess.run(["valgrind", "-q", "sh", "-c", "ulimit -n"], capture_output=True, text=True)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft - int(r.stdout.strip())


def drive(port, pairs):
    """`pairs` SET+GET round trips on one connection; checks every reply."""
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    f = s.makefile("rb")
    for i in range(pairs):
        s.sendall(b"set key:%06d 0 0 10\r\nvalue%05d\r\n" % (i, i % 100000))
        if f.readline() != b"STORED\r\n":
            sys.exit("bench/memcached_instr.py: SET not stored")
        s.sendall(b"get key:%06d\r\n" % i)
        if not f.readline().startswith(b"VALUE "):
            sys.exit("bench/memcached_instr.py: GET missed")
        f.readline()
        if f.readline() != b"END\r\n":
            sys.exit("bench/memcached_instr.py: bad GET reply")
    s.close()


def run(variant, binary, build_dir, pairs, maxconns):
    """Per-thread instruction counts of one memcached run under callgrind."""
    out = tempfile.mkdtemp(prefix="xprobes-cg-")
    port = mcb.free_port()
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if variant in ("detached", "attached"):
        env["LD_PRELOAD"] = os.path.join(build_dir, "libxprobes.so")
    mc = subprocess.Popen(["valgrind", "-q", "--tool=callgrind", "--separate-threads=yes",
                           "--callgrind-out-file=%s/cg" % out, binary, "-u", "root", "-l", "127.0.0.1",
                           "-p", str(port), "-U", "0", "-t", "1", "-c", str(maxconns)],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        mcb.wait_listening(mc, port)
        hits = None
        if variant == "attached":
            mcb.xp(build_dir, mc.pid, "load", os.path.join(build_dir, "bench", "mod_mc_hits.so"))
        drive(port, pairs)
        if variant == "attached":
            t = dict(line.split() for line in
                     mcb.xp(build_dir, mc.pid, "command", "mod_mc_hits.so").splitlines())
            hits = int(t["get"]) + int(t["set"])
            if hits != 2 * pairs:
                sys.exit("bench/memcached_instr.py: module counted %d hits for %d requests"
                         % (hits, 2 * pairs))
        mc.send_signal(signal.SIGTERM)  # memcached exits cleanly; callgrind writes its files
        _, err = mc.communicate(timeout=120)
        counts = {}
        for path in glob.glob(os.path.join(out, "cg-*")):
            with open(path) as fh:
                for line in fh:
                    if line.startswith("summary:"):
                        counts[int(path.rsplit("-", 1)[1])] = int(line.split()[1])
        if not counts:
            sys.exit("bench/memcached_instr.py: callgrind wrote nothing:\n" + err)
        return counts
    finally:
        if mc.poll() is None:
            mc.kill()
            mc.wait()
        shutil.rmtree(out, ignore_errors=True)


def user_share(binary, build_dir, seconds=3):
    """Share of memcached's CPU time spent in user space under memaslap
    (the detached xprobes build, as in bench/memcached.py): callgrind sees
    only that share."""
    port = mcb.free_port()
    env = dict(os.environ, LD_PRELOAD=os.path.join(build_dir, "libxprobes.so"))
    mc = subprocess.Popen([*mcb.PIN_SERVER, binary, "-u", "root", "-l", "127.0.0.1", "-p", str(port),
                           "-U", "0", "-t", "1"], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        mcb.wait_listening(mc, port)

        def ticks():
            with open("/proc/%d/stat" % mc.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]), int(fields[12])
        u0, s0 = ticks()
        mcb.memaslap(port, seconds)
        u1, s1 = ticks()
        return (u1 - u0) / max(1, (u1 - u0) + (s1 - s0))
    finally:
        mc.kill()
        mc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(mcb.ROOT, "build"))
    ap.add_argument("--pairs", type=int, default=2000, help="N: request pairs in the short run")
    ap.add_argument("--out", default=os.path.join(mcb.ROOT, "bench", "results.json"))
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench/memcached_instr.py: valgrind is not installed")
    build_dir = os.path.abspath(a.build)
    bins = {v: mcb.build(v, build_dir) for v in ("plain", "stap", "xprobes")}
    maxconns = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - valgrind_fd_reserve()
    n = a.pairs
    print("memcached -t 1 under callgrind: instructions per SET+GET pair, from runs of %d and %d pairs"
          % (n, 2 * n))
    rows = {}
    for v in ("plain", "sdt", "detached", "attached"):
        binary = bins[{"plain": "plain", "sdt": "stap"}.get(v, "xprobes")]
        short = run(v, binary, build_dir, n, maxconns)
        long_ = run(v, binary, build_dir, 2 * n, maxconns)
        delta = {t: (long_.get(t, 0) - short.get(t, 0)) / n for t in set(short) | set(long_)}
        worker = max(delta, key=delta.get)
        rows[v] = {"worker_per_pair": delta[worker],
                   "all_threads_per_pair": sum(delta.values()),
                   "other_threads_per_pair": sum(d for t, d in delta.items() if t != worker)}
    base = rows["plain"]["worker_per_pair"]
    det = rows["detached"]["worker_per_pair"]
    print("\n%-10s %16s %12s %12s %18s" % ("variant", "worker instr/pair", "vs plain", "vs detached",
                                          "other threads/pair"))
    for v, r in rows.items():
        r["vs_plain"] = r["worker_per_pair"] - base
        r["vs_plain_pct"] = r["vs_plain"] / base * 100
        r["vs_detached"] = r["worker_per_pair"] - det
        r["vs_detached_pct"] = r["vs_detached"] / det * 100
        print("%-10s %16.1f %+11.2f%% %+11.2f%% %18.1f" % (v, r["worker_per_pair"], r["vs_plain_pct"],
                                                           r["vs_detached_pct"],
                                                           r["other_threads_per_pair"]))
    att = rows["attached"]
    print("\nattaching the counting probe adds %.1f instructions per SET+GET pair (2 probe hits), "
          "%.3f%% of the worker thread's user-space instructions" % (att["vs_detached"],
                                                                    att["vs_detached_pct"]))
    share = user_share(bins["xprobes"], build_dir) if shutil.which("memcaslap") else None
    if share is not None:
        print("under memaslap, user space is %.1f%% of memcached's CPU time, so at the same cost per\n"
              "instruction the counting probe costs about %.2f%% of its CPU time per request"
              % (share * 100, att["vs_detached_pct"] * share))
    try:
        with open(a.out) as f:
            results = json.load(f)
    except (OSError, ValueError):
        results = {}
    results["memcached_instructions"] = {"pairs": [n, 2 * n], "variants": rows, "user_share": share,
                                         "attached_cpu_estimate_pct":
                                             att["vs_detached_pct"] * share if share else None}
    with open(a.out, "w") as f:
        json.dump(results, f, indent=2)
    print("results in %s" % os.path.relpath(a.out, mcb.ROOT))


if __name__ == "__main__":
    main()
