# SPDX-License-Identifier: MIT
"""mcsnoop against the real memcached build: its lines match a
scripted client session exactly (text, meta and binary protocols, binary
keys, connection ids equal to memcached's own socket descriptors), its
filters, its JSON, drops when the reader falls behind while memcached
keeps serving, and a SIGKILLed mcsnoop leaves its module unloaded."""
import json
import os
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
MCSNOOP = os.path.join(BUILD, "mcsnoop")
MCLOAD = os.path.join(BUILD, "mcload")


sys.path.insert(0, os.path.join(ROOT, "tests", "memcached"))
import mcserver as _mc  # noqa: E402  (the real memcached, tests/memcached/mcserver.py)
import keytext  # noqa: E402  (the key text rule, tests/memcached/keytext.py)
xp = _mc.xp
recv_until = _mc.recv_until
memcached_bin = _mc.memcached_bin  # the fixture that builds it (cached)

# Safety net only: every wait below ends on a line, a state or an exit.
DEADLINE = 120


@pytest.fixture
def memcached(memcached_bin, tmp_path):
    mc = _mc.Memcached(memcached_bin, str(tmp_path))
    yield mc
    mc.stop()


def module_listed(mc):
    r = xp(mc.pid, "modules")
    assert r.returncode == 0, r.stderr
    return "mcsnoop.so" in r.stdout


def wait_for(cond, what):
    deadline = time.monotonic() + DEADLINE
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.01)  # a poll interval, not a synchronisation


class Snoop:
    """mcsnoop running on mc, its stdout and stderr lines gathered by threads."""

    def __init__(self, mc, *args):
        self.proc = subprocess.Popen([MCSNOOP, "-p", str(mc.pid), *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL)
        self.out, self.err = queue.Queue(), queue.Queue()
        self.lines, self.errors = [], []
        for stream, q in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._pump, args=(stream, q), daemon=True).start()
        # Loaded once the agent lists it, tied to mcsnoop's session.
        wait_for(lambda: module_listed(mc) or self.proc.poll() is not None, "the module")
        assert self.proc.poll() is None, self.stderr()

    @staticmethod
    def _pump(stream, q):
        for line in stream:
            q.put(line.decode("latin-1").rstrip("\n"))
        q.put(None)

    def _take(self, q, into, pred, what):
        deadline = time.monotonic() + DEADLINE
        while True:
            for line in into:
                if pred(line):
                    return line
            try:
                line = q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError("mcsnoop never printed " + what + "; stderr: " +
                                     self.stderr())
            assert line is not None, "mcsnoop ended before " + what + ": " + self.stderr()
            into.append(line)

    def wait_line(self, pred, what):
        return self._take(self.out, self.lines, pred, what)

    def wait_error(self, pred, what):
        return self._take(self.err, self.errors, pred, what)

    def finish(self, sig=signal.SIGINT):
        """Stop it; its exit status and every line it printed."""
        if sig and self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=DEADLINE)
        for q, into in ((self.out, self.lines), (self.err, self.errors)):
            while True:
                line = q.get(timeout=DEADLINE)
                if line is None:
                    break
                into.append(line)
        return rc

    def stderr(self):
        while not self.err.empty():
            line = self.err.get()
            if line is not None:
                self.errors.append(line)
        return "\n".join(self.errors)


server_fd = _mc.server_fd  # memcached's descriptor for a client socket


def send(sock, data, end):
    sock.sendall(data)
    return recv_until(sock, end)


# Binary protocol: 24-byte header, then extras, key, value.
def bin_request(opcode, key, extras=b"", value=b""):
    body = extras + key + value
    return struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), len(extras), 0, 0, len(body),
                       0, 0) + body


def bin_call(sock, opcode, key, extras=b"", value=b""):
    sock.sendall(bin_request(opcode, key, extras, value))
    head = b""
    while len(head) < 24:
        chunk = sock.recv(24 - len(head))
        assert chunk, "memcached closed the connection"
        head += chunk
    magic, op, _, _, _, status, bodylen = struct.unpack(">BBHBBHI", head[:12])
    assert magic == 0x81 and op == opcode
    body = b""
    while len(body) < bodylen:
        body += sock.recv(bodylen - len(body))
    return status


BIN_GET, BIN_SET, BIN_DELETE, BIN_TOUCH = 0x00, 0x01, 0x04, 0x1C


