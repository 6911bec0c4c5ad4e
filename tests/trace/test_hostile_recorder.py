# SPDX-License-Identifier: MIT
"""Root's `trace record` (and `trace cat`) against a hostile target that
sends what no real agent would: entries without end, exits that match no
entry, an object whose symbol table claims 6 GB.  The tool's memory must
stay bounded (its peak RSS, from wait4), and SIGINT and -d must end it
whatever the target sends.

The target is test_hostile_target.py's fake agent (uid 65534, serving the
control protocol itself), with a ring in its own memory that a thread of
it keeps full: whatever the tool drains is there again at once.  Every
wait is on a line from it or on the tool's exit, the timeouts only a
safety bound."""
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import pytest

from test_hostile_target import CLOCK, FakeAgent, NOBODY, fake, frame_hex, text  # noqa: F401
from tracefix import TIMEOUT, XPROBES, env

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the tool runs as root "
                       "against a target of uid 65534"),
    pytest.mark.skipif(shutil.which("setpriv") is None,
                       reason="needs setpriv (util-linux) to run as uid 65534"),
]

ENTRY, EXIT, LOST = 0, 1, 2  # uftrace's record types (bits 0-1)
MIB = 1 << 20
START = "trace start *"  # whatever options the tool adds

# A ring of version 2 (drained: head, tail) for tid 7, made of runs of
# records [kind, addr, count]; a thread keeps head = tail + cap, so every
# record drained is there again, and says "tail N" every say_every records.
RING_SETUP = r"""
import threading, time
R = sc["ring"]
cap = R["cap"]
ring = ctypes.create_string_buffer(64 + 16 * cap)
at = ctypes.addressof(ring)
struct.pack_into("<IIiIQQQQ", ring, 0, 0x58505452, 2, 7, 0, cap, cap, 0, 0)
body = b"".join(struct.pack("<QQ", 1000 << 2 | kind, addr) * n for kind, addr, n in R["runs"])
ctypes.memmove(at + 64, body, len(body))
del body
subst["{RING}"] = hex(at)
head = ctypes.c_uint64.from_address(at + 24)
tail = ctypes.c_uint64.from_address(at + 40)

def feed():
    said = 0
    while True:
        t = tail.value
        head.value = t + cap
        if t >= said + R["say_every"]:
            said = t
            print("tail", t, flush=True)
        time.sleep(0.0005)

threading.Thread(target=feed, daemon=True).start()
"""


def ring_agent(fake, cap, runs, say_every, replies=None):
    return fake({"setup": RING_SETUP,
                 "ring": {"cap": cap, "runs": runs, "say_every": say_every},
                 "replies": {"trace select none": text("ok\n"),
                             START: text("tracing\n"),
                             "trace stop": text("stopped\n"),
                             "trace objects": text(""),
                             "trace buffers": text(CLOCK + f"buf tid=7 addr={{RING}} cap={cap}\n"),
                             **(replies or {})}})


def wait_tail(agent, n):
    """Until the agent says the tool drained n records or more."""
    fd, buf = agent.p.stdout.fileno(), b""
    deadline = time.monotonic() + TIMEOUT
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if int(line.split()[1]) >= n:
                return
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(left, 0))
        assert ready, f"the tool did not drain {n} records in {TIMEOUT} s"
        chunk = os.read(fd, 4096)
        assert chunk, "the fake agent ended"
        buf += chunk


# The tool's parent: a fresh interpreter, small, that forks the tool,
# passes SIGINT and SIGTERM on, and prints the tool's status and peak RSS
# (wait4).  A process's peak RSS counts the memory it had before its exec,
# and a child forked from this test's interpreter (hundreds of MB late in
# a full run) starts as large as it: measured through this launcher, the
# peak is the tool's own (plus the launcher's few MB).
LAUNCH = r"""
import os, signal, sys
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # its output is not ours to print
    os.execv(sys.argv[1], sys.argv[1:])
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, lambda s, f: os.kill(pid, s))
while True:
    try:
        _, status, ru = os.wait4(pid, 0)
        break
    except InterruptedError:
        continue
print(os.waitstatus_to_exitcode(status), ru.ru_maxrss * 1024, flush=True)
"""


class Tool:
    """Root's xprobes, whose peak RSS wait4 gives at its end."""

    def __init__(self, *args):
        self.err = tempfile.TemporaryFile()
        self.p = subprocess.Popen([sys.executable, "-c", LAUNCH, XPROBES, *map(str, args)],
                                  stdout=subprocess.PIPE, stderr=self.err, env=env(), text=True)

    def interrupt(self):
        os.kill(self.p.pid, signal.SIGINT)

    def wait(self):
        """(exit status, peak RSS in bytes, stderr); fails if it runs on."""
        try:
            out, _ = self.p.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            pytest.fail(f"the tool still ran {TIMEOUT} s later")
        status, peak = map(int, out.split())
        self.err.seek(0)
        return status, peak, self.err.read().decode(errors="replace")


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    return [struct.unpack_from("<QQ", data, i) for i in range(0, len(data) - 15, 16)]


