# SPDX-License-Identifier: MIT
"""The application owns its descriptor numbers.  A program that closes
every descriptor above stderr (as daemons do) and reuses the numbers must
get its own data back, its own clients, and an agent that still answers."""
import os
import socket
import struct

from .xp import (TIMEOUT, closed_by_peer, connect_agent, fixture, module_count, ok, recv_frame,
                 send_frame)


def test_close_all_then_reuse(procs):
    t = procs.target("fdreuse")
    pid = t.pid
    count = fixture("mod_count.so")
    assert ok(pid, "load", count) == "loaded mod_count.so: 1 attachment\n"

    t.ask("closeall", "closed")
    _, rfd, wfd, lfd, port = t.ask("reuse").split()
    # The agent's old numbers are now the application's.
    assert sorted(int(x) for x in (rfd, wfd, lfd))[0] == 3

    # A client of the application's listener, before and after the agent
    # is asked something: it must reach the application, not the agent.
    app_client = socket.create_connection(("127.0.0.1", int(port)), timeout=TIMEOUT)
    assert ok(pid, "version").startswith("xprobes agent ")
    t.ask("serve", "served 25")
    assert app_client.makefile("rb").readline() == b"HELLO FROM APP\n"
    app_client.close()

    # The module loaded before the close is still attached and counting.
    t.hit(5)
    assert module_count(pid, "mod_count.so") == 5
    assert ok(pid, "unload", "mod_count.so") == "unloaded mod_count.so\n"
    t.assert_healthy()


def _fds(pid):
    return {int(f): os.readlink(f"/proc/{pid}/fd/{f}") for f in os.listdir(f"/proc/{pid}/fd")}


def test_descriptor_taken_while_the_agent_polls_it(procs):
    """The application dup2()s its own socket onto a session's descriptor
    while the agent is asleep in poll() on it.  The agent must neither
    read the application's bytes nor write into its socket."""
    t = procs.target("fdreuse")
    before = _fds(t.pid)
    s = connect_agent(t.pid)
    send_frame(s, b"version")
    assert recv_frame(s)[0] == 0
    new = [fd for fd, what in _fds(t.pid).items() if fd not in before and what.startswith("socket:")]
    assert len(new) == 1, new
    t.ask(f"grab {new[0]}", "grabbed")
    try:
        send_frame(s, b"version")  # wakes the agent on the old socket
    except (BrokenPipeError, ConnectionResetError):
        pass  # the agent woke (its tick) and forgot the descriptor already
    assert closed_by_peer(s)  # forgotten, not answered through the app's
    assert t.ask("check") == "check 18 0"
    assert ok(t.pid, "version").startswith("xprobes agent ")


def test_pipelined_requests(procs):
    t = procs.target("fdreuse")
    s = connect_agent(t.pid)
    s.sendall(struct.pack("<I", 7) + b"version" + struct.pack("<I", 7) + b"modules")
    status, text = recv_frame(s)
    assert status == 0 and text.startswith("xprobes agent "), text
    assert recv_frame(s) == (0, "")