def script_text(s):
    """The text and meta protocol session; what mcsnoop must show for it:
    (cmd, key bytes, size, result), in order."""
    send(s, b"set k1 0 0 5\r\nhello\r\n", b"STORED\r\n")
    send(s, b"get k1\r\n", b"END\r\n")
    send(s, b"get missing\r\n", b"END\r\n")
    send(s, b"get k1 missing k\x01\\y k1\r\n", b"END\r\n")  # one event per key
    send(s, b"add k1 0 0 1\r\nx\r\n", b"NOT_STORED\r\n")
    send(s, b"append k1 0 0 2\r\nab\r\n", b"STORED\r\n")
    send(s, b"set n 0 0 1\r\n5\r\n", b"STORED\r\n")
    send(s, b"incr n 3\r\n", b"8\r\n")
    send(s, b"decr n 1\r\n", b"7\r\n")
    send(s, b"incr missing 1\r\n", b"NOT_FOUND\r\n")  # memcached fires nothing
    send(s, b"delete k1\r\n", b"DELETED\r\n")
    send(s, b"delete k1\r\n", b"NOT_FOUND\r\n")  # nothing either
    send(s, b"mg nothere v\r\n", b"EN\r\n")  # meta: misses fire command__get
    send(s, b"ms m1 3\r\nabc\r\n", b"HD\r\n")
    send(s, b"get __end__\r\n", b"END\r\n")
    return [("set", b"k1", 5, "stored"), ("get", b"k1", 5, "hit"),
            ("get", b"missing", None, "miss"),
            ("get", b"k1", 5, "hit"), ("get", b"missing", None, "miss"),
            ("get", b"k\x01\\y", None, "miss"), ("get", b"k1", 5, "hit"),
            ("add", b"k1", None, "not_stored"),
            ("append", b"k1", 2, "stored"),  # memcached passes the appended bytes
            ("set", b"n", 1, "stored"), ("incr", b"n", None, "hit"),
            ("decr", b"n", None, "hit"), ("delete", b"k1", None, "hit"),
            ("get", b"nothere", None, "miss"), ("set", b"m1", 3, "stored"),
            ("get", b"__end__", None, "miss")]


def script_binary(s):
    key = b"b\x00\xff k"  # NUL, a high byte and a space
    assert bin_call(s, BIN_SET, key, struct.pack(">II", 0, 0), b"12345678") == 0
    assert bin_call(s, BIN_GET, key) == 0
    assert bin_call(s, BIN_TOUCH, key, struct.pack(">I", 100)) == 0
    assert bin_call(s, BIN_TOUCH, b"gone", struct.pack(">I", 100)) == 1  # not found
    assert bin_call(s, BIN_DELETE, key) == 0
    assert bin_call(s, BIN_GET, key) == 1
    assert bin_call(s, BIN_GET, b"__end__") == 1
    return [("set", key, 8, "stored"), ("get", key, 8, "hit"), ("touch", key, 8, "hit"),
            ("touch", b"gone", None, "miss"), ("delete", key, None, "hit"),
            ("get", key, None, "miss"), ("get", b"__end__", None, "miss")]


def test_json_lines_match_a_scripted_session(memcached):
    snoop = Snoop(memcached, "--json")
    text, binary = memcached.client(), memcached.client()
    want_text, want_binary = script_text(text), script_binary(binary)
    want = {server_fd(memcached, text): want_text, server_fd(memcached, binary): want_binary}

    def ended(conn):
        return lambda line: (json.loads(line)["key"] == "__end__"
                             and json.loads(line)["conn"] == conn)
    for conn in want:
        snoop.wait_line(ended(conn), "the end marker of connection %d" % conn)
    assert snoop.finish() == 0, snoop.stderr()
    events = [json.loads(line) for line in snoop.lines]  # every line is JSON
    for conn, expected in want.items():
        got = [(e["cmd"], keytext.to_bytes(e["key"], e["key_escaped"]), e["size_bytes"],
                e["result"])
               for e in events if e["conn"] == conn]
        assert got == expected, conn
    assert {e["conn"] for e in events} == set(want)
    for e in events:
        assert e["key_bytes"] == len(keytext.to_bytes(e["key"], e["key_escaped"]))
        assert e["thread"] > 0 and e["time_ns"] > 0
        # Each of these commands was its own batch with a reply: a latency.
        assert e["lat_ns"] is not None and e["lat_ns"] > 0, e
    times = [e["time_ns"] for e in events]
    assert times == sorted(times)  # merged across threads by time
    # SIGINT: mcsnoop unloaded its module before it exited.
    assert not module_listed(memcached)
    text.close()
    binary.close()


