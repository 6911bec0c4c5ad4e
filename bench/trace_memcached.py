#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""memcached at saturation, every function traced and recorded.

    /usr/bin/python3 bench/trace_memcached.py [--build build] [--seconds 10] [--runs 3]

memcached built as `pkg-config xprobes-trace` builds a program
(scripts/build-memcached.sh traced BUILD), `-t 4`, driven by mcload (8
connections on 2 threads, closed loop: as fast as memcached answers).
Each run: mcload for SECONDS + 4 s; after 2 s, `xprobes PID trace record
-o DIR -d SECONDS` with the default options.  Printed per run: records
written, records per second sustained, records lost (the recorder's own
summary), and mcload's requests per second over the whole run.  Medians
over the runs go to the "trace_memcached" section of bench/results.json.
Stdlib only; safety timeouts only."""
import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_listening(proc, port):
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise SystemExit("bench: memcached exited at start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise SystemExit("bench: memcached never listened")
            time.sleep(0.01)  # polling for the listen, bounded


def one_run(mc_bin, build, seconds, tmp):
    port = free_port()
    mc = subprocess.Popen([mc_bin, "-u", "root", "-l", "127.0.0.1", "-p", str(port), "-U", "0",
                           "-t", "4"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(mc, port)
        load = subprocess.Popen([os.path.join(build, "mcload"), "-s", f"127.0.0.1:{port}",
                                 "-c", "8", "-T", "2", "-d", str(seconds + 4), "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)  # the load settles: a benchmark's pacing, not a synchronisation
        rec = os.path.join(tmp, "rec")
        shutil.rmtree(rec, ignore_errors=True)
        t0 = time.monotonic()
        r = subprocess.run([os.path.join(build, "xprobes"), str(mc.pid), "trace", "record",
                            "-o", rec, "-d", str(seconds)], capture_output=True, text=True,
                           timeout=seconds + 120)
        took = time.monotonic() - t0
        out, _ = load.communicate(timeout=seconds + 120)
    finally:
        mc.kill()
        mc.wait()
    m = re.search(r"trace record: (\d+) records of (\d+) threads? in \S+, (\d+) lost", r.stderr)
    if r.returncode != 0 or not m:
        raise SystemExit("bench: trace record failed: " + r.stderr.strip()[-300:])
    res = json.loads(out)
    rps = res.get("requests_per_sec")
    shutil.rmtree(rec, ignore_errors=True)
    return {"records": int(m.group(1)), "threads": int(m.group(2)), "lost": int(m.group(3)),
            "records_per_s": int(m.group(1)) / seconds, "record_wall_s": took,
            "mcload_requests_per_s": rps}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results.json"))
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    b = subprocess.run([os.path.join(ROOT, "scripts", "build-memcached.sh"), "traced", build],
                       capture_output=True, text=True, timeout=1800)
    if b.returncode != 0:
        raise SystemExit("bench: " + b.stderr.strip())
    mc_bin = b.stdout.strip()
    tmp = tempfile.mkdtemp(prefix="xp-trace-mc-")
    runs = []
    try:
        for i in range(args.runs):
            r = one_run(mc_bin, build, args.seconds, tmp)
            runs.append(r)
            print("  run %d: %d records in %d s (%.2fM/s) of %d threads, %d lost; mcload %s req/s"
                  % (i + 1, r["records"], args.seconds, r["records_per_s"] / 1e6, r["threads"],
                     r["lost"], r["mcload_requests_per_s"]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in runs) for k in ("records", "records_per_s", "lost")}
    print("trace_memcached: median %d records, %.2fM records/s sustained, %d lost"
          % (med["records"], med["records_per_s"] / 1e6, med["lost"]))
    try:
        with open(args.out) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        data = {}
    data["trace_memcached"] = {"seconds": args.seconds, "runs": runs, "median": med}
    with open(args.out + ".tmp", "w") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")
    os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
