# SPDX-License-Identifier: MIT
"""load --session: a module that belongs to the connection that loaded it
and is unloaded when that connection closes, however it closes.  Tools like
mctop rely on it: killed with SIGKILL, they leave the target unslowed."""
import os
import signal
import subprocess
import sys
import time

from .xp import TIMEOUT, connect_agent, fails, fixture, ok, recv_frame, send_frame

HERE = os.path.dirname(os.path.abspath(__file__))


def ask(sock, line):
    send_frame(sock, line.encode())
    return recv_frame(sock)


def wait_unloaded(pid, name):
    """Poll the agent's own listing until name is gone (no timer: the test's
    timeout is the deadline)."""
    while name in ok(pid, "modules"):
        pass


def test_session_module_goes_with_its_connection(procs):
    t = procs.target("sitehost")
    s = connect_agent(t.pid)
    status, text = ask(s, "load --session " + fixture("mod_count.so"))
    assert status == 0 and "loaded mod_count.so" in text, text
    listing = ok(t.pid, "modules")
    assert "mod_count.so" in listing and "unloaded when its session ends" in listing, listing
    t.send("hit 3")
    t.expect("hit 3 done")
    status, text = ask(s, "command mod_count.so count")
    assert status == 0 and text.strip() == "count 3", text
    s.close()
    wait_unloaded(t.pid, "mod_count.so")
    t.assert_healthy()


def test_plain_load_outlives_its_connection(procs):
    t = procs.target("sitehost")
    s = connect_agent(t.pid)
    status, text = ask(s, "load %s --session" % fixture("mod_count.so"))  # flag after the path
    assert status == 0, text
    status, text = ask(s, "unload mod_count.so")
    assert status == 0, text
    status, text = ask(s, "load " + fixture("mod_count.so"))
    assert status == 0, text
    s.close()
    # Another connection sees it still loaded, and can unload it itself.
    assert "mod_count.so" in ok(t.pid, "modules")
    ok(t.pid, "unload", "mod_count.so")


def test_sigkilled_owner_leaves_nothing_behind(procs):
    t = procs.target("sitehost")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, socket, struct\n"
         "sys.path.insert(0, %r)\n"
         "from xp import connect_agent, send_frame, recv_frame\n"
         "s = connect_agent(%d)\n"
         "send_frame(s, b'load --session %s')\n"
         "print(recv_frame(s)[1], flush=True)\n"
         "sys.stdin.read()\n" % (HERE, t.pid, fixture("mod_count.so"))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline()
        assert "loaded mod_count.so" in line, line
        assert "mod_count.so" in ok(t.pid, "modules")
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=TIMEOUT)
        wait_unloaded(t.pid, "mod_count.so")
        # And it can be loaded again by the next tool.
        ok(t.pid, "load", fixture("mod_count.so"))
    finally:
        holder.kill()
        holder.wait()
    t.assert_healthy()


def test_load_usage_errors(procs):
    t = procs.target("sitehost")
    out, err = fails(t.pid, "load", "--session")
    assert "usage: load [--session] PATH" in out + err, out + err
    s = connect_agent(t.pid)
    status, text = ask(s, "load %s %s" % (fixture("mod_count.so"), fixture("mod_count.so")))
    assert status == 1 and "usage: load [--session] PATH" in text, text
    assert "mod_count.so" not in ok(t.pid, "modules")


def test_a_forked_child_unloads_its_copy_of_a_session_module(procs):
    """The session that loaded a module with --session is the parent's: no
    connection of the child will ever close it, so the child's agent
    unloads its copy; the parent's stays until the session ends."""
    t = procs.target("forker", "fork")
    s = connect_agent(t.pid)
    status, text = ask(s, "load --session " + fixture("mod_count.so"))
    assert status == 0, text
    t.send("fork")
    child = int(t.expect("child ").split()[1])
    procs.adopt(child, fixture("forker"))
    deadline = time.monotonic() + TIMEOUT  # catches a hang only
    while "mod_count.so" in ok(child, "modules"):
        assert time.monotonic() < deadline, "the child kept the parent's session module"
    assert "unloaded when its session ends" in ok(t.pid, "modules")
    s.close()
    wait_unloaded(t.pid, "mod_count.so")
    t.send("exit")
    t.expect("resumed")
    t.send("exit")
    assert t.proc.wait(timeout=TIMEOUT) == 0