def test_endless_entries_keep_memory_bounded(fake, tmp_path):
    """Entries that never return: the stack of open calls grew without
    limit (3.3 GB in 8 s).  16M of them now cost no more than 1024 frames,
    and what is left out is marked in the recording as lost."""
    a = ring_agent(fake, 1 << 16, [[0, 0x401000, 1 << 16]], 1 << 20)
    rec = tmp_path / "rec"
    tool = Tool(a.pid, "trace", "record", "-o", rec)
    wait_tail(a, 16 << 20)  # 128 MiB of open calls, had they been kept
    tool.interrupt()
    status, peak, err = tool.wait()
    assert status == 0, err
    assert peak < 64 * MIB, (peak, err)
    assert "deeper than the 1024" in err, err
    kinds = [word & 3 for _, word in records(rec / "7.dat")]
    assert kinds.count(ENTRY) == 1024, kinds.count(ENTRY)
    assert LOST in kinds


@pytest.mark.parametrize("stop", ["sigint", "deadline"])
def test_unmatched_exits_leave_stop_answered(fake, tmp_path, stop):
    """A million entries, then a million exits that match none of them:
    each exit scanned the whole stack, and SIGINT and -d were seen only
    between passes, so the tool ran on for as long as the scans took
    (only SIGKILL ended it).  Now it ends after either."""
    half = 1 << 20
    a = ring_agent(fake, 2 * half, [[0, 0x401000, half], [1, 0x402000, half]], half)
    args = ["-d", "1"] if stop == "deadline" else []
    tool = Tool(a.pid, "trace", "record", *args, "-o", tmp_path / "rec")
    wait_tail(a, half)  # the entries are drained; the exits come
    if stop == "sigint":
        tool.interrupt()
    status, _, err = tool.wait()
    assert status == 0, err


@pytest.mark.parametrize("stop", ["sigint", "deadline"])
def test_unfinished_reply_leaves_stop_answered(fake, tmp_path, stop):
    """An agent whose reply to `trace stop` never ends (its frame promises
    100 bytes; 5 come): with --timeout 0 the tool waited for ever after
    SIGINT or -d.  Now a second after the stop it gives up on the agent
    and keeps what it drained."""
    a = ring_agent(fake, 1 << 10, [[0, 0x401000, 4], [1, 0x401000, 4]] * 128, 1 << 10,
                   {"trace stop": {"raw": frame_hex(100, b"\x00stop")}})
    args = ["-d", "1"] if stop == "deadline" else []
    tool = Tool("--timeout", "0", a.pid, "trace", "record", *args, "-o", tmp_path / "rec")
    wait_tail(a, 1 << 10)
    if stop == "sigint":
        tool.interrupt()
    status, _, err = tool.wait()
    assert status == 0, err
    assert "did not answer within a second of the stop" in err, err
    assert (tmp_path / "rec" / "7.dat").stat().st_size > 0


# A file of 6 GB, sparse: an ELF header and a symbol table section said to
# cover the whole file.  libelf's ELF_C_READ read the section whole.
HUGE = 6 << 30

MAP_SETUP = r"""
fd = os.open(sc["object"], os.O_RDONLY)
obj = mmap.mmap(fd, 4096, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
subst["{OBJ}"] = hex(ctypes.addressof(ctypes.c_char.from_buffer(obj)))
"""


def shdr(kind, offset, size, link=0, entsize=0):
    return struct.pack("<IIQQQQIIQQ", 0, kind, 0, 0, offset, size, link, 0, 8, entsize)


@pytest.fixture
def huge_object():
    d = tempfile.mkdtemp(prefix="xp-hostile-huge-")
    os.chmod(d, 0o755)
    path = os.path.join(d, "libhuge.so")
    with open(path, "wb") as f:
        f.truncate(HUGE)
        ehdr = bytearray(64)
        ehdr[:7] = b"\x7fELF\x02\x01\x01"
        struct.pack_into("<HHIQQQIHHHHHH", ehdr, 16, 3, 62, 1, 0, 0, 64, 0, 64, 56, 0, 64, 3, 0)
        f.write(ehdr + bytes(64) + shdr(2, 0, HUGE - HUGE % 24, link=2, entsize=24)
                + shdr(3, 0, 4096))
    os.chmod(path, 0o644)
    yield path
    shutil.rmtree(d)


@pytest.mark.parametrize("cmd", ["record", "cat"])
def test_huge_symbol_table_is_not_read(fake, huge_object, tmp_path, cmd):
    """Root's tool read the 6 GB section whole (5.9 GB of RSS): now the
    object is skipped, named, and its functions shown as addresses."""
    a = fake({"setup": MAP_SETUP, "object": huge_object,
              "replies": {"trace select none": text("ok\n"),
                          START: text("tracing\n"),
                          "trace stop": text("stopped\n"),
                          "trace objects": text(f"object base={{OBJ}} sites=0 table=0x0 "
                                                f"path={huge_object}\n"),
                          "trace buffers": text(CLOCK)}})
    args = ["record", "-d", "1", "-o", tmp_path / "rec"] if cmd == "record" else ["cat"]
    status, peak, err = Tool(a.pid, "trace", *args).wait()
    assert peak < 256 * MIB, (peak, err)
    assert f"not reading the symbols of {huge_object}" in err, err
    assert status == (0 if cmd == "record" else 1), err  # cat: a file refused
