# SPDX-License-Identifier: MIT
"""Errors: each one fails with a clear message and a non-zero status, and
leaves the target running and answering."""
import os
import pty
import select
import shutil
import signal
import struct
import subprocess
import time

import pytest

from .xp import (TIMEOUT, XPROBES, Screen, base_env, closed_by_peer, connect_agent,
                fails, fixture, module_count, ok, recv_frame, send_frame, socket_path)



def assert_no_agent_message(err, pid):
    first, _, hint = err.partition("\n")
    assert first == f"xprobes: process {pid} has no XProbes agent.", err
    assert "-lxprobes" in hint and "LD_PRELOAD=libxprobes.so" in hint, err


def still_fine(t):
    """The target runs, serves its own commands, and its agent answers."""
    t.assert_healthy()
    t.hit(3)
    assert ok(t.pid, "version").startswith("xprobes agent ")


def sockets_of(pid):
    """The process's open sockets (the agent's listener is one)."""
    fds = os.listdir(f"/proc/{pid}/fd")
    links = []
    for fd in fds:
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return [link for link in links if link.startswith("socket:")]


def thread_names(pid):
    names = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            names.append(f.read().strip())
    return names


# ---- the process -----------------------------------------------------------

def test_no_such_process():
    with open("/proc/sys/kernel/pid_max") as f:
        pid = int(f.read())  # pids are below pid_max
    out, err = fails(pid, "sites")
    assert err == f"xprobes: no such process: {pid}\n"
    assert out == ""


@pytest.mark.parametrize("arg", ["abc", "0", "12x", "99999999999", ""])
def test_not_a_pid(arg):
    out, err = fails(arg, "sites", status=2)
    assert err.startswith(f"xprobes: not a process id: '{arg}'\nusage: "), err
    assert out == ""


def test_process_without_agent(procs):
    t = procs.target("nolib_sitehost")
    out, err = fails(t.pid, "sites")
    assert_no_agent_message(err, t.pid)
    assert out == ""
    t.assert_healthy()
    t.hit(10)
    t.ask("msg 2", "msg 2 done")


def test_agent_present_by_default(procs):
    """The control for the next test: a linked program has the agent's
    thread and socket."""
    t = procs.target("sitehost")
    assert "xprobes-agent" in thread_names(t.pid)
    assert os.path.exists(socket_path(t.pid))
    assert sockets_of(t.pid)


@pytest.mark.parametrize("value", ["off", "0", "no"])
def test_agent_switched_off(procs, value):
    t = procs.target("sitehost", env=base_env(XPROBES_AGENT=value))
    out, err = fails(t.pid, "sites")
    assert_no_agent_message(err, t.pid)
    # No trace of the agent (a socket file of a dead process that had
    # this pid may linger, so look at the process itself), and the
    # program behaves as without it.
    assert "xprobes-agent" not in thread_names(t.pid)
    assert sockets_of(t.pid) == []
    t.assert_healthy()
    t.hit(100)
    t.ask("msg 5", "msg 5 done")
    t.send("exit")
    assert t.proc.wait(timeout=TIMEOUT) == 0


# ---- modules -----------------------------------------------------------------

def test_module_not_found(procs, tmp_path):
    t = procs.target("sitehost")
    out, err = fails(t.pid, "load", "/nonexistent/mod.so")
    assert err == "xprobes: load: module not found: /nonexistent/mod.so\n"
    out, err = fails(t.pid, "load", "missing.so", cwd=str(tmp_path))
    assert err == "xprobes: load: module not found: missing.so\n"
    assert ok(t.pid, "modules") == ""
    still_fine(t)


def test_load_without_path(procs):
    t = procs.target("sitehost")
    out, err = fails(t.pid, "load")
    assert err == "usage: load [--session] PATH\n"
    still_fine(t)


def test_not_an_elf_file(procs, tmp_path):
    t = procs.target("sitehost")
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"this is not an ELF object\n" * 8)
    out, err = fails(t.pid, "load", str(junk))
    assert err.startswith(f"cannot load module {junk}: "), err
    assert len(err) > len(f"cannot load module {junk}: \n")  # dlerror's words
    assert ok(t.pid, "modules") == ""
    still_fine(t)


