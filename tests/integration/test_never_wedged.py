# SPDX-License-Identifier: MIT
"""No client, module or handler can wedge the agent: every session has its
own deadlines, a slow unload or module command says what it waits for and
lets everyone else through, and the agent never blocks on a listener."""
import select
import struct
import time

from .xp import (TIMEOUT, base_env, closed_by_peer, connect_agent, fails, fixture, ok,
                 recv_frame, send_frame)

MAX_CLIENTS = 16


def ask(sock, line):
    send_frame(sock, line.encode())
    return recv_frame(sock)


def test_session_survives_a_one_shot_client(procs):
    # The old serve loop read a client's slot as the listener's after a
    # disconnect and blocked in accept(): the open session got no reply.
    t = procs.target("sitehost")
    a = connect_agent(t.pid)
    assert ask(a, "version")[0] == 0
    for _ in range(3):
        assert ok(t.pid, "version").startswith("xprobes agent ")
    status, text = ask(a, "version")
    assert status == 0 and text.startswith("xprobes agent "), text


def test_partial_request_does_not_stall_other_clients(procs):
    t = procs.target("sitehost")
    slow = connect_agent(t.pid)
    slow.sendall(b"\x40\x00")  # half a length header, then nothing
    # Another client is served while the slow one is still connected...
    assert ok(t.pid, "version").startswith("xprobes agent ")
    slow.setblocking(False)
    try:
        assert slow.recv(1) == b"", "the slow client was answered"
    except BlockingIOError:
        pass  # still open: the agent did not wait for it to finish
    # ... and the slow one is dropped once its request deadline passes.
    slow.setblocking(True)
    slow.settimeout(TIMEOUT)
    assert closed_by_peer(slow)


def test_client_limit_and_idle_sessions(procs):
    t = procs.target("sitehost")
    held = [connect_agent(t.pid) for _ in range(MAX_CLIENTS)]
    for s in held:
        assert ask(s, "version")[0] == 0
    extra = connect_agent(t.pid)
    status, text = recv_frame(extra)
    assert status == 1 and "too many xprobes sessions" in text, text
    # A slot freed is a slot for the next client.
    held.pop().close()
    assert ok(t.pid, "version").startswith("xprobes agent ")


def test_idle_session_makes_room_for_a_new_one(procs):
    t = procs.target("sitehost", env=base_env(XPROBES_EVICT_IDLE_MS="0"))
    held = [connect_agent(t.pid) for _ in range(MAX_CLIENTS)]
    for s in held:
        assert ask(s, "version")[0] == 0
    # All slots taken by idle sessions: the newcomer is served, and the
    # session idle longest is told why it was closed.
    assert ok(t.pid, "version").startswith("xprobes agent ")
    status, text = recv_frame(held[0])
    assert status == 1 and "idle while another session needed its place" in text, text
    assert closed_by_peer(held[0])


def test_idle_sessions_time_out(procs):
    t = procs.target("sitehost", env=base_env(XPROBES_IDLE_TIMEOUT_MS="200"))
    held = [connect_agent(t.pid) for _ in range(MAX_CLIENTS)]
    for s in held:
        assert closed_by_peer(s)  # each closed by the agent, not by us
    assert ok(t.pid, "version").startswith("xprobes agent ")


def test_client_that_stops_reading_is_dropped(procs):
    t = procs.target("sitehost")
    ok(t.pid, "load", fixture("mod_stuck.so"))
    reader = connect_agent(t.pid)
    # A 1 MiB reply, far larger than the socket buffers, never read.
    send_frame(reader, b"command mod_stuck.so big 3000000")
    # Everyone else is served meanwhile.
    assert ok(t.pid, "version").startswith("xprobes agent ")
    assert ok(t.pid, "modules").startswith("* mod_stuck.so")
    # The agent gives up on the reader: its end hangs up.
    p = select.poll()
    p.register(reader, select.POLLHUP)
    events = 0
    deadline = time.monotonic() + TIMEOUT
    while not events & select.POLLHUP and time.monotonic() < deadline:
        events = dict(p.poll(1000)).get(reader.fileno(), 0)
    assert events & select.POLLHUP, "the agent kept a client that stopped reading"
    # What it had sent is less than the reply: it did not wait for us.
    reader.settimeout(TIMEOUT)
    got = b""
    while True:
        chunk = reader.recv(1 << 20)
        if not chunk:
            break
        got += chunk
    (n,) = struct.unpack("<I", got[:4])
    assert n > 1 << 20 and len(got) < 4 + n, (n, len(got))
    assert ok(t.pid, "version").startswith("xprobes agent ")


def test_handler_that_never_returns(procs, tmp_path):
    flag = tmp_path / "stuck"
    flag.write_text("")
    t = procs.target("sitehost", env=base_env(XP_STUCK_FILE=str(flag)))
    ok(t.pid, "load", fixture("mod_stuck.so"))
    other = connect_agent(t.pid)  # a second session, open throughout
    t.send("hit 42")
    t.expect("in handler")
    # unload cannot finish: it says so, and on which thread, and returns.
    out, err = fails(t.pid, "unload", "mod_stuck.so")
    assert f"thread {t.pid} is still inside a handler" in out + err, out + err
    # Nothing else is blocked: the other session, new clients, commands.
    status, text = ask(other, "modules")
    assert status == 0 and "unloading (a thread is still in a handler)" in text, text
    sites = ok(t.pid, "sites")
    assert "- host_tick(long) => *_tick -> on_tick" in sites and "(unloading)" in sites, sites
    out, err = fails(t.pid, "unload", "mod_stuck.so")
    assert "being unloaded" in out + err, out + err
    out, err = fails(t.pid, "load", fixture("mod_stuck.so"))
    assert "still being unloaded" in out + err, out + err
    # When the handler returns, the unload completes by itself.
    flag.unlink()
    t.expect("hit 42 done")
    while "mod_stuck.so" in ask(other, "modules")[1]:
        pass
    t.assert_healthy()


def test_module_command_time_limit(procs, tmp_path):
    flag = tmp_path / "stuck"
    flag.write_text("")
    env = base_env(XP_STUCK_FILE=str(flag), XPROBES_COMMAND_TIMEOUT_MS="300")
    t = procs.target("sitehost", env=env)
    ok(t.pid, "load", fixture("mod_stuck.so"))
    out, err = fails(t.pid, "command", "mod_stuck.so", "stuck")
    assert "has not returned after" in out + err and "goes on in thread" in out + err, out + err
    t.expect("in command")
    assert ok(t.pid, "version").startswith("xprobes agent ")
    t.hit(3)  # application threads are not held either
    out, err = fails(t.pid, "unload", "mod_stuck.so")
    assert "one of its commands is still running" in out + err, out + err
    flag.unlink()
    while "mod_stuck.so" in ok(t.pid, "modules"):
        pass
    t.assert_healthy()
