"""A real memcached, built from Debian's source with xprobes-dtrace."""
import os
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


class Memcached:
    """A foreground memcached with the agent preloaded (or not)."""

    def __init__(self, binary, tmp, preload=True):
        self.port = free_port()
        env = dict(os.environ)
        env.pop("XPROBES_AGENT", None)
        if preload:
            env["LD_PRELOAD"] = os.path.join(BUILD, "libxprobes.so")
        self.proc = subprocess.Popen(
            [binary, "-u", "root", "-l", "127.0.0.1", "-p", str(self.port), "-U", "0",
             "-t", "2"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.pid = self.proc.pid
        self._wait_listening()

    def _wait_listening(self):
        # Ready means accepting connections: retry the connect itself (it
        # fails at once until memcached listens); bounded, no timer.
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, "memcached exited"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=5).close()
                return
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "memcached never listened"
                os.sched_yield()

    def client(self):
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def memcached(memcached_bin, tmp_path):
    mc = Memcached(memcached_bin, str(tmp_path))
    yield mc
    mc.stop()


def xp(*args, **kw):
    return subprocess.run([os.path.join(BUILD, "xprobes"), *map(str, args)],
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, **kw)
