# SPDX-License-Identifier: MIT
"""Recording memcached at saturation: every record the tracer
should have written is either in the directory or counted lost, and every
view marks the loss where it happened.

The calls are counted independently of the tracer: scripts/build-memcached.sh
`traced` builds Debian's memcached as `pkg-config xprobes-trace` builds a
program, plus -finstrument-functions and tests/trace/callcount.c, whose
hooks count two records for each call made while its function's patch site
is a call to the tracer, and write the total at exit.  The rings are small
(-b 64 KiB) so that records are lost under mcload's load.  Every wait is on
a process's exit or a reply, bounded by TIMEOUT."""
import os
import re
import signal
import socket
import struct
import subprocess
import sys

import pytest

from tracefix import BUILD, REPO, TIMEOUT, XPROBES

sys.path.insert(0, os.path.join(REPO, "tests", "memcached"))
import mcserver as _mc  # noqa: E402  (the real memcached)


@pytest.fixture(scope="module")
def traced_memcached():
    r = subprocess.run([os.path.join(REPO, "scripts", "build-memcached.sh"), "traced", BUILD,
                        "count"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def gets_served(port):
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        s.sendall(b"stats\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            chunk = s.recv(65536)
            assert chunk
            data += chunk
    return int(re.search(rb"STAT cmd_get (\d+)", data).group(1))


def dat_records(d):
    """(entries and exits written, records the LOST records say went).  An
    exit whose entry was not recorded is written as an entry, the
    xprobes:entry_not_recorded event and the exit: one record of the
    agent's."""
    written = lost = 0
    events = os.path.join(d, "events.txt")
    marks = re.findall(r"^EVENT: (\d+) xprobes:entry_not_recorded$",
                       open(events).read() if os.path.exists(events) else "", re.M)
    mark = int(marks[0]) if marks else None
    for name in os.listdir(d):
        if not name.endswith(".dat") or name.startswith("perf"):
            continue
        data = open(os.path.join(d, name), "rb").read()
        for (word,) in struct.iter_unpack("<8xQ", data):
            kind = word & 3
            if kind in (0, 1):
                written += 1
            elif kind == 2:
                lost += word >> 16
            elif word >> 16 == mark:
                written -= 1  # the entry before it was made up
    return written, lost


def test_written_plus_lost_is_every_call_and_every_view_marks_the_loss(
        traced_memcached, tmp_path, monkeypatch):
    count_file = tmp_path / "calls"
    monkeypatch.setenv("XP_CALLCOUNT_FILE", str(count_file))
    mc = _mc.Memcached(traced_memcached, str(tmp_path), preload=False, daemon=False, threads=4)
    load = None
    try:
        load = subprocess.Popen([os.path.join(BUILD, "mcload"), "-s", f"127.0.0.1:{mc.port}",
                                 "-c", "8", "-T", "2", "-d", "600"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while gets_served(mc.port) < 2000:  # the load is on
            assert load.poll() is None, "mcload ended"
        rec = str(tmp_path / "rec")
        r = subprocess.run([XPROBES, str(mc.pid), "trace", "record", "--no-libcall", "-o", rec, "-b", "64",
                            "-d", "3"], capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        load.send_signal(signal.SIGINT)
        load.wait(timeout=TIMEOUT)
        mc.proc.send_signal(signal.SIGTERM)  # memcached exits; the counter writes its file
        assert mc.proc.wait(timeout=TIMEOUT) == 0, mc.stderr()
    finally:
        if load and load.poll() is None:
            load.kill()
        mc.stop()
    m = re.search(r"trace record: (\d+) records of (\d+) threads in \S+, (\d+) lost", r.stderr)
    assert m, r.stderr
    summary_lost, threads = int(m.group(3)), int(m.group(2))
    counted = int(re.fullmatch(r"records=(\d+)\n", count_file.read_text()).group(1))
    written, lost = dat_records(rec)
    print(f"counted={counted} written={written} lost={lost} threads={threads}")
    assert lost > 0 and written > 0, r.stderr  # 64 KiB rings: memcached outran the reader
    assert lost == summary_lost, r.stderr
    # Exits of calls still open at the stop come after the last drain:
    # counted, never written; a few per thread at most.  The other way, a
    # call can pass its patch site while it is still our call (recorded)
    # and reach the counter's check after the stop put the NOP back (not
    # counted): at most one call, two records, per thread (seen once in
    # a full run: -2).
    assert -2 * threads <= counted - (written + lost) <= 64 * threads, \
        (counted, written, lost, r.stderr)

    def view(*args):
        v = subprocess.run([XPROBES, "trace", *args, "-d", rec], capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert v.returncode == 0, v.stderr
        return v.stdout
    assert "records lost */" in view("cat")
    assert '{"name":"records lost","ph":"i"' in view("cat", "--format", "chrome")
    assert "[records lost] " in view("cat", "--format", "folded")
    assert re.search(rf"\[{lost} records lost\]", view("stat"))
    u = subprocess.run(["uftrace", "replay", "-d", rec], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert u.returncode == 0 and "LOST" in u.stdout, u.stderr
