"""The agent lets in exactly whom ptrace would (lib/control/peer.h): owning a
process's uid is not enough once it has changed credentials."""
import os
import subprocess

import pytest

from .xp import (NOBODY, Target, as_user, base_env, fixture, needs_root_and_setpriv, ok,
                 run_as_nobody)

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
