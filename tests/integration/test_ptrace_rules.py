# SPDX-License-Identifier: MIT
"""The agent lets in exactly whom ptrace would (lib/control/peer.c): owning a
process's uid is not enough once it has changed credentials."""
import fcntl
import os
import shutil
import subprocess

import pytest

from .xp import (NOBODY, TIMEOUT, Target, as_user, base_env, fixture, in_pid_namespace,
                 needs_root_and_setpriv, ok, run_as_nobody)

pytestmark = needs_root_and_setpriv(
    "the targets drop to uid 65534 and the client runs as it")


def dropped_child(procs):
    """dropper's child: uid 65534 after setuid() from root, then fork()."""
    t = procs.target("dropper")
    pid = int(t.expect("child ").split()[1])
    procs.adopt(pid, fixture("dropper"))
    with open(f"/proc/{pid}/status") as f:
        status = f.read()
    assert f"Uid:\t{NOBODY}\t{NOBODY}\t{NOBODY}\t{NOBODY}\n" in status, status
    # A process's /proc files belong to root while it is not dumpable.
    assert os.stat(f"/proc/{pid}/status").st_uid == 0, "dropper's child is dumpable"
    return pid


def test_setuid_then_fork_refuses_the_new_uid(procs, public_xprobes):
    child = dropped_child(procs)
    count = fixture("mod_count.so")
    want = (f"uid {NOBODY} may not attach to process {child}: it changed credentials and is "
            "not dumpable (ptrace would refuse); use root")

    for argv in ([str(child), "modules"], [str(child), "load", count]):
        r = run_as_nobody([public_xprobes, *argv])
        assert r.returncode != 0, r
        assert want in r.stderr, r.stderr
        assert r.stdout == ""

    # Root still attaches (CAP_SYS_PTRACE), and finds nothing loaded.
    assert ok(child, "modules") == ""
    assert "dropper_tick" in ok(child, "sites")


def test_plain_process_of_the_same_uid_may_attach(procs, public_xprobes):
    """Started as uid 65534 (never anyone else): dumpable, so uid 65534 may
    ptrace it, and attach."""
    idle, count = fixture("idle"), fixture("mod_count.so")
    probe = subprocess.run(as_user(NOBODY, ["test", "-x", idle, "-a", "-r", count]), cwd="/")
    if probe.returncode != 0:
        pytest.skip(f"uid {NOBODY} cannot reach the build directory {os.path.dirname(idle)}")
    p = procs.popen(as_user(NOBODY, [idle]), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    env=base_env(), cwd="/")
    t = Target(p, "idle as nobody")
    assert int(t.expect("ready ").split()[1]) == p.pid
    assert os.stat(f"/proc/{p.pid}/status").st_uid == NOBODY, "idle is not dumpable"

    r = run_as_nobody([public_xprobes, str(p.pid), "load", count])
    assert r.returncode == 0, r
    assert "mod_count.so" in ok(p.pid, "modules")
    # Let it exit by itself, so its agent removes its own socket.
    p.stdin.close()
    assert p.wait(timeout=60) == 0


# Connects to the socket at argv[1], asks for the version and prints the
# reply's status and first line, and whether the agent then hung up
# (it does after a refusal; a session let in stays open).
FIRST_REPLY = r"""
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
try:
    s.sendall(struct.pack("<I", 7) + b"version")
except (BrokenPipeError, ConnectionResetError):
    pass  # refused before it read: the reply is there all the same
f = s.makefile("rb")
n, = struct.unpack("<I", f.read(4))
body = f.read(n)
print("status", body[0])
print(body[1:].decode().splitlines()[0])
if body[0]:
    try:
        print("closed" if f.read(1) == b"" else "open")
    except ConnectionResetError:  # closed with our request unread
        print("closed")
"""

PIDNS = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
# The target is pid 1 of a pid namespace of its own, so a client outside
# it has no pid there (SO_PEERCRED pid 0) and no /proc entry to read.
SIBLING_CASES = {
    "root, target in the initial user namespace": (0, PIDNS),
    "root, target in a user namespace of its own": (0, ["unshare", "--user", "--map-root-user",
                                                        *PIDNS]),
    "same non-root uid": (NOBODY, [*PIDNS, *as_user(NOBODY, [])]),
}


def kernel_names_userns():
    """PIDFD_GET_USER_NAMESPACE (Linux 6.11): how the agent places a
    client that has no pid in its pid namespace."""
    fd = os.pidfd_open(os.getpid())
    try:
        os.close(fcntl.ioctl(fd, 0xFF09))  # _IO(0xFF, 9)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


@pytest.mark.parametrize("case", SIBLING_CASES)
def test_client_in_a_sibling_user_namespace_is_refused(rundir, procs, case):
    """A client of the target's uid in a user namespace of its own
    (`unshare -U -r`: root there, the same uid outside) and outside the
    target's pid namespace: ptrace refuses it (it has no capability over
    the target's namespace), so the agent must, though it cannot read the
    client's /proc entry."""
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) not installed")
    if not kernel_names_userns():
        pytest.skip("the kernel cannot name a pidfd's user namespace (Linux 6.11)")
    uid, prefix = SIBLING_CASES[case]
    t, _ = in_pid_namespace(procs, prefix, "sitehost", base_env(XPROBES_RUNDIR=rundir), case)
    path = os.path.join(rundir, f".xprobes-{uid}", "1.sock")
    argv = ["unshare", "--user", "--map-root-user", "/usr/bin/python3", "-c", FIRST_REPLY, path]
    r = subprocess.run(as_user(uid, argv) if uid else argv, capture_output=True, text=True,
                       cwd="/", env=base_env(), timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "status 1",
        f"permission denied: uid {uid} may not attach to process 1: you are in another user "
        "namespace; attach from the process's own namespace",
        "closed"], r.stdout
    t.assert_healthy()
