#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The function-graph tracer's cost per traced call, against uftrace and XRay.

    /usr/bin/python3 bench/trace_bench.py [--build build] [--rounds 7] [--n 30]

bench/fib.c computes fib(N) (fib(30): 2,692,537 calls) and times that one
call inside the program (CLOCK_MONOTONIC, and the thread's CPU time), so
process start, tracer setup and output never count.  Variants, each a
fresh process (builds: bench/trace.mk):

  gcc       untraced, gcc -O2                      base of off, on, uftrace
  clang     untraced, clang -O2                    base of xray
  off       our traced build, tracing off
  on        the same, `xprobes PID trace start -F fib -b KIB` before fib
            runs (the program waits for a line in between); checked: no
            record lost, and exactly 2 records per call
  closed    the same with `trace start --requests`, and no module to open
            a request: every call reaches the tracer and returns at once,
            as on a thread with no request open; checked: nothing recorded
  depth     the same with `trace start -D 2`: fib's first two levels
            recorded (3 calls), every deeper call not followed (no frame,
            no time read); checked: exactly 6 records.  Shown, not a goal
  stream    `xprobes trace -o DIR -- fib-traced N`: recorded to a uftrace
            data directory while it runs, with the default options
           ; checked: no record lost, 2 records per call
  uftrace   `uftrace record` of the gcc -pg build; checked: `uftrace
            report` counts every call
  xray      clang -fxray-instrument -fxray-instruction-threshold=1 with
            XRAY_OPTIONS="patch_premain=true xray_mode=xray-fdr", FDR
            initialised by the program, every call kept (threshold 0,
            buffers for all of them); checked: the log holds 8 bytes per
            record
  xray-noinit  the same binary with XRAY_OPTIONS alone, the issue's anchor
            command: FDR's handler runs but returns before recording,
            since nothing initialised FDR.  Shown, not a goal.

Whole process: the wall time of `xprobes trace -o DIR -- fib
N` then `xprobes trace cat -d DIR`, against `uftrace record` then
`uftrace replay` (outputs to /dev/null), from the stream and uftrace
variants' runs.

Every round runs every variant once, in an order rotated each round, so a
drift of the machine spreads over all of them.  Figures are medians over
the rounds; "added" is a variant's median minus its base's median, and
"within noise" means within half the wider interquartile range of the two.  A
tool that is missing (or a build that failed) is skipped with the reason.

Stdlib only; writes the "trace" section of bench/results.json (the other
sections are kept).
"""

import argparse
import json
import os
import platform
import re
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
from run import BenchError, Lines, cpu_counters  # noqa: E402

# Safety bounds only: nothing waits for a fixed time to synchronise.
READY_TIMEOUT = 30.0
RUN_TIMEOUT = 300.0

GOAL_ON_NS = 25.0
GOAL_CLOSED_NS = 5.0  # a switched-on function on a thread with no request open
GOAL_RATIO = 2.5

RECORD_BYTES = 16      # our record (lib/trace/trace.h)
XRAY_RECORD_BYTES = 8  # an FDR function record

VARIANTS = [
    # key, label, binary, base
    ("gcc", "untraced (gcc -O2)", "fib-gcc", None),
    ("clang", "untraced (clang -O2)", "fib-clang", None),
    ("off", "xprobes traced build, tracing off", "fib-traced", "gcc"),
    ("on", "xprobes tracing on", "fib-traced", "gcc"),
    ("closed", "xprobes --requests, none open", "fib-traced", "gcc"),
    ("depth", "xprobes -D 2 (deeper calls not followed)", "fib-traced", "gcc"),
    ("stream", "xprobes trace -o DIR (streaming)", "fib-traced", "gcc"),
    ("uftrace", "uftrace record (gcc -pg)", "fib-pg", "gcc"),
    ("xray", "XRay FDR, recording", "fib-xray", "clang"),
    ("xray-noinit", "XRay FDR handler only (anchor cmd)", "fib-xray", "clang"),
]


def parse_result(line, n):
    """fib's result line -> dict; checks it computed the right thing."""
    w = line.split()
    if len(w) < 4 or w[0] != "fib" or w[1] != str(n):
        raise BenchError("fib said %r" % line)
    kv = dict(x.split("=", 1) for x in w[4:] if "=" in x)
    r = {"calls": int(kv["calls"]), "ns": int(kv["ns"]), "cpu_ns": int(kv["cpu_ns"])}
    if int(w[3]) != fib_value(n) or r["calls"] != 2 * fib_value(n + 1) - 1:
        raise BenchError("fib computed %r" % line)
    r["ns_per_call"] = r["ns"] / r["calls"]
    r["cpu_ns_per_call"] = r["cpu_ns"] / r["calls"]
    return r


def fib_value(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def kill_group(proc):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def run_once(argv, n, cwd, env=None):
    """Run argv (its own process group, killed on timeout); fib's line.
    In a scratch directory: whatever a tool leaves behind goes with it."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise BenchError("%s: no result within %.0f s" % (" ".join(argv), RUN_TIMEOUT))
    if proc.returncode != 0:
        raise BenchError("%s exited with %d: %s" % (" ".join(argv), proc.returncode,
                                                     err.decode(errors="replace").strip()[-300:]))
    lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.startswith("fib ")]
    if not lines:
        raise BenchError("%s printed no result" % " ".join(argv))
    return parse_result(lines[-1], n), err.decode(errors="replace")


class Bench:
    def __init__(self, args):
        self.dir = os.path.join(os.path.abspath(os.path.join(ROOT, args.build)), "bench")
        self.xprobes = os.path.join(os.path.dirname(self.dir), "xprobes")
        self.n = args.n
        self.calls = 2 * fib_value(self.n + 1) - 1
        # Room for every record, and a quarter more.
        self.kib = (self.calls * 2 * RECORD_BYTES * 5 // 4) // 1024 + 1024
        self.xray_bufs = (self.calls * 2 * XRAY_RECORD_BYTES * 5 // 4) // (1 << 20) + 8
        self.tmp = tempfile.mkdtemp(prefix="xp-trace-bench-")

    def path(self, binary):
        return os.path.join(self.dir, binary)

    def skipped(self):
        """{key: reason} for the variants that cannot run here."""
        skip = {}
        for key, _, binary, _ in VARIANTS:
            if not os.access(self.path(binary), os.X_OK):
                skip[key] = "%s not built (make bench-trace builds it)" % binary
        if not os.access(self.xprobes, os.X_OK):
            skip["on"] = skip["closed"] = skip["depth"] = "no %s" % self.xprobes
        if not shutil.which("uftrace"):
            skip["uftrace"] = "uftrace not installed (Debian package uftrace)"
        if "xray" in skip:
            skip["xray"] = skip["xray-noinit"] = (
                "XRay build failed (needs libclang-rt-14-dev)")
        return skip

    def xp(self, pid, *cmd):
        r = subprocess.run([self.xprobes, str(pid)] + list(cmd), capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            raise BenchError("xprobes %s %s: %s" % (pid, " ".join(cmd), r.stderr.strip()))
        return r.stdout

    def run(self, key, binary):
        if key in ("gcc", "clang", "off"):
            return run_once([self.path(binary), str(self.n)], self.n, self.tmp)[0]
        return getattr(self, "run_" + key.replace("-", "_"))()

    def run_closed(self):
        return self.run_on(("--requests",))

    def run_depth(self):
        return self.run_on(("-D", "2"))

    def run_on(self, extra=()):
        proc = subprocess.Popen([self.path("fib-traced"), str(self.n), "--wait"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                start_new_session=True)
        out = Lines(proc.stdout)
        try:
            ready = out.readline(READY_TIMEOUT, "fib's ready line")
            if not ready.startswith("ready "):
                raise BenchError("fib said %r" % ready)
            pid = int(ready.split()[1])
            said = self.xp(pid, "trace", "start", "-F", "fib", "-b", str(self.kib), *extra)
            if not said.startswith("tracing 1 function"):
                raise BenchError("trace start said %r" % said)
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
            r = parse_result(out.readline(RUN_TIMEOUT, "fib's result"), self.n)
            status = self.xp(pid, "trace", "status")
            self.xp(pid, "trace", "stop")
            proc.stdin.close()
            if proc.wait(timeout=READY_TIMEOUT) != 0:
                raise BenchError("fib exited with %d" % proc.returncode)
        finally:
            kill_group(proc)
        used = lost = None
        for ln in status.splitlines():
            w = ln.split()
            if ln.startswith("records:"):
                used = int(w[1])
            elif ln.startswith("lost:"):
                lost = int(w[1])
        if used is None or lost is None:
            raise BenchError("trace status said %r" % status)
        if extra and extra[0] == "-D":  # fib(N), fib(N-1), fib(N-2): 3 calls
            if lost or used != 6:
                raise BenchError("-D 2 recorded %d records, lost %d (not 6 and 0)" % (used, lost))
            return r
        if extra:  # --requests with none open: nothing at all
            if used or lost:
                raise BenchError("--requests with no request open recorded %d, lost %d"
                                 % (used, lost))
            return r
        if lost or used != 2 * r["calls"]:
            raise BenchError("recorded %d records, lost %d, for %d calls (-b %d)"
                             % (used, lost, r["calls"], self.kib))
        r["records"] = used
        return r

    def timed_read(self, argv):
        t0 = time.monotonic()
        with open(os.devnull, "w") as null:
            rc = subprocess.run(argv, stdout=null, stderr=subprocess.PIPE,
                                timeout=RUN_TIMEOUT).returncode
        if rc != 0:
            raise BenchError("%s exited with %d" % (" ".join(argv), rc))
        return time.monotonic() - t0

    def run_stream(self):
        data = os.path.join(self.tmp, "xprobes.data")
        shutil.rmtree(data, ignore_errors=True)
        t0 = time.monotonic()
        r, err = run_once([self.xprobes, "trace", "-o", data, "--", self.path("fib-traced"),
                           str(self.n)], self.n, self.tmp)
        r["record_s"] = time.monotonic() - t0
        m = re.search(r"trace record: (\d+) records of \d+ threads? in \S+, (\d+) lost", err)
        # fib's calls, and a few of main's and its clock's (all functions traced)
        if not m or int(m.group(2)) or not 0 <= int(m.group(1)) - 2 * r["calls"] < 100:
            raise BenchError("trace record said %r for %d calls (nothing may be lost)"
                             % (err.strip()[-300:], r["calls"]))
        r["records"] = int(m.group(1))
        r["read_s"] = self.timed_read([self.xprobes, "trace", "cat", "-d", data])
        r["whole_s"] = r["record_s"] + r["read_s"]
        shutil.rmtree(data, ignore_errors=True)
        return r

    def run_uftrace(self):
        data = os.path.join(self.tmp, "uftrace.data")
        shutil.rmtree(data, ignore_errors=True)
        t0 = time.monotonic()
        r, _ = run_once(["uftrace", "record", "-d", data, self.path("fib-pg"), str(self.n)],
                        self.n, self.tmp)
        r["record_s"] = time.monotonic() - t0
        r["read_s"] = self.timed_read(["uftrace", "replay", "-d", data, "--no-pager"])
        r["whole_s"] = r["record_s"] + r["read_s"]
        # Its own count of fib's calls: nothing lost.
        rep = subprocess.run(["uftrace", "report", "-d", data, "--no-pager"],
                             capture_output=True, text=True, timeout=RUN_TIMEOUT)
        counted = None
        for ln in rep.stdout.splitlines():
            w = ln.split()
            if w and w[-1] == "fib":
                counted = int(w[-2])
        shutil.rmtree(data, ignore_errors=True)
        if counted != r["calls"]:
            raise BenchError("uftrace report counted %s calls of fib, fib made %d: %s"
                             % (counted, r["calls"], rep.stderr.strip()[-200:]))
        r["counted"] = counted
        return r

    def xray_env(self, record):
        env = dict(os.environ)
        base = os.path.join(self.tmp, "xray-")
        env["XRAY_OPTIONS"] = ("patch_premain=true xray_mode=xray-fdr "
                               "xray_logfile_base=" + base)
        if record:
            env["XRAY_FDR_OPTIONS"] = ("func_duration_threshold_us=0 "
                                       "buffer_size=1048576 buffer_max=%d" % self.xray_bufs)
        else:
            env.pop("XRAY_FDR_OPTIONS", None)
        return env

    def run_xray(self):
        for f in os.listdir(self.tmp):
            if f.startswith("xray-"):
                os.unlink(os.path.join(self.tmp, f))
        r, err = run_once([self.path("fib-xray"), str(self.n), "--xray-record"], self.n,
                          self.tmp, env=self.xray_env(True))
        logs = [f for f in os.listdir(self.tmp) if f.startswith("xray-")]
        size = sum(os.path.getsize(os.path.join(self.tmp, f)) for f in logs)
        for f in logs:
            os.unlink(os.path.join(self.tmp, f))
        if size < 2 * r["calls"] * XRAY_RECORD_BYTES:
            raise BenchError("XRay's log holds %d bytes, %d records need %d: records "
                             "dropped? %s" % (size, 2 * r["calls"],
                                              2 * r["calls"] * XRAY_RECORD_BYTES,
                                              err.strip()[-200:]))
        r["log_bytes"] = size
        return r

    def run_xray_noinit(self):
        return run_once([self.path("fib-xray"), str(self.n)], self.n, self.tmp,
                        env=self.xray_env(False))[0]

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def has_cpu_flag(flag):
    try:
        with open("/proc/cpuinfo") as fh:
            for ln in fh:
                if ln.startswith("flags"):
                    return flag in ln.split()
    except OSError:
        pass
    return None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as fh:
            for ln in fh:
                if ln.startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def iqr(xs):
    if len(xs) < 2:
        return 0.0
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[2] - q[0]


def summarise(vs):
    """Medians, spreads and added costs, in place."""
    for v in vs.values():
        ns = [s["ns_per_call"] for s in v["samples"]]
        cpu = [s["cpu_ns_per_call"] for s in v["samples"]]
        v["median"] = statistics.median(ns) if ns else None
        v["min"] = min(ns) if ns else None
        v["max"] = max(ns) if ns else None
        v["cpu_median"] = statistics.median(cpu) if cpu else None
        v["iqr"] = iqr(ns)
        whole = [s["whole_s"] for s in v["samples"] if "whole_s" in s]
        v["whole_s"] = statistics.median(whole) if whole else None
        v["record_s"] = (statistics.median([s["record_s"] for s in v["samples"]])
                         if whole else None)
        v["read_s"] = (statistics.median([s["read_s"] for s in v["samples"]])
                       if whole else None)
    for v in vs.values():
        b = vs.get(v["base"]) if v["base"] else None
        ok = v["median"] is not None and b is not None and b["median"] is not None
        v["added"] = v["median"] - b["median"] if ok else None
        v["cpu_added"] = v["cpu_median"] - b["cpu_median"] if ok else None
        # From the fastest runs, the least disturbed by neighbours.
        v["added_fastest"] = v["min"] - b["min"] if ok else None
        # Noise of the comparison: half the wider interquartile range of
        # the two (robust to the odd preempted run on a shared machine),
        # never below the 0.01 ns the table shows.
        v["noise"] = max(v["iqr"], b["iqr"], 0.02) / 2 if ok else None
    on = vs["on"]
    for v in vs.values():
        ok = (v["added"] is not None and on["added"] is not None and on["added"] > 0
              and v["key"] in ("uftrace", "xray", "xray-noinit"))
        v["vs_ours"] = v["added"] / on["added"] if ok else None
        v["cpu_vs_ours"] = (v["cpu_added"] / on["cpu_added"]
                            if ok and on["cpu_added"] > 0 else None)
        st = vs["stream"]
        ok = ok and st["added"] is not None and st["added"] > 0
        v["vs_stream"] = v["added"] / st["added"] if ok else None


def fmt(x, spec="%.2f"):
    return "-" if x is None else spec % x


def table(vs, skip):
    hdr = ("variant", "ns/call", "min", "max", "added", "x ours", "cpu ns/call",
           "cpu added", "cpu x ours")
    rows = []
    for v in vs.values():
        if v["key"] in skip:
            rows.append(("%-11s %s" % (v["key"], v["label"]), "skipped: " + skip[v["key"]]))
            continue
        rows.append(("%-11s %s" % (v["key"], v["label"]), fmt(v["median"]), fmt(v["min"]),
                     fmt(v["max"]), fmt(v["added"], "%+.2f"), fmt(v["vs_ours"], "%.1fx"),
                     fmt(v["cpu_median"]), fmt(v["cpu_added"], "%+.2f"),
                     fmt(v["cpu_vs_ours"], "%.1fx")))
    full = [r for r in rows if len(r) == len(hdr)] + [hdr]
    w = [max(len(r[i]) for r in full) for i in range(len(hdr))]
    w[0] = max(len(r[0]) for r in rows + [hdr])
    for r in [hdr] + rows:
        if len(r) == 2:
            print(r[0].ljust(w[0]) + "  " + r[1])
        else:
            print("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i])
                            for i, c in enumerate(r)))


def goals(vs, skip):
    off, on = vs["off"], vs["on"]
    g = []
    if off["added"] is not None:
        g.append(dict(goal="tracing off within noise of untraced",
                      value="%+.3f ns/call (noise +/-%.3f: half the wider IQR; untraced %.2f-%.2f, "
                      "off %.2f-%.2f; fastest runs %+.3f)"
                      % (off["added"], off["noise"], vs["gcc"]["min"], vs["gcc"]["max"],
                         off["min"], off["max"], off["added_fastest"]),
                      ok=abs(off["added"]) <= off["noise"]))
    if on["added"] is not None:
        g.append(dict(goal="tracing on <= %.0f ns/call" % GOAL_ON_NS,
                      value="%.2f ns/call (CPU time: %.2f; fastest runs: %.2f)"
                      % (on["added"], on["cpu_added"], on["added_fastest"]),
                      ok=on["added"] <= GOAL_ON_NS))
    cl = vs["closed"]
    if cl["added"] is not None:
        g.append(dict(goal="--requests, none open <= %.0f ns/call" % GOAL_CLOSED_NS,
                      value="%.2f ns/call (CPU time: %.2f; fastest runs: %.2f)"
                      % (cl["added"], cl["cpu_added"], cl["added_fastest"]),
                      ok=cl["added"] <= GOAL_CLOSED_NS))
    dp = vs["depth"]
    if dp["added"] is not None:
        g.append(dict(goal="-D 2, calls below it (shown, not a goal)",
                      value="%.2f ns/call (CPU time: %.2f; tracing on: %s)"
                      % (dp["added"], dp["cpu_added"], fmt(on["added"], "%.2f")),
                      ok=None))
    st = vs["stream"]
    if st["added"] is not None:
        g.append(dict(goal="streaming to DIR <= %.0f ns/call" % GOAL_ON_NS,
                      value="%.2f ns/call (runs %.2f-%.2f less the untraced median; noise "
                      "+/-%.2f; CPU time: %.2f)"
                      % (st["added"], st["min"] - vs["gcc"]["median"],
                         st["max"] - vs["gcc"]["median"], st["noise"], st["cpu_added"]),
                      ok=st["added"] <= GOAL_ON_NS))
        for key, name in (("uftrace", "uftrace"), ("xray", "XRay FDR")):
            if vs[key].get("vs_stream") is not None:
                g.append(dict(goal="streaming >= %.1fx cheaper than %s" % (GOAL_RATIO, name),
                              value="%.1fx" % vs[key]["vs_stream"],
                              ok=vs[key]["vs_stream"] >= GOAL_RATIO))
    uf = vs["uftrace"]
    if st["whole_s"] is not None and uf["whole_s"] is not None:
        g.append(dict(goal="whole process faster than uftrace",
                      value="%.2f s (record %.2f + cat %.2f) vs uftrace %.2f s (record %.2f + "
                      "replay %.2f): %.1fx"
                      % (st["whole_s"], st["record_s"], st["read_s"], uf["whole_s"],
                         uf["record_s"], uf["read_s"], uf["whole_s"] / st["whole_s"]),
                      ok=st["whole_s"] < uf["whole_s"]))
    for key, name in (("uftrace", "uftrace"), ("xray", "XRay FDR")):
        v = vs[key]
        if v["vs_ours"] is None:
            g.append(dict(goal=">= %.1fx cheaper than %s" % (GOAL_RATIO, name),
                          value="not measured: " + skip.get(key, "ours costs nothing?"),
                          ok=None))
            continue
        g.append(dict(goal=">= %.1fx cheaper than %s" % (GOAL_RATIO, name),
                      value="%.1fx (%s %.1f ns/call; CPU time: %s)"
                      % (v["vs_ours"], name, v["added"], fmt(v["cpu_vs_ours"], "%.1fx")),
                      ok=v["vs_ours"] >= GOAL_RATIO))
    return g


def write_json(path, section):
    """Read-modify-write: the other benchmarks own the other sections."""
    try:
        with open(path) as fh:
            data = json.load(fh)
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data["trace"] = section
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=30, help="fib(N) (default 30)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results.json"))
    args = ap.parse_args()
    if not 2 <= args.n <= 40 or args.rounds < 1:
        ap.error("--n 2..40, --rounds >= 1")

    bench = Bench(args)
    skip = bench.skipped()
    vs = {k: dict(key=k, label=lab, binary=b, base=base, samples=[])
          for k, lab, b, base in VARIANTS}
    order = [k for k in vs if k not in skip]
    start = time.monotonic()
    cpu0 = cpu_counters()
    print("bench-trace: fib(%d) = %d calls per run, %d rounds; our buffer -b %d KiB, "
          "XRay %d x 1 MiB" % (args.n, bench.calls, args.rounds, bench.kib, bench.xray_bufs),
          flush=True)
    try:
        for rnd in range(args.rounds):
            k = rnd % len(order) if order else 0
            done = []
            for key in order[k:] + order[:k]:
                if key in skip:
                    continue
                try:
                    r = bench.run(key, vs[key]["binary"])
                except (BenchError, subprocess.TimeoutExpired, OSError) as e:
                    if key in ("gcc", "clang", "off", "on", "closed", "depth", "stream"):
                        raise BenchError("%s: %s" % (key, e))
                    # An anchor that fails is skipped, with why.
                    skip[key] = str(e).splitlines()[0][:200]
                    print("  %s skipped: %s" % (key, skip[key]), flush=True)
                    continue
                vs[key]["samples"].append(r)
                done.append("%s=%.2f" % (key, r["ns_per_call"]))
            print("  round %d: %s" % (rnd + 1, " ".join(done)), flush=True)
    finally:
        bench.close()
    for key in skip:
        vs[key]["samples"] = []

    summarise(vs)
    print()
    print("ns per call of fib (median over rounds, in-program CLOCK_MONOTONIC); added = "
          "over the untraced build of the same compiler; x ours = added / ours added")
    table(vs, skip)
    gs = goals(vs, skip)
    print()
    print("goals:")
    for g in gs:
        print("  [%s] %-38s %s" % ({True: "PASS", False: "FAIL", None: "----"}[g["ok"]],
                                   g["goal"], g["value"]))
    notes = []
    rdtscp = has_cpu_flag("rdtscp")
    if rdtscp is False and "xray" not in skip:
        notes.append("this CPU has no rdtscp: XRay falls back to clock_gettime(CLOCK_REALTIME) "
                     "for every event, which inflates its figures here")
    if "xray-noinit" not in skip:
        notes.append("xray-noinit is the issue's anchor command; it records nothing (FDR is "
                     "never initialised), so it is no goal")
    cpu1 = cpu_counters()
    elapsed = time.monotonic() - start
    others = steal = None
    if cpu0 and cpu1:
        cap = elapsed * os.cpu_count()
        others = max(0.0, (cpu1[0] - cpu0[0]) - (cpu1[2] - cpu0[2])) / cap
        steal = (cpu1[1] - cpu0[1]) / cap
    busy = others is not None and others + steal > 0.10
    if busy:
        notes.append("BUSY machine: other processes used %.0f%% and the hypervisor stole "
                     "%.0f%% of the CPU while we ran; trust the CPU-time columns more, and "
                     "rerun on an idle machine" % (100 * others, 100 * steal))
    for n in notes:
        print("note: " + n)
    print("took %.0f s; results in %s" % (elapsed, os.path.relpath(args.out)))

    keep = ("key", "label", "binary", "base", "median", "min", "max", "iqr", "added", "noise",
            "added_fastest", "cpu_median", "cpu_added", "vs_ours", "cpu_vs_ours", "vs_stream",
            "whole_s", "record_s", "read_s", "samples")
    write_json(args.out, {
        "machine": {"cpu": cpu_model(), "cpus": os.cpu_count(), "kernel": platform.release(),
                    "rdtscp": rdtscp, "cpu_share_of_other_processes": others,
                    "cpu_share_stolen": steal, "busy": busy},
        "params": {"n": args.n, "calls": bench.calls, "rounds": args.rounds,
                   "buffer_kib": bench.kib, "xray_buffers_mib": bench.xray_bufs},
        "variants": [{k: v[k] for k in keep}
                     | ({"skipped": skip[v["key"]]} if v["key"] in skip else {})
                     for v in vs.values()],
        "goals": gs,
        "notes": notes,
        "elapsed_s": elapsed,
    })
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print("bench-trace: " + str(e), file=sys.stderr)
        sys.exit(1)