def test_text_table_and_filters(memcached):
    # Gets of user:* keys only, three of them, then mcsnoop stops by itself.
    snoop = Snoop(memcached, "-c", "get,touch", "-k", "user:*", "-n", "3")
    s = memcached.client()
    send(s, b"set user:1 0 0 2\r\nhi\r\n", b"STORED\r\n")
    fd = server_fd(memcached, s)
    send(s, b"get user:1 other\r\n", b"END\r\n")
    send(s, b"delete user:1\r\n", b"DELETED\r\n")
    send(s, b"get xuser:2\r\n", b"END\r\n")
    send(s, b"get user:2\r\n", b"END\r\n")
    send(s, b"get user:3\r\n", b"END\r\n")
    send(s, b"get user:4\r\n", b"END\r\n")  # past -n 3: mcsnoop may be gone
    assert snoop.finish(sig=None) == 0, snoop.stderr()
    header, *rows = snoop.lines
    assert header.split() == ["TIME", "THREAD", "CONN", "CMD", "KEY", "SIZE", "RESULT",
                              "LAT(us)"]
    got = [row.split()[2:7] for row in rows]
    assert got == [[str(fd), "get", "user:1", "2", "hit"],
                   [str(fd), "get", "user:2", "-", "miss"],
                   [str(fd), "get", "user:3", "-", "miss"]]
    wait_for(lambda: not module_listed(memcached), "the module to be unloaded")
    s.close()


def test_escaped_keys_filter_on_their_escaped_form(memcached):
    snoop = Snoop(memcached, "-k", "a\\x01*", "-n", "1")
    s = memcached.client()
    send(s, b"get a\x02b\r\n", b"END\r\n")
    send(s, b"get a\x01b\r\n", b"END\r\n")
    assert snoop.finish(sig=None) == 0, snoop.stderr()
    assert [row.split()[4] for row in snoop.lines[1:]] == ["a\\x01b"]
    s.close()


