# SPDX-License-Identifier: MIT
"""`make demo` (scripts/demo.sh, the main job): memcached without an
agent, mcload's Zipf load, mctop injected into it.  Without a terminal it
must end by itself after its -C blocks, showing the hottest key; in a
terminal Q (or Ctrl-C) ends it.  Either way nothing it started may be left
running."""
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))


sys.path.insert(0, os.path.join(ROOT, "tests", "memcached"))
import mcserver as _mc  # noqa: E402  (the real memcached, tests/memcached/mcserver.py)


def demo_env(tmp_path):
    # TMPDIR: the demo's files land under tmp_path; DEMO_PORT: a port
    # nobody else's demo is using.
    return dict(os.environ, TMPDIR=str(tmp_path), DEMO_PORT=str(_mc.free_port()),
                DEMO_COUNT="3")


def assert_nothing_left(output, tmp_path):
    # The demo shows memcached's command line: its -P pidfile and -p port
    # name it, and mcload is the one process with -s 127.0.0.1:PORT.
    m = re.search(r"memcached -u root -l 127\.0\.0\.1 -p (\d+) .*-P (\S+) &\r?\n"
                  r"memcached is pid", output)
    assert m, output
    port, pidfile = int(m.group(1)), m.group(2)
    assert pidfile.startswith(str(tmp_path))
    left = [p for arg in (pidfile, "127.0.0.1:%d" % port) for p in _mc._pids_with_arg(arg)
            if not _mc._gone(p)]
    assert not left, "the demo left %s running" % left
    assert os.listdir(tmp_path) == [], "the demo left its directory behind"


def test_demo_without_a_terminal_ends_by_itself(tmp_path):
    # Files, not pipes: a process the demo left behind would hold a pipe
    # open and hang the read instead of failing the check below.
    logs = tmp_path.parent / (tmp_path.name + "-logs")
    logs.mkdir()
    with open(logs / "out", "w+") as out, open(logs / "err", "w+") as err:
        rc = subprocess.run(["sh", "scripts/demo.sh", BUILD], cwd=ROOT, env=demo_env(tmp_path),
                            stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                            timeout=900).returncode
        out.seek(0)
        err.seek(0)
        r = subprocess.CompletedProcess([], rc, out.read(), err.read())
    assert r.returncode == 0, r.stdout + r.stderr
    # mctop had to inject the agent: memcached was started without one.
    assert "has no agent; injecting" in r.stderr, r.stderr
    blocks = r.stdout.count("MEMCACHED KEY")
    assert blocks == 3, r.stdout
    # The Zipf load's hottest key heads every block.
    heads = re.findall(r"MEMCACHED KEY[^\n]*\n(\S+)", r.stdout)
    assert heads == ["key:0"] * 3, r.stdout
    assert "Done: mcload and memcached are stopped" in r.stdout
    assert_nothing_left(r.stdout, tmp_path)


def run_in_terminal(tmp_path, key):
    """The demo in a pseudo-terminal of 120x40; once mctop's table shows
    key:0, type key; (exit status, everything it wrote)."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(ROOT)
            env = dict(demo_env(tmp_path), TERM="xterm")
            os.execvpe("sh", ["sh", "scripts/demo.sh", BUILD], env)
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    out, sent = b"", False
    deadline = time.monotonic() + 900  # only catches a hang (a first build is slow)
    try:
        while True:
            assert time.monotonic() < deadline, out.decode(errors="replace")[-2000:]
            ready, _, _ = select.select([fd], [], [], 1)
            if ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: the demo and its terminal are gone
                    break
                if not data:
                    break
                out += data
            if not sent and b"key:0" in out:
                os.write(fd, key)
                sent = True
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    assert sent, out.decode(errors="replace")[-2000:]
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


@pytest.mark.parametrize("key,status", [(b"Q", 0), (b"\x03", 130)], ids=["Q", "ctrl-c"])
def test_demo_in_a_terminal_quits_and_stops_everything(tmp_path, key, status):
    rc, out = run_in_terminal(tmp_path, key)
    assert rc == status, out[-2000:]
    # The full-screen table, not -C blocks: the alternate screen was used
    # and left again.
    assert "\x1b[?1049h" in out and "\x1b[?1049l" in out, out[-2000:]
    assert_nothing_left(out, tmp_path)