def test_not_a_probe_module(procs):
    t = procs.target("sitehost")
    lib = fixture("libdlsite.so")
    out, err = fails(t.pid, "load", lib)
    assert err.startswith(f"{lib} is not an XProbes probe module ("), err
    assert "undefined symbol: xprobes_module" in err, "the dlerror text is shown"
    assert ok(t.pid, "modules") == ""
    # The library was closed again: its site is not in the process.
    assert "dl_tick" not in ok(t.pid, "sites")
    still_fine(t)


def test_module_already_loaded(procs, tmp_path):
    t = procs.target("sitehost")
    count = fixture("mod_count.so")
    ok(t.pid, "load", count)
    out, err = fails(t.pid, "load", count)
    assert err == f"module already loaded: {count}\n"
    # Through a symlink: the tool resolves it, same path, same refusal.
    link = tmp_path / "link.so"
    link.symlink_to(count)
    out, err = fails(t.pid, "load", str(link))
    assert err == f"module already loaded: {count}\n"
    assert ok(t.pid, "modules") == (
        f"* mod_count.so ({count}): 1 probe, 1 attachment, has commands\n")
    t.hit(4)
    assert module_count(t.pid, "mod_count.so") == 4, "the first load still counts once"
    still_fine(t)


def test_module_already_loaded_under_another_name(procs, tmp_path):
    """A hard link is another path to the same file: dlopen gives the same
    handle, and the agent says which module it is."""
    t = procs.target("sitehost")
    count = fixture("mod_count.so")
    hard = None
    # Beside the test's files if they share a file system, else beside
    # the module (under a name no other run uses).
    for d in (str(tmp_path), os.path.dirname(count)):
        candidate = os.path.join(d, f"hardlink-{os.getpid()}-mod_count.so")
        try:
            os.link(count, candidate)
            hard = candidate
            break
        except OSError:
            continue
    if hard is None:
        pytest.skip(f"cannot hard-link {count} anywhere")
    try:
        ok(t.pid, "load", count)
        out, err = fails(t.pid, "load", hard)
        assert err == f"module already loaded: {hard} (as {count})\n"
    finally:
        os.unlink(hard)
    assert len(ok(t.pid, "modules").splitlines()) == 1
    still_fine(t)


def test_unknown_module(procs):
    t = procs.target("sitehost")
    for cmd in ("unload", "enable", "disable", "command"):
        out, err = fails(t.pid, cmd, "nosuch.so")
        assert err == "unknown module 'nosuch.so' (see 'modules')\n", cmd
    still_fine(t)


def test_ambiguous_module_name(procs, tmp_path):
    t = procs.target("sitehost")
    count = fixture("mod_count.so")
    other = tmp_path / "mod_count.so"
    shutil.copy(count, other)
    ok(t.pid, "load", count)
    ok(t.pid, "load", str(other))
    out, err = fails(t.pid, "unload", "mod_count.so")
    assert err == ("module name 'mod_count.so' is ambiguous; use the full path:\n"
                   f"  {count}\n  {other}\n")
    assert ok(t.pid, "unload", str(other)) == "unloaded mod_count.so\n"
    assert ok(t.pid, "unload", "mod_count.so") == "unloaded mod_count.so\n"
    still_fine(t)


def test_unknown_command(procs):
    t = procs.target("sitehost")
    out, err = fails(t.pid, "frobnicate", "now")
    assert err == "unknown command 'frobnicate' (try 'help')\n"
    assert out == ""
    out, err = fails(t.pid, "version", "extra")
    assert err == "version: unexpected argument 'extra'\n"
    still_fine(t)


def test_module_without_command_handler(procs):
    t = procs.target("sitehost")
    nocmd = fixture("mod_nocmd.so")
    assert ok(t.pid, "load", nocmd) == "loaded mod_nocmd.so: 1 attachment\n"
    assert ok(t.pid, "modules") == f"* mod_nocmd.so ({nocmd}): 1 probe, 1 attachment\n"
    out, err = fails(t.pid, "command", "mod_nocmd.so", "anything")
    assert err == "module mod_nocmd.so has no command handler\n"
    t.hit(5)  # its handler still runs
    still_fine(t)


# ---- malformed control messages ---------------------------------------------