def test_a_reader_that_falls_behind_drops_and_says_so(memcached):
    snoop = Snoop(memcached)
    snoop.proc.send_signal(signal.SIGSTOP)
    try:
        # 2 threads x 4096 events fill the rings many times over; memcached
        # must not wait for the stopped reader.
        r = subprocess.run([MCLOAD, "-s", "127.0.0.1:%d" % memcached.port, "-c", "4",
                            "-n", "100000", "-k", "1000"],
                           capture_output=True, text=True, timeout=DEADLINE,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stdout + r.stderr
        stats = xp(memcached.pid, "command", "mcsnoop.so", "stats").stdout
        total = stats.splitlines()[-1].split()
        assert int(total[total.index("dropped") + 1]) > 0, stats
    finally:
        snoop.proc.send_signal(signal.SIGCONT)
    line = snoop.wait_error(lambda l: l.startswith("mcsnoop: ") and l.endswith(" events dropped"),
                            "a drop count")
    assert int(line.split()[1]) > 0
    assert snoop.finish(signal.SIGTERM) == 0, snoop.stderr()
    assert not module_listed(memcached)


def test_sigkill_leaves_memcached_serving_and_the_module_unloaded(memcached):
    snoop = Snoop(memcached)
    assert "unloaded when its session ends" in xp(memcached.pid, "modules").stdout
    snoop.proc.kill()
    snoop.proc.wait()
    wait_for(lambda: not module_listed(memcached), "the agent to unload mcsnoop.so")
    s = memcached.client()
    send(s, b"set after 0 0 2\r\nok\r\n", b"STORED\r\n")
    assert send(s, b"get after\r\n", b"END\r\n") == b"VALUE after 0 2\r\nok\r\nEND\r\n"
    s.close()
    # And a later mcsnoop attaches again.
    again = Snoop(memcached, "-n", "1")
    s = memcached.client()
    send(s, b"get after\r\n", b"END\r\n")
    assert again.finish(sig=None) == 0
    assert again.lines[1].split()[4] == "after"
    s.close()


def mcsnoop_state(mc):
    """The agent's line for mcsnoop.so ('' when it has none)."""
    r = xp(mc.pid, "modules")
    assert r.returncode == 0, r.stderr
    return "".join(line for line in r.stdout.splitlines() if " mcsnoop.so " in line)


def test_run_again_while_the_last_ones_module_is_still_unloading(memcached_bin, tmp_path,
                                                                  monkeypatch):
    """A worker held inside another module's handler (mod_mc_stuck.so) keeps
    every grace period, so a killed mcsnoop's module stays "unloading"; an
    mcsnoop started meanwhile waits for it, says so, and then works."""
    flag = tmp_path / "stuck"
    flag.write_text("")
    monkeypatch.setenv("XP_STUCK_FILE", str(flag))
    mc = _mc.Memcached(memcached_bin, str(tmp_path))
    try:
        first = Snoop(mc)
        r = xp(mc.pid, "load", os.path.join(BUILD, "tests", "fixtures", "mod_mc_stuck.so"))
        assert r.returncode == 0, r.stdout + r.stderr
        held = mc.client()
        held.sendall(b"get stuck\r\n")
        wait_for(lambda: os.path.exists(str(flag) + ".in"), "a worker inside the handler")
        first.proc.kill()
        first.proc.wait()
        wait_for(lambda: "unloading" in mcsnoop_state(mc), "mcsnoop.so to be unloading")
        second = Snoop(mc, "-n", "1", "-k", "after")
        second.wait_error(lambda line: "waiting for an earlier copy" in line, "that it waits")
        assert second.proc.poll() is None
        flag.unlink()  # the worker leaves the handler; the old copy goes
        assert recv_until(held, b"END\r\n") == b"END\r\n"
        wait_for(lambda: "unloaded when its session ends" in mcsnoop_state(mc),
                 "the new copy, owned by the second mcsnoop")
        s = mc.client()
        send(s, b"get after\r\n", b"END\r\n")
        assert second.finish(sig=None) == 0, second.stderr()
        assert second.lines[1].split()[4] == "after"
        s.close()
        held.close()
    finally:
        mc.stop()


@pytest.mark.parametrize("args,message", [
    (["-c", "get,frob"], "unknown command 'frob'"),
    (["-k"], "needs an argument"),
    (["-n", "0"], "-n wants a positive count"),
    (["-d", "soon"], "-d wants a positive number of seconds"),
    (["-p", "12x"], "-p wants a process id"),
    (["--bogus"], "unknown option '--bogus'"),
    (["stray"], "unexpected argument 'stray'"),
])
def test_bad_input_exits_2(args, message):
    r = subprocess.run([MCSNOOP, *args], capture_output=True, text=True, timeout=DEADLINE,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert r.stdout == ""


def test_a_pid_that_is_not_running(tmp_path):
    # A child that has exited and been reaped: its pid names nothing.
    p = subprocess.Popen(["true"])
    p.wait()
    r = subprocess.run([MCSNOOP, "-p", str(p.pid)], capture_output=True, text=True,
                       timeout=DEADLINE, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and str(p.pid) in r.stderr, r.stderr


def test_latency_of_batches_and_of_noreply(memcached):
    snoop = Snoop(memcached, "--json", "-k", "q*")
    s, other = memcached.client(), memcached.client()
    # One multi-get, then three sets pipelined in one send: a batch each
    # (memcached writes the stores' replies once the read is used up),
    # every event of a batch with the batch's latency.
    send(s, b"get q1 q2\r\n", b"END\r\n")
    send(s, b"set q3 0 0 1\r\na\r\nset q4 0 0 1\r\nb\r\nset q5 0 0 1\r\nc\r\n",
         b"STORED\r\nSTORED\r\nSTORED\r\n")
    # Pipelined gets: memcached ends a batch after every get.
    send(s, b"get q6\r\nget q7\r\n", b"END\r\nEND\r\n")
    # noreply: memcached still ends the batch (with an empty, skipped
    # reply), so it has a latency too.  Sent alone: another connection
    # sees the item before the next command.
    s.sendall(b"set qn 0 0 1 noreply\r\nx\r\n")
    wait_for(lambda: send(other, b"get qn\r\n", b"END\r\n") != b"END\r\n", "the noreply set")
    send(s, b"get qz\r\n", b"END\r\n")
    snoop.wait_line(lambda l: json.loads(l)["key"] == "qz", "the last get")
    assert snoop.finish() == 0
    fd = server_fd(memcached, s)
    mine = [json.loads(line) for line in snoop.lines]
    mine = [(e["cmd"], e["key"], e["lat_ns"]) for e in mine if e["conn"] == fd]
    assert [m[:2] for m in mine] == [("get", "q1"), ("get", "q2"), ("set", "q3"), ("set", "q4"),
                                     ("set", "q5"), ("get", "q6"), ("get", "q7"),
                                     ("set", "qn"), ("get", "qz")]
    lat = [m[2] for m in mine]
    assert lat[0] == lat[1] and lat[0] is not None
    assert lat[2] == lat[3] == lat[4] and lat[2] is not None
    assert lat[5] is not None and lat[6] is not None
    assert lat[7] is not None and lat[8] is not None
    s.close()
    other.close()


def test_a_reader_that_goes_away_ends_it_cleanly(memcached):
    # `mcsnoop | head -1`: once the pipe's reader is gone, mcsnoop's next
    # write fails (SIGPIPE, EPIPE); it unloads its module and exits 0.
    proc = subprocess.Popen([MCSNOOP, "-p", str(memcached.pid)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert proc.stdout.readline().split()[0] == b"TIME"  # loaded, header written
    proc.stdout.close()
    s = memcached.client()
    deadline = time.monotonic() + DEADLINE
    while proc.poll() is None:  # each get is an event mcsnoop tries to print
        assert time.monotonic() < deadline, "mcsnoop kept running without a reader"
        send(s, b"get k\r\n", b"END\r\n")
    assert proc.wait() == 0, proc.stderr.read()
    assert not module_listed(memcached)
    s.close()


def pending_signals(pid):
    """The process's pending signals, shared and its main thread's, as a mask."""
    mask = 0
    for line in open("/proc/%d/status" % pid):
        if line.startswith(("SigPnd:", "ShdPnd:")):
            mask |= int(line.split()[1], 16)
    return mask


def test_a_stop_while_stdout_is_full_loses_nothing(memcached):
    # SIGINT while mcsnoop is blocked writing to a full pipe: the write
    # finishes once the pipe is read (SA_RESTART), then mcsnoop stops and
    # exits 0.  Without it stdio took the EINTR for a failed write: exit 1,
    # "writing the output failed".
    proc = subprocess.Popen([MCSNOOP, "-p", str(memcached.pid)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert proc.stdout.readline().split()[0] == b"TIME"  # loaded, header written
    s = memcached.client()
    key = b"k" * 200  # long lines fill the pipe in fewer events
    deadline = time.monotonic() + DEADLINE
    # Blocked in the kernel's pipe write ("pipe_write"; "anon_pipe_write" in 6.x).
    while "pipe_write" not in open("/proc/%d/wchan" % proc.pid).read():
        assert time.monotonic() < deadline, "mcsnoop never blocked on its full stdout"
        send(s, b"get " + key + b"\r\n", b"END\r\n")
    proc.send_signal(signal.SIGINT)
    # Once SIGINT is no longer pending its handler has run, with the write
    # still blocked: only then drain, or the write could finish first.
    while pending_signals(proc.pid) & (1 << (signal.SIGINT - 1)):
        assert time.monotonic() < deadline, "SIGINT stayed pending"
    out = proc.stdout.read()  # drains the pipe: the blocked write goes through
    assert proc.wait(timeout=DEADLINE) == 0, proc.stderr.read()
    assert out.endswith(b"\n") and key in out.splitlines()[-1]
    assert not module_listed(memcached)
    s.close()


def test_a_memcached_without_probe_sites_gets_the_watch_stream(tmp_path):
    # Debian's own memcached has no dtrace probes: mcsnoop reads its watch
    # stream instead (tests/mcsnoop/test_mcsnoop_watch.py), says so, and
    # injects nothing.
    if not os.path.exists("/usr/bin/memcached"):
        pytest.skip("Debian's memcached is not installed")
    mc = _mc.Memcached("/usr/bin/memcached", str(tmp_path), preload=False)
    try:
        r = subprocess.run([MCSNOOP, "-p", str(mc.pid), "-d", "0.2"], capture_output=True,
                           text=True, timeout=DEADLINE, stdin=subprocess.DEVNULL)
        assert r.returncode == 0 and "reading its watch stream instead" in r.stderr, r.stderr
        with open("/proc/%d/maps" % mc.pid) as f:
            assert "libxprobes" not in f.read()
    finally:
        mc.stop()


@pytest.mark.parametrize("tool", ["mcsnoop", "mctop", "mclat"])
def test_nothing_is_injected_into_a_process_that_is_not_memcached(tool):
    """A wrong -p (here a sleep) is refused before the agent goes in: no
    XProbes thread or library is left in a process the tool cannot use."""
    victim = subprocess.Popen(["sleep", "600"])
    try:
        r = subprocess.run([os.path.join(BUILD, tool), "-p", str(victim.pid)],
                           capture_output=True, text=True, timeout=DEADLINE,
                           stdin=subprocess.DEVNULL)
        assert r.returncode != 0, r.stdout + r.stderr
        assert "none of memcached's probe sites" in r.stderr, r.stderr
        assert "nothing was injected" in r.stderr, r.stderr
        with open("/proc/%d/maps" % victim.pid) as f:
            assert "libxprobes" not in f.read()
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
