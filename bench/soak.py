#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Soak test: the agent inside a real memcached, under load, for a long time.

One memcached (Debian's source built with xprobes-dtrace, the agent
preloaded; -t 4 so that several threads hit the sites while modules come and
go) is driven by memaslap for --seconds.  Meanwhile, as fast as the agent
answers, two counting modules (build/modules/mc_count.so and
bench/mod_mc_hits.so, both on memcached:command__get/command__set) are
loaded, disabled, enabled, queried and unloaded, cycle after cycle:

  driver    a `xprobes PID` shell fed through a pipe for the whole run; one
            cycle in 20 is run instead by a fresh `xprobes PID -c ...`
            process (a new connection, exit status checked);
  observer  a second `xprobes PID` shell, open throughout, that runs
            `modules`, `probes`, `sites` and `objects` every 100 ms while
            the driver works.

Every command must succeed with the reply it should give.  Two checks show
that handlers really stop:

  disabled  in each driver cycle one module is disabled while the other
            stays enabled; in every other cycle memcached then serves at
            least WINDOW_OPS GETs and SETs (its own `stats`).  The disabled
            module's counters must not move ("hits while disabled"), and
            the enabled one's must (else the first check proves nothing).
  unloaded  after each unload the module's file must be gone from
            /proc/PID/maps: none of its code is left in the process, so no
            handler of it can count anything any more (a stale call would
            fault and kill memcached, which is checked too).  At the end no
            module, probe or attachment may be listed, and memcached must
            still answer SETs and GETs through the sites the modules used.