def test_oversized_request(procs):
    t = procs.target("sitehost")
    s = connect_agent(t.pid)
    s.sendall(struct.pack("<I", 64 * 1024 + 1))
    status, text = recv_frame(s)
    assert (status, text) == (1, "malformed request: longer than 65536 bytes\n")
    assert closed_by_peer(s)
    s.close()
    still_fine(t)


def test_largest_request_accepted(procs):
    t = procs.target("sitehost")
    s = connect_agent(t.pid)
    request = b"version" + b" " * (64 * 1024 - len(b"version"))
    send_frame(s, request)
    status, text = recv_frame(s)
    assert status == 0 and text.startswith("xprobes agent "), text
    s.close()
    still_fine(t)


def test_request_with_nul_byte(procs):
    t = procs.target("sitehost")
    count = fixture("mod_count.so")
    s = connect_agent(t.pid)
    send_frame(s, f"load {count}\0trailing".encode())
    status, text = recv_frame(s)
    assert (status, text) == (1, "malformed request: contains a NUL byte\n")
    assert closed_by_peer(s)
    s.close()
    assert ok(t.pid, "modules") == "", "nothing before the NUL was run either"
    still_fine(t)


def test_empty_request(procs):
    t = procs.target("sitehost")
    s = connect_agent(t.pid)
    send_frame(s, b"")
    assert recv_frame(s) == (0, "")
    send_frame(s, b"version")  # the connection is still usable
    status, text = recv_frame(s)
    assert status == 0 and text.startswith("xprobes agent ")
    s.close()
    still_fine(t)


@pytest.mark.parametrize("header_only", [False, True])
def test_truncated_frame_then_close(procs, header_only):
    t = procs.target("sitehost")
    s = connect_agent(t.pid)
    payload = b"" if header_only else b"versi"
    s.sendall(struct.pack("<I", 100)[: 2 if header_only else 4] + payload)
    s.close()
    still_fine(t)


def test_stalled_client_does_not_wedge_agent(procs):
    """A client that stops mid-frame is dropped (after the agent's I/O
    timeout); the next client is served meanwhile or right after."""
    t = procs.target("sitehost")
    s = connect_agent(t.pid)
    s.sendall(struct.pack("<I", 100) + b"versi")
    # Blocks behind the stalled frame at most for the agent's timeout.
    assert ok(t.pid, "version").startswith("xprobes agent ")
    assert closed_by_peer(s)
    s.close()
    still_fine(t)


# ---- controllers that die ------------------------------------------------------

def test_controller_killed_during_module_command(procs):
    t = procs.target("sitehost")
    block = fixture("mod_block.so")
    ok(t.pid, "load", block)
    xp = procs.popen([XPROBES, str(t.pid), "command", "mod_block.so", "block"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, env=base_env())
    # The module announces itself on the target's stdout once it runs.
    t.expect("module command blocking")
    xp.kill()
    assert xp.wait(timeout=TIMEOUT) == -signal.SIGKILL
    # A hit lets the command finish; its reply goes to a dead socket.
    t.hit(1)
    assert ok(t.pid, "modules").startswith("* mod_block.so (")
    assert ok(t.pid, "unload", "mod_block.so") == "unloaded mod_block.so\n"
    still_fine(t)


def test_interactive_session_killed(procs, tmp_path):
    t = procs.target("sitehost")
    count = fixture("mod_count.so")
    master, slave = pty.openpty()
    try:
        xp = procs.popen([XPROBES, str(t.pid)], stdin=slave, stdout=slave, stderr=slave,
                         env=base_env(HOME=str(tmp_path), TERM="dumb"), cwd=str(tmp_path),
                         start_new_session=True)
        os.close(slave)
        slave = None
        screen = Screen(master)
        screen.wait_for("xprobes> ")
        os.write(master, f"load {count}\n".encode())
        screen.wait_for("loaded mod_count.so: 1 attachment")
        screen.wait_for("xprobes> ")
        os.write(master, b"sites\n")
        screen.wait_for(f"* host_tick(long) => *_tick -> on_tick [{count}]")
        xp.kill()
        assert xp.wait(timeout=TIMEOUT) == -signal.SIGKILL
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    # What the session did stays done; the target is unharmed.
    t.hit(7)
    assert module_count(t.pid, "mod_count.so") == 7
    still_fine(t)
