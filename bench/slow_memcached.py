#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What mclat --slow costs memcached at saturation when nothing is slow,
beside recording every call (`xprobes trace record`).

    /usr/bin/python3 bench/slow_memcached.py [--build build] [--seconds 3] [--rounds 5] [--slow-depth N]

One memcached built with both xprobes-dtrace and the tracer's flags
(scripts/build-memcached.sh traced-xprobes BUILD), `-t 2`, driven by
mcload (8 connections on 2 threads, closed loop).  Each round runs, for
each variant V in turn, the ABBA pair of windows base, V, V, base, so
that every variant is compared with base windows next to it in time
(on a shared VM the machine drifts by tens of percent over minutes):

  base    nothing attached
  mclat   `mclat --no-bpf`: its sampled stage measurement alone
  slow    `mclat --no-bpf --slow 10s -o DIR`: every command opens and
          drops a request recording (no request takes 10 s), mclat's
          sampled stage measurement beside it
  slowd   `slow` with `--slow-depth N` (only with --slow-depth N): calls
          at most N levels under each request followed
  record  `xprobes PID trace record -o DIR`: every call recorded
  uftrace a second memcached, the same binary, started under
          `uftrace record -P . -d DIR` (every function and library call,
          uftrace's dynamic patching of the same patchable entries), for
          its window only: uftrace cannot attach to the running one.  A
          fresh process (empty cache, cold), so compare with care; its
          CPU is the memcached child's, as the others' is memcached's
          (each recorder's own process is not counted).  Left out with
          --no-uftrace or when uftrace is not installed.

Each window: the tool started and ready (mclat's "tracing" line, or
`trace status` on), then mcload for SECONDS; memcached's CPU time
(/proc/PID/stat) over the window per request answered, and mcload's
requests per second.  Printed: each window, then per variant the median
over its pairs of (its two windows) / (their two base windows) - 1, for
CPU per request and throughput, with a bootstrap 95% interval of that
median, and the median added user CPU per request (the tracer's own code
is all user time; the kernel's share moves with batching at
saturation).  --json FILE writes the windows and the summary.  Stdlib
only; safety timeouts only."""
import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import memcached as mcb  # noqa: E402  (free_port, wait_listening)
VARIANTS = ["base", "mclat", "slow", "slowd", "record", "uftrace"]
SLOW_DEPTH = 2  # --slow-depth


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]), int(fields[11])  # utime + stime, utime


def wait_until(cond, what, limit=120):
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit("bench: timed out waiting for " + what)
        time.sleep(0.02)  # polling a condition, bounded


def status(build, pid):
    return subprocess.run([os.path.join(build, "xprobes"), str(pid), "trace", "status"],
                          capture_output=True, text=True, timeout=60).stdout


def start_tool(variant, build, pid, out):
    if variant == "base":
        return None
    if variant in ("slow", "slowd", "mclat"):
        slow = ["--slow", "10s", "-o", out] if variant != "mclat" else []
        if variant == "slowd":
            slow += ["--slow-depth", str(SLOW_DEPTH)]
        p = subprocess.Popen([os.path.join(build, "mclat"), "-p", str(pid), "--no-bpf", *slow,
                              "1"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        for line in p.stderr:
            if line.startswith("mclat: tracing"):
                return p
        raise SystemExit("bench: mclat did not start")
    p = subprocess.Popen([os.path.join(build, "xprobes"), str(pid), "trace", "record", "-o",
                          out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: "tracing: on" in status(build, pid) or p.poll() is not None,
               "trace record to start")
    if p.poll() is not None:
        raise SystemExit("bench: trace record failed: " + p.stderr.read())
    return p


def stop_tool(p):
    if p is None:
        return ""
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=300)
    return err


def uftrace_start(binary, out):
    """memcached under `uftrace record`: (uftrace, memcached's pid, port)."""
    port = mcb.free_port()
    u = subprocess.Popen(["uftrace", "record", "-P", ".", "-d", out, binary, "-u", "root", "-l",
                          "127.0.0.1", "-p", str(port), "-U", "0", "-t", "2"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    mcb.wait_listening(u, port)

    def child():
        with open("/proc/%d/task/%d/children" % (u.pid, u.pid)) as f:
            kids = f.read().split()
        return int(kids[0]) if kids else None
    wait_until(lambda: child() is not None, "uftrace's memcached")
    return u, child(), port


def uftrace_stop(u, pid):
    os.kill(pid, signal.SIGINT)
    _, err = u.communicate(timeout=300)
    return err


def window(variant, build, mc, port, seconds, tmp, binary):
    out = os.path.join(tmp, variant)
    shutil.rmtree(out, ignore_errors=True)
    pid = mc.pid
    if variant == "uftrace":
        tool, pid, port = uftrace_start(binary, out)
    else:
        tool = start_tool(variant, build, pid, out)
    c0, u0 = cpu_ticks(pid)
    r = subprocess.run([os.path.join(build, "mcload"), "-s", "127.0.0.1:%d" % port, "-c", "8",
                        "-T", "2", "-d", str(seconds), "--json"], capture_output=True,
                       text=True, timeout=seconds + 120)
    c1, u1 = cpu_ticks(pid)
    err = uftrace_stop(tool, pid) if variant == "uftrace" else stop_tool(tool)
    shutil.rmtree(out, ignore_errors=True)
    if r.returncode != 0:
        raise SystemExit("bench: mcload failed: " + r.stderr)
    res = json.loads(r.stdout)
    rps = res["requests_per_sec"]
    reqs = rps * seconds
    hz = os.sysconf("SC_CLK_TCK")
    return {"variant": variant, "rps": rps,
            "cpu_us_per_req": (c1 - c0) / hz * 1e6 / reqs if reqs else None,
            "user_us_per_req": (u1 - u0) / hz * 1e6 / reqs if reqs else None,
            "tool_stderr_tail": err.strip().splitlines()[-1:] if err else []}


def pair_changes(rows, variant):
    """Per ABBA pair of variant: (CPU/request change, throughput change,
    added user us/request) against the pair's own base windows."""
    out = []
    for pair in sorted({r["pair"] for r in rows if r["variant"] == variant}):
        v = [r for r in rows if r["pair"] == pair and r["variant"] == variant]
        b = [r for r in rows if r["pair"] == pair and r["variant"] == "base"]
        mean = lambda ws, k: statistics.fmean(w[k] for w in ws)  # noqa: E731
        out.append((mean(v, "cpu_us_per_req") / mean(b, "cpu_us_per_req") - 1,
                    mean(v, "rps") / mean(b, "rps") - 1,
                    mean(v, "user_us_per_req") - mean(b, "user_us_per_req")))
    return out


def median_ci(xs, n=2000, seed=1):
    """The median and a bootstrap 95% interval of it."""
    rnd = random.Random(seed)
    meds = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(n))
    return statistics.median(xs), meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5, help="ABBA pairs per variant (default 5)")
    ap.add_argument("--no-uftrace", action="store_true", help="leave the uftrace window out")
    ap.add_argument("--only", action="append", choices=VARIANTS[1:],
                    help="this variant (repeatable; default: all)")
    ap.add_argument("--json", metavar="FILE", help="write the windows and the summary here")
    ap.add_argument("--slow-depth", type=int, metavar="N",
                    help="add the variant slowd: --slow with --slow-depth N")
    args = ap.parse_args()
    global SLOW_DEPTH
    SLOW_DEPTH = args.slow_depth or SLOW_DEPTH
    variants = [v for v in VARIANTS[1:] if (not args.only or v in args.only) and
                (v != "uftrace" or (not args.no_uftrace and shutil.which("uftrace"))) and
                (v != "slowd" or args.slow_depth)]
    build = os.path.abspath(args.build)
    b = subprocess.run([os.path.join(ROOT, "scripts", "build-memcached.sh"), "traced-xprobes",
                        build], capture_output=True, text=True, timeout=1800)
    if b.returncode != 0:
        raise SystemExit("bench: " + b.stderr.strip())
    port = mcb.free_port()
    mc = subprocess.Popen([b.stdout.strip(), "-u", "root", "-l", "127.0.0.1", "-p", str(port),
                           "-U", "0", "-t", "2"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    tmp = tempfile.mkdtemp(prefix="xp-slow-mc-")
    rows = []
    try:
        mcb.wait_listening(mc, port)
        for rnd in range(args.rounds):
            for v in variants:
                pair = "%d-%s" % (rnd, v)
                for name in ("base", v, v, "base"):
                    w = window(name, build, mc, port, args.seconds, tmp, b.stdout.strip())
                    w["pair"] = pair
                    rows.append(w)
                    print("  round %d %-7s %9.0f req/s  %6.2f us CPU/request (%5.2f user)  %s" %
                          (rnd + 1, name, w["rps"], w["cpu_us_per_req"], w["user_us_per_req"],
                           " ".join(w["tool_stderr_tail"])[:100]), flush=True)
    finally:
        mc.kill()
        mc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    summary = {}
    for v in variants:
        ch = pair_changes(rows, v)
        cpu, rps, user = ([c[i] for c in ch] for i in range(3))
        cm, clo, chi = median_ci(cpu)
        rm, rlo, rhi = median_ci(rps)
        summary[v] = {"pairs": len(ch), "cpu_per_req_change": cm, "cpu_ci95": [clo, chi],
                      "throughput_change": rm, "throughput_ci95": [rlo, rhi],
                      "user_us_per_req_added": statistics.median(user)}
        print("%-7s CPU per request %+.1f%% [%+.1f, %+.1f], throughput %+.1f%% [%+.1f, %+.1f], "
              "user %+.2f us a request: medians of %d ABBA pairs against their own base "
              "windows [bootstrap 95%%]%s" % (
                  v, 100 * cm, 100 * clo, 100 * chi, 100 * rm, 100 * rlo, 100 * rhi,
                  statistics.median(user), len(ch),
                  " (a separate memcached under uftrace record)" if v == "uftrace" else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seconds": args.seconds, "windows": rows, "summary": summary}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