Memory: memcached's RSS is taken after warm-up, when its item memory has
reached its -m limit (memcached reports evictions) and 20 cycles have run
(malloc arenas, the agent's first allocations), and again at the end.  From
then on memcached's own memory is constant, so growth is the agent's and the
modules'.  The bound, 16 MiB, is far above what malloc fragmentation of the
agent's command buffers can explain and far below a real leak: mc_count.so
alone maps 2.3 MiB of counters that are touched at once, so a module that
stays mapped, or 560 bytes leaked per cycle over a default 10-minute run,
crosses it.  Descriptors are counted too: the agent must not keep any.

Exits non-zero on any error, hits while disabled, a module left after
unload, RSS growth beyond the bound, or a descriptor leak.  Every process
it starts dies with it (finally, SIGTERM/SIGHUP handlers, and
PR_SET_PDEATHSIG for a SIGKILL).  Stdlib only.
"""
import argparse
import ctypes
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import memcached as mcb  # noqa: E402  (shares build and process helpers)

THREADS = 4          # memcached worker threads: sites hit concurrently
CACHE_MB = 32        # -m: small enough to fill (and stop growing) early
WINDOW_OPS = 100     # GET/SETs served while one module is disabled
FRESH_EVERY = 20     # every twentieth cycle by a fresh `xprobes -c` process
OBSERVE_EVERY = 0.1  # seconds between the observer's rounds
WARMUP_CYCLES = 20
RSS_BOUND_KB = 16 * 1024
REPLY_TIMEOUT = 60   # a bound on every reply, never a synchronisation
MAX_ERRORS = 10      # stop churning after this many
MARKER = re.compile(rb"^xprobes agent .*\n", re.M)  # the reply to `version`


class Failure(Exception):
    """A command that failed, or gave a reply it should not have."""


class LoadEnded(Exception):
    """The load generator finished in the middle of a cycle."""


class Interrupted(Exception):
    """SIGINT, SIGTERM or SIGHUP: leave through the finally blocks."""


def on_signal(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent():
    """In the child before exec: SIGKILL when this script dies, even by
    SIGKILL, so that no memcached or memaslap outlives it."""
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Procs:
    """Every child process, killed and reaped by close()."""

    def __init__(self):
        self.procs = []

    def start(self, argv, **kw):
        p = subprocess.Popen(argv, preexec_fn=die_with_parent, **kw)
        self.procs.append(p)
        return p

    def add(self, p):
        self.procs.append(p)
        return p

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.kill()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                print("soak: process %d did not die" % p.pid, file=sys.stderr)


class Shell:
    """A long-lived `xprobes PID` reading commands from a pipe.

    Each command is followed by `version`: its reply line ends the
    command's output on stdout.  The tool answers one line at a time and
    flushes after each reply, so by the time that line arrives anything the
    command wrote to stderr (only failing commands do) is in the pipe."""

    def __init__(self, procs, xprobes, pid, name):
        self.name = name
        self.proc = procs.start([xprobes, str(pid)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.set_blocking(self.proc.stderr.fileno(), False)
        self.out = b""
        self.served = 0

    def run(self, cmd):
        """Run cmd; its stdout text, or Failure with what it said."""
        try:
            self.proc.stdin.write(("%s\nversion\n" % cmd).encode())
            self.proc.stdin.flush()
        except OSError as e:
            raise Failure("%s: cannot send '%s': %s" % (self.name, cmd, e))
        deadline = time.monotonic() + REPLY_TIMEOUT
        fd = self.proc.stdout.fileno()
        while True:
            m = MARKER.search(self.out)
            if m:
                break
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise Failure("%s: no reply to '%s' within %d s" % (self.name, cmd, REPLY_TIMEOUT))
            chunk = os.read(fd, 65536)
            if not chunk:
                raise Failure("%s: xprobes exited (status %s) at '%s': %s" % (
                    self.name, self.proc.wait(timeout=REPLY_TIMEOUT), cmd, self.stderr()))
            self.out += chunk
        text, self.out = self.out[:m.start()].decode(), self.out[m.end():]
        self.served += 1
        err = self.stderr()
        if err:
            raise Failure("%s: '%s' failed: %s" % (self.name, cmd, err.strip()))
        return text

    def stderr(self):
        try:
            return (self.proc.stderr.read() or b"").decode()
        except BlockingIOError:
            return ""

    def close(self):
        """End of input: the tool exits 1 if any command failed."""
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=REPLY_TIMEOUT)
        if rc != 0:
            raise Failure("%s: xprobes exited with status %d: %s" % (self.name, rc, self.stderr()))


def dump_stacks(pid):
    """Every thread's stack in pid, through gdb if there is one, into a file
    (a hang is worth a post-mortem); that file's path, or None."""
    if shutil.which("gdb") is None:
        return None
    fd, path = tempfile.mkstemp(prefix="soak-stacks-%d-" % pid, suffix=".txt")
    with os.fdopen(fd, "w") as f:
        try:
            subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                           stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           timeout=REPLY_TIMEOUT)
        except subprocess.TimeoutExpired:
            f.write("(gdb took longer than %d s)\n" % REPLY_TIMEOUT)
    return path


def expect(text, pattern, what):
    m = re.search(pattern, text, re.M)
    if not m:
        raise Failure("%s: unexpected reply %r" % (what, text))
    return m


