#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mcload against memaslap (its goal: mcload drives at least as
many requests per second per core as memaslap).

Each run: a fresh Debian memcached -t 1 on CPU 1, the load generator on
CPU 0 with one thread and 32 connections, closed loop, the same workload
as memaslap's defaults (9:1 get:set, 64-byte keys, 1024-byte values,
every get a hit: mcload sets its 10,000 keys first, untimed, as memaslap
fills its own window).  Rounds interleave the two tools, alternating who
goes first.  Printed per tool, medians over the rounds:

  ops/s          requests answered per second of the run: at saturation
                 this is mostly the single memcached thread's ceiling
  ops/cpu-s      requests per second of the client's own CPU time (user +
                 system, from wait4): requests per second per core, the
                 figure the goal is about

Stdlib only.  Reuses bench/memcached.py's process helpers."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

import memcached as mb

SECONDS = 5
CONNS = 32
KEYS = 10000
PREFIX = "k" * (64 - len(str(KEYS - 1)))   # 64-byte keys, as memaslap's


def client(argv, seconds):
    """Run ARGV; (stdout, CPU seconds it used)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=seconds + 120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        sys.exit("bench: %s hung" % argv[0])
    # communicate() has reaped it; its rusage went to our children's total.
    return out, err, p.returncode


def children_cpu():
    t = os.times()
    return t.children_user + t.children_system


def run_tool(tool, mcload, port, seconds):
    """(ops/s, ops per client CPU second) of one timed run."""
    if tool == "memaslap":
        argv = mb.memaslap_argv(port, seconds)
    else:
        # Fill every key first (untimed), so gets hit as memaslap's do.
        out, err, rc = client([mcload, "-s", "127.0.0.1:%d" % port, "-k", str(KEYS),
                               "--key-prefix", PREFIX, "-v", "1024", "-r", "0:1",
                               "-n", str(KEYS * 6), "-c", str(CONNS)], seconds)
        if rc != 0:
            sys.exit("bench: mcload preload failed: " + out + err)
        argv = [*mb.PIN_CLIENT, mcload, "-s", "127.0.0.1:%d" % port, "-T", "1",
                "-c", str(CONNS), "-d", str(seconds), "-k", str(KEYS), "--key-prefix", PREFIX,
                "-v", "1024", "-r", "9:1", "--json"]
    cpu0 = children_cpu()
    out, err, rc = client(argv, seconds)
    cpu = children_cpu() - cpu0
    if tool == "memaslap":
        res = mb.memaslap_result(out)
        if res is None:
            sys.exit("bench: cannot read memaslap's output:\n" + out + err)
        tps, ops = res
    else:
        if rc != 0:
            sys.exit("bench: mcload failed: " + out + err)
        r = json.loads(out)
        if r["misses"] > r["get_keys"] // 100:
            sys.exit("bench: mcload's gets missed %d times: the preload did not fill" % r["misses"])
        tps, ops = r["requests_per_sec"], r["completed"]
    return tps, ops / cpu


def one_round(tool, mcload, binary, seconds):
    port = mb.free_port()
    mc = mb.spawn(binary, port, threads=1)
    try:
        mb.wait_listening(mc, port)
        return run_tool(tool, mcload, port, seconds)
    finally:
        mc.kill()
        mc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(mb.ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=SECONDS)
    a = ap.parse_args()
    mcload = os.path.join(os.path.abspath(a.build), "mcload")
    binary = shutil.which("memcached")
    for need, what in ((binary, "memcached"), (shutil.which("memcaslap"), "memcaslap"),
                       (os.path.exists(mcload), mcload)):
        if not need:
            sys.exit("bench/mcload_vs_memaslap.py: %s is missing" % what)
    tools = ["memaslap", "mcload"]
    res = {t: [] for t in tools}
    print("memcached -t 1, one client thread, %d connections, closed loop, %d s per run, "
          "%d interleaved rounds%s" % (CONNS, a.seconds, a.rounds,
                                      ", server on CPU 1, client on CPU 0" if mb.PIN_SERVER else ""))
    for r in range(a.rounds):
        line = []
        for t in tools if r % 2 == 0 else tools[::-1]:
            tps, per_cpu = one_round(t, mcload, binary, a.seconds)
            res[t].append((tps, per_cpu))
            line.append("%s %.0f ops/s %.0f ops/cpu-s" % (t, tps, per_cpu))
        print("  round %d: %s" % (r + 1, ", ".join(line)), flush=True)
    print("\n%-9s %14s %16s" % ("tool", "median ops/s", "median ops/cpu-s"))
    med = {}
    for t in tools:
        med[t] = (statistics.median(x for x, _ in res[t]), statistics.median(y for _, y in res[t]))
        print("%-9s %14.0f %16.0f" % (t, *med[t]))
    print("\nmcload / memaslap: ops/s x%.2f, ops per client CPU second x%.2f"
          % (med["mcload"][0] / med["memaslap"][0], med["mcload"][1] / med["memaslap"][1]))


if __name__ == "__main__":
    main()
