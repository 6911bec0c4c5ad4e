# SPDX-License-Identifier: MIT
"""A real memcached, built from Debian's source with xprobes-dtrace."""
import os
import re
import signal
import socket
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="session")
def memcached_bin():
    r = subprocess.run([os.path.join(ROOT, "scripts", "build-memcached.sh"), "xprobes",
                        os.path.join(BUILD, "xprobes-dtrace")],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def _pids_with_arg(arg):
    """Processes whose argv holds ARG (a path unique to one test)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if arg.encode() in argv:
            pids.append(int(d))
    return pids


def _gone(pid):
    """True once PID has exited (a zombie counts: it is no longer running)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


class Memcached:
    """memcached with the agent preloaded (or not).

    daemon=True runs `memcached -d -P PIDFILE`, as a service would: the
    process we start forks, the child calls setsid() and carries on as the
    daemon, the parent exits.  The agent has to follow into the child.  The
    pid comes from the pidfile; ready means the pidfile is there (memcached
    writes it by rename, after its sockets listen) and a TCP connect
    succeeds.  daemon=False runs it in the foreground as our child."""

    def __init__(self, binary, tmp, preload=True, daemon=True, threads=2):
        self.port = free_port()
        self.daemon = daemon
        self.pidfile = os.path.join(tmp, "memcached-%d.pid" % self.port)
        env = dict(os.environ)
        env.pop("XPROBES_AGENT", None)
        env.pop("LD_PRELOAD", None)
        if preload:
            env["LD_PRELOAD"] = os.path.join(BUILD, "libxprobes.so")
        argv = [binary, "-u", "root", "-l", "127.0.0.1", "-p", str(self.port), "-U", "0",
                "-t", str(threads)]
        if daemon:
            argv += ["-d", "-P", self.pidfile]
        self.errlog = os.path.join(tmp, "memcached-%d.err" % self.port)
        with open(self.errlog, "wb") as err:
            self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err)
        self.pid = None
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self):
        # Poll, bounded by a safety deadline that only catches a hang: the
        # connect fails at once until memcached listens.
        deadline = time.monotonic() + 60
        if self.daemon:
            # The process we started exits as soon as it has forked.
            rc = self.proc.wait(timeout=60)
            assert rc == 0, "memcached -d failed (%d): %s" % (rc, self.stderr())
            forked = self._leftovers()  # the daemon, still starting up
            assert forked, "memcached -d left no daemon behind"
            while not os.path.exists(self.pidfile):
                assert not all(_gone(p) for p in forked), "the daemon died before its pidfile"
                assert time.monotonic() < deadline, "memcached -d never wrote its pidfile"
                os.sched_yield()
            with open(self.pidfile) as f:
                self.pid = int(f.read())
        else:
            self.pid = self.proc.pid
        while True:
            assert not _gone(self.pid), "memcached exited: " + self.stderr()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=5).close()
                return
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "memcached never listened"
                os.sched_yield()

    def stderr(self):
        with open(self.errlog, errors="replace") as f:
            return f.read()

    def _leftovers(self):
        # Our daemon is the process with our unique pidfile path in its argv.
        return [p for p in _pids_with_arg(self.pidfile) if not _gone(p)]

    def client(self):
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)

    def stop(self):
        """Kill it, whatever state the test left it in: the process we
        started and any process still running with our pidfile's path in
        its argv (the daemon, whether or not it got as far as writing the
        pidfile).  Then wait until they are gone."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if not self.daemon:
            return
        # Only processes carrying our pidfile's path: never a stranger that
        # reused a pid.
        pids = self._leftovers()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 60
        while not all(_gone(p) for p in pids):
            assert time.monotonic() < deadline, "memcached %s would not die" % sorted(pids)
            os.sched_yield()


@pytest.fixture
def memcached(memcached_bin, tmp_path):
    mc = Memcached(memcached_bin, str(tmp_path))
    yield mc
    mc.stop()


STOCK = "/usr/bin/memcached"  # Debian's own: no probe sites (fallbacks)


@pytest.fixture
def stock(tmp_path):
    """Debian's memcached, 2 worker threads, no agent."""
    if not os.path.exists(STOCK):
        pytest.fail("Debian's memcached is not installed (scripts/install-deps.sh)")
    mc = Memcached(STOCK, str(tmp_path), preload=False)
    yield mc
    mc.stop()


def log_watchers(mc):
    """memcached's own count of `watch` connections."""
    with mc.client() as s:
        s.sendall(b"stats\r\n")
        text = recv_until(s, b"END\r\n").decode()
    return int(re.search(r"STAT log_watchers (\d+)", text).group(1))


def wait_log_watchers(mc, n, deadline_s=120):
    """Poll log_watchers until it is n (the deadline only catches a hang)."""
    deadline = time.monotonic() + deadline_s
    while log_watchers(mc) != n:
        assert time.monotonic() < deadline, "log_watchers never became %d" % n
        time.sleep(0.02)  # polling memcached's state, bounded by the deadline


def xp(*args, **kw):
    return subprocess.run([os.path.join(BUILD, "xprobes"), *map(str, args)],
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, **kw)


def recv_until(sock, end):
    """What memcached sends until it ends with `end` (a whole reply)."""
    data = b""
    while not data.endswith(end):
        chunk = sock.recv(65536)
        assert chunk, "memcached closed the connection"
        data += chunk
    return data


def server_fd(mc, sock):
    """memcached's descriptor for the client socket sock: the socket whose
    TCP endpoints are sock's, reversed, found by its inode.  (Call it once
    memcached answered on sock: a connection not accepted yet has none.)"""
    port = sock.getsockname()[1]
    local = "0100007F:%04X" % mc.port
    remote = "0100007F:%04X" % port
    inode = None
    with open("/proc/%d/net/tcp" % mc.pid) as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == local and fields[2] == remote and fields[9] != "0":
                inode = fields[9]
    assert inode, "no server socket for client port %d" % port
    fddir = "/proc/%d/fd" % mc.pid
    for fd in os.listdir(fddir):
        try:
            if os.readlink(os.path.join(fddir, fd)) == "socket:[%s]" % inode:
                return int(fd)
        except OSError:
            pass
    raise AssertionError("memcached has no descriptor for socket inode " + inode)