def rss_kb(pid):
    """VmRSS of pid in kB, or None once it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def fd_count(pid):
    """Open descriptors of pid, or None once it is gone."""
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None


def mapped(pid, paths):
    """Those of paths that process pid has mapped."""
    with open("/proc/%d/maps" % pid) as f:
        maps = f.read()
    return [p for p in paths if p in maps]


class Soak:
    """One memcached, the two xprobes sessions into it, and what they saw."""

    def __init__(self, build_dir, pid, port, procs, modules):
        self.build_dir, self.pid, self.port, self.procs = build_dir, pid, port, procs
        self.xprobes = os.path.join(build_dir, "xprobes")
        self.modules = modules  # [(name, path)]
        self.stats = mcb.Stats(port)
        self.driver = Shell(procs, self.xprobes, pid, "driver")
        self.observer = Shell(procs, self.xprobes, pid, "observer")
        self.fresh_served = 0
        self.cycles = self.fresh_cycles = 0
        self.attachments = {}  # name -> attachments of its first load
        self.disabled_hits = 0
        self.disabled_windows = 0
        self.enabled_hits = 0
        self.left_after_unload = 0
        self.errors = []
        self.stacks = None  # where the threads' stacks went at the first hang
        self.loadgen = None  # memaslap, while it runs

    # -- one cycle ---------------------------------------------------------

    def check_loaded(self, name, reply):
        """A `loaded NAME: N attachments` reply, N the same every time."""
        n = int(expect(reply, r"^loaded %s: (\d+) attachments$" % re.escape(name),
                       "load " + name).group(1))
        first = self.attachments.setdefault(name, n)
        if n != first or n == 0:
            raise Failure("load %s: %d attachments, %d the first time" % (name, n, first))

    def count(self, name):
        text = self.driver.run("command %s%s" % (name, " totals" if name == "mc_count.so" else ""))
        get = int(expect(text, r"^get (\d+)$", "command " + name).group(1))
        return get + int(expect(text, r"^set (\d+)$", "command " + name).group(1))

    def served_more(self, n):
        """Poll memcached's stats until it served n more GETs and SETs."""
        target = self.stats.ops() + n
        deadline = time.monotonic() + REPLY_TIMEOUT
        while self.stats.ops() < target:
            if self.loadgen is None or self.loadgen.poll() is not None:
                raise LoadEnded()
            if time.monotonic() > deadline:
                raise Failure("memcached served fewer than %d GET/SETs in %d s" % (n, REPLY_TIMEOUT))
            time.sleep(0.001)  # polling memcached's counter, not a synchronisation

    def check_unloaded(self):
        left = mapped(self.pid, [p for _, p in self.modules])
        if left:
            self.left_after_unload += len(left)
            raise Failure("still mapped after unload: %s" % ", ".join(left))

    def shell_cycle(self):
        """Load both modules, disable one, check (every other cycle) that the
        disabled one counts nothing while the other counts, look at them,
        unload both.  Which module is first, whether the window is checked
        and whether the disabled one is enabled again before its unload
        vary with the cycle number, through all eight combinations."""
        d, i = self.driver, self.cycles
        (a, apath), (b, bpath) = self.modules[::-1] if i % 2 else self.modules
        window, reenable = (i // 2) % 2 == 0, (i // 4) % 2 == 0
        self.check_loaded(a, d.run("load " + apath))
        self.check_loaded(b, d.run("load " + bpath))
        if len(mapped(self.pid, [apath, bpath])) != 2:  # else the unload check proves nothing
            raise Failure("loaded modules not found in /proc/%d/maps" % self.pid)
        expect(d.run("disable " + a), r"^disabled %s$" % re.escape(a), "disable " + a)
        a0, b0 = self.count(a), self.count(b)
        if window:
            self.served_more(WINDOW_OPS)
            a1, b1 = self.count(a), self.count(b)
            self.disabled_windows += 1
            self.disabled_hits += a1 - a0
            self.enabled_hits += b1 - b0
            if a1 != a0:
                raise Failure("%s counted %d hits while disabled" % (a, a1 - a0))
            if b1 <= b0:
                raise Failure("%s, enabled, counted nothing while memcached served %d GET/SETs"
                              % (b, WINDOW_OPS))
        if reenable:
            expect(d.run("enable " + a), r"^enabled %s$" % re.escape(a), "enable " + a)
        mods = d.run("modules")
        if len(re.findall(r"^[*] \S+ \(", mods, re.M)) != (2 if reenable else 1):
            raise Failure("modules: unexpected list %r" % mods)
        sites = d.run("sites :memcached:command__[gs]et")
        if len(re.findall(r" => memcached:command__[gs]et -> on_[gs]et \[", sites)) != 4:
            raise Failure("sites: expected 4 attachments, got %r" % sites)
        for name in (b, a):
            expect(d.run("unload " + name), r"^unloaded %s$" % re.escape(name), "unload " + name)
        self.check_unloaded()
        if d.run("modules"):
            raise Failure("modules listed after unloading both")

    def prime(self):
        """One load and unload of both modules, before any traffic."""
        for _, path in self.modules:
            expect(self.driver.run("load " + path), r"^loaded ", "load " + path)
        for name, _ in self.modules:
            expect(self.driver.run("unload " + name), r"^unloaded ", "unload " + name)
        self.check_unloaded()

    def fresh_cycle(self):
        (a, apath), (b, bpath) = self.modules
        cmds = ["load " + apath, "load " + bpath, "command %s totals" % a, "command " + b,
                "disable " + b, "modules", "probes", "unload " + a, "unload " + b, "modules"]
        argv = [self.xprobes, str(self.pid)]
        for c in cmds:
            argv += ["-c", c]
        p = self.procs.start(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=REPLY_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Failure("fresh xprobes: no exit within %d s" % REPLY_TIMEOUT)
        finally:
            self.procs.procs.remove(p)
            if p.poll() is None:
                p.kill()
                p.wait()
        if p.returncode != 0 or err:
            raise Failure("fresh xprobes exited %d: %s" % (p.returncode, err.strip()))
        self.fresh_served += len(cmds)
        self.check_loaded(a, out)
        self.check_loaded(b, out)
        for name in (a, b):
            expect(out, r"^unloaded %s$" % re.escape(name), "unload " + name)
        self.check_unloaded()

    def observe(self):
        o = self.observer
        ours = {name for name, _ in self.modules}
        listed = set(re.findall(r"^[* ] (\S+) \(", o.run("modules"), re.M))
        if listed - ours:
            raise Failure("observer: modules we never loaded: %s" % ", ".join(listed - ours))
        o.run("probes")
        o.run("sites :memcached:command__*")
        expect(o.run("objects"), r"memcached: \d+ sites", "objects")

    def resync(self):
        """Unload what a broken-off cycle left loaded."""
        for name in re.findall(r"^[* ] (\S+) \(", self.driver.run("modules"), re.M):
            expect(self.driver.run("unload " + name), r"^unloaded ", "unload " + name)
        self.check_unloaded()

    def error(self, e):
        self.errors.append(str(e))
        print("soak: error: %s" % e, file=sys.stderr, flush=True)
        if "no reply" in str(e) and not self.stacks:
            self.stacks = dump_stacks(self.pid)
            print("soak: memcached's threads: %s" % self.stacks, file=sys.stderr, flush=True)

    def cycle(self):
        try:
            try:
                if self.cycles % FRESH_EVERY == FRESH_EVERY - 1:
                    self.fresh_cycle()
                    self.fresh_cycles += 1
                else:
                    self.shell_cycle()
                self.cycles += 1
            except LoadEnded:
                self.resync()
            except Failure as e:
                self.error(e)
                self.resync()
        except Failure as e:
            self.error(e)

    def final(self):
        """Nothing left in the agent, nothing mapped, memcached still serving."""
        d = self.driver
        left = len(d.run("modules").splitlines()) + len(d.run("probes").splitlines())
        left += len(re.findall(r" => ", d.run("sites")))
        self.left_after_unload += left
        if left:
            raise Failure("after the last unload: %d modules, probes or attachments listed" % left)
        self.check_unloaded()
        self.driver.close()
        self.observer.close()
        return set_and_get(self.port, 1000)

    @property
    def commands(self):
        return self.driver.served + self.observer.served + self.fresh_served


def set_and_get(port, n):
    """n SETs then n GETs of the same keys on a new connection, each
    answered correctly: the sites the modules used still work."""
    s = socket.create_connection(("127.0.0.1", port), timeout=REPLY_TIMEOUT)
    f = s.makefile("rb")
    try:
        for i in range(n):
            s.sendall(b"set soak:%d 0 0 %d\r\n%d\r\n" % (i, len(str(i)), i))
            if f.readline() != b"STORED\r\n":
                raise Failure("memcached did not store soak:%d" % i)
        for i in range(n):
            s.sendall(b"get soak:%d\r\n" % i)
            want = [b"VALUE soak:%d 0 %d\r\n" % (i, len(str(i))), b"%d\r\n" % i, b"END\r\n"]
            if [f.readline() for _ in want] != want:
                raise Failure("memcached did not return soak:%d" % i)
    finally:
        f.close()
        s.close()
    return 2 * n


def churn(soak, mc, load, seconds):
    """Cycles until memaslap exits; the RSS after warm-up and warm-up's length."""
    t0 = time.monotonic()
    deadline = t0 + seconds + 60
    rss0 = warm_s = None
    next_observe = next_report = t0
    while load.poll() is None and len(soak.errors) < MAX_ERRORS:
        now = time.monotonic()
        if now > deadline:
            soak.errors.append("memaslap still running %d s after its time" % (now - t0 - seconds))
            break
        if mc.poll() is not None:
            break
        soak.cycle()
        if now >= next_observe:
            try:
                soak.observe()
            except Failure as e:
                soak.error(e)
            next_observe = now + OBSERVE_EVERY
        if rss0 is None and soak.cycles >= WARMUP_CYCLES \
                and int(soak.stats.fields()["evictions"]) > 0:
            rss0, warm_s = rss_kb(mc.pid), now - t0
        if now >= next_report:
            print("  %4.0f s: %6d cycles, %7d commands, RSS %s kB, %d errors" % (
                now - t0, soak.cycles, soak.commands, rss_kb(mc.pid), len(soak.errors)), flush=True)
            next_report = now + 10
    return rss0, warm_s, time.monotonic() - t0


def run(build_dir, binary, modules, seconds, procs):
    """The whole soak; a dict of what it measured."""
    port = mcb.free_port()
    mc = procs.add(mcb.spawn(binary, port, build_dir, threads=THREADS, pin=[],
                             extra=["-m", str(CACHE_MB)], preexec_fn=die_with_parent))
    mcb.wait_listening(mc, port)
    soak = Soak(build_dir, mc.pid, port, procs, modules)
    # Once before the load: the agent's lazily made state (its rescan
    # timer, the first module's allocations) is then in the fd baseline.
    soak.prime()
    r = {"soak": soak, "fds0": fd_count(mc.pid), "extra_ops": 0}
    ops0 = soak.stats.ops()
    print("soak: %d s; memcached -t %d -m %d (xprobes-dtrace build, agent preloaded), pid %d; "
          "memaslap -T 1 -c 32" % (seconds, THREADS, CACHE_MB, mc.pid), flush=True)
    with tempfile.TemporaryFile("w+") as out:  # a file: memaslap never blocks on a full pipe
        load = soak.loadgen = procs.start(mcb.memaslap_argv(port, seconds, pin=[]), stdout=out,
                                       stderr=subprocess.STDOUT)
        r["rss0"], r["warm_s"], r["elapsed"] = churn(soak, mc, load, seconds)
        r["rss1"] = rss_kb(mc.pid)
        if load.poll() is None:  # stopped early by errors: memaslap gives no figures
            load.kill()
        load.wait(timeout=REPLY_TIMEOUT)
        out.seek(0)
        text = out.read()
    r["tput"] = mcb.memaslap_result(text)
    if load.returncode != 0 or r["tput"] is None:
        soak.errors.append("memaslap exited %s without its figures: %s" % (load.returncode, text[-500:]))
    if mc.poll() is not None:
        soak.errors.append("memcached died (status %d)" % mc.returncode)
        return r
    r["served"] = soak.stats.ops() - ops0
    # memcached closes memaslap's connections when it notices them gone.
    fd_deadline = time.monotonic() + REPLY_TIMEOUT
    while (fd_count(mc.pid) or 0) > r["fds0"] and time.monotonic() < fd_deadline:
        time.sleep(0.01)  # polling a condition with a deadline
    r["fds1"] = fd_count(mc.pid)
    try:
        r["extra_ops"] = soak.final()
    except Failure as e:
        soak.errors.append(str(e))
    if mc.poll() is not None:
        soak.errors.append("memcached died (status %d)" % mc.returncode)
    return r


def report(r):
    """Print the figures; the list of failed checks."""
    soak, failed = r["soak"], []
    print("soak results (%.0f s under load):" % r["elapsed"])
    print("  cycles:              %d (%d by fresh `xprobes -c` processes), %.1f ms each" % (
        soak.cycles, soak.fresh_cycles, r["elapsed"] * 1000 / max(soak.cycles, 1)))
    print("  xprobes commands:    %d served (driver shell %d, observer shell %d, fresh processes %d)"
          % (soak.commands, soak.driver.served, soak.observer.served, soak.fresh_served))
    print("  errors:              %d" % len(soak.errors))
    for e in soak.errors:
        print("    " + e)
    if soak.errors:
        failed.append("errors")
    rss0, rss1 = r["rss0"], r["rss1"]
    if rss0 is None or rss1 is None:
        print("  memcached RSS:       no figure (%s)" % (
            "memcached died" if rss1 is None else "its cache never filled: run longer"))
        failed.append("RSS")
    else:
        grew = rss1 - rss0
        print("  memcached RSS:       %d kB after warm-up (%.0f s), %d kB at the end: %+d kB, "
              "%+.0f bytes per cycle (bound +%d kB)" % (
                  rss0, r["warm_s"], rss1, grew,
                  grew * 1024 / max(soak.cycles - WARMUP_CYCLES, 1), RSS_BOUND_KB))
        if grew > RSS_BOUND_KB:
            failed.append("RSS growth")
    print("  memcached fds:       %d before the load, %s after it" % (r["fds0"], r.get("fds1")))
    if r.get("fds1") is None or r["fds1"] > r["fds0"]:
        failed.append("descriptors")
    if r.get("tput"):
        print("  memaslap:            %d ops/s (%d ops); memcached counted %s GET/SETs" % (
            *r["tput"], r.get("served")))
    print("  hits while disabled: %d (%d windows of >= %d GET/SETs; the enabled module counted %d)"
          % (soak.disabled_hits, soak.disabled_windows, WINDOW_OPS, soak.enabled_hits))
    if soak.disabled_hits or not soak.enabled_hits:
        failed.append("hits while disabled")
    print("  left after unload:   %d modules mapped or listed; then %d SET/GETs answered "
          "through the same sites" % (soak.left_after_unload, r["extra_ops"]))
    if soak.left_after_unload or not r["extra_ops"]:
        failed.append("unload")
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(mcb.ROOT, "build"))
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("SOAK_SECONDS") or 600),
                    help="how long memaslap runs (default $SOAK_SECONDS or 600)")
    a = ap.parse_args()
    if a.seconds < 30:
        sys.exit("bench/soak.py: --seconds must be at least 30 (warm-up takes about 10)")
    build_dir = os.path.abspath(a.build)
    if shutil.which("memcaslap") is None:
        sys.exit("bench/soak.py: memcaslap (libmemcached-tools) is not installed")
    modules = [(os.path.basename(p), os.path.realpath(p)) for p in (
        os.path.join(build_dir, "modules", "mc_count.so"),
        os.path.join(build_dir, "bench", "mod_mc_hits.so"))]
    for _, path in modules:
        if not os.path.exists(path):
            sys.exit("bench/soak.py: %s is missing: `make B=%s soak` builds it" % (path, a.build))
    binary = mcb.build("xprobes", build_dir)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    procs = Procs()
    try:
        r = run(build_dir, binary, modules, a.seconds, procs)
    except Failure as e:
        sys.exit("soak: FAILED before the load: %s" % e)
    except (Interrupted, KeyboardInterrupt) as e:
        sys.exit("soak: interrupted (%s); everything it started is stopped" % (e or "SIGINT"))
    finally:
        procs.close()
    failed = report(r)
    print("soak: %s" % ("FAILED: " + ", ".join(failed) if failed else "passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
