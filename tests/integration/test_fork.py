# SPDX-License-Identifier: MIT
"""fork() and daemon-style double fork: the new process has an agent of
its own, under its own pid, and the original stays attachable."""
import os
import subprocess

import pytest

from .xp import TIMEOUT, XPROBES, base_env, fixture, module_count, ok, parse_sites, socket_path


def ppid_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("PPid:"):
                return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


def start_forker(procs, mode):
    t = procs.target("forker", mode)
    t.send("fork")
    child = int(t.expect("child ").split()[1])
    procs.adopt(child, fixture("forker"))
    assert child != t.pid
    return t, child


@pytest.mark.parametrize("mode", ["fork", "daemon"])
def test_forked_process_is_attachable(procs, mode):
    forker = fixture("forker")
    count = fixture("mod_count.so")
    t, child = start_forker(procs, mode)
    parent = t.pid
    if mode == "fork":
        assert ppid_of(child) == parent
    else:
        # A grandchild, reparented, in the session its vanished parent
        # made (so never a session leader itself).
        assert ppid_of(child) != parent
        assert os.getsid(child) not in (os.getsid(parent), child)

    assert parse_sites(ok(child, "sites")) == {forker: ["fork_tick(long)"]}
    assert ok(child, "load", count) == "loaded mod_count.so: 1 attachment\n"
    t.hit(5)  # the new process reads the commands now
    assert module_count(child, "mod_count.so") == 5

    # The original: separate agent, separate modules.
    assert ok(parent, "version").startswith("xprobes agent ")
    assert ok(parent, "modules") == ""
    assert parse_sites(ok(parent, "sites")) == {forker: ["fork_tick(long)"]}
    assert ok(parent, "load", count) == "loaded mod_count.so: 1 attachment\n"
    t.hit(3)
    assert module_count(child, "mod_count.so") == 8
    assert module_count(parent, "mod_count.so") == 0

    t.send("exit")  # the new process exits; the original takes over
    t.expect("resumed")
    assert not os.path.exists(socket_path(child)), "an exiting agent removes its socket"
    t.hit(2)
    assert module_count(parent, "mod_count.so") == 2
    assert os.path.exists(socket_path(parent))
    t.assert_healthy()


def test_modules_survive_fork(procs):
    count = fixture("mod_count.so")
    forker = fixture("forker")
    t = procs.target("forker", "fork")
    parent = t.pid
    ok(parent, "load", count)
    t.hit(2)

    t.send("fork")
    child = int(t.expect("child ").split()[1])
    procs.adopt(child, forker)
    # The child inherits the loaded module, its attachment and its state.
    assert ok(child, "modules") == f"* mod_count.so ({count}): 1 probe, 1 attachment, has commands\n"
    assert parse_sites(ok(child, "sites")) == {
        forker: [f"* fork_tick(long) => *_tick -> on_tick [{count}]"]}
    assert module_count(child, "mod_count.so") == 2
    t.hit(3)
    assert module_count(child, "mod_count.so") == 5
    assert module_count(parent, "mod_count.so") == 2

    # Unloading in the child leaves the parent's copy alone.
    ok(child, "unload", "mod_count.so")
    assert ok(child, "modules") == ""
    t.hit(1)
    assert ok(parent, "modules").startswith("* mod_count.so (")

    t.send("exit")
    t.expect("resumed")
    t.hit(4)
    assert module_count(parent, "mod_count.so") == 6
    t.send("exit")
    assert t.proc.wait(timeout=TIMEOUT) == 0


def test_fork_does_not_wait_for_a_module_command(procs):
    """A module command runs without the agent's lock: the application
    forks while one is blocked, and the child still gets an agent."""
    block = fixture("mod_block.so")
    forker = fixture("forker")
    t = procs.target("forker", "fork")
    ok(t.pid, "load", block)
    xp = procs.popen([XPROBES, str(t.pid), "command", "mod_block.so", "block"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, env=base_env(), text=True)
    t.expect("module command blocking")
    t.send("fork")
    child = int(t.expect("child ").split()[1])
    procs.adopt(child, forker)
    assert ok(child, "version").startswith("xprobes agent ")
    t.send("exit")  # the child exits; the original takes over
    t.expect("resumed")
    t.hit(1)  # releases the original's module command
    out, err = xp.communicate(timeout=TIMEOUT)
    assert (xp.returncode, out) == (0, "released\n"), err
    assert ok(t.pid, "unload", "mod_block.so") == "unloaded mod_block.so\n"
    t.assert_healthy()


def test_daemon_forked_while_the_agent_is_busy_has_no_agent(procs, tmp_path):
    """fork() waits at most 50 ms for the agent's lock; a child forked
    without it starts no agent on its possibly half-changed state, and
    neither does that child's own child (daemon()'s second fork used to
    take the lock afresh and start one)."""
    flag = tmp_path / "hold"
    flag.write_text("")
    t = procs.target("forker", "daemon", env=base_env(XP_HOLD_FILE=str(flag)))
    load = procs.popen([XPROBES, str(t.pid), "load", fixture("mod_slowload.so")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=base_env(), cwd="/")
    t.expect("in constructor")  # load holds the agent's lock from here
    t.send("fork")
    child = int(t.expect("child ").split()[1])
    procs.adopt(child, fixture("forker"))
    r = subprocess.run([XPROBES, str(child), "modules"], capture_output=True, text=True,
                       env=base_env(), cwd="/", timeout=TIMEOUT)
    assert r.returncode == 1 and "has no XProbes agent" in r.stderr, r.stdout + r.stderr
    assert not os.path.exists(socket_path(child))
    flag.unlink()
    out, err = load.communicate(timeout=TIMEOUT)
    assert load.returncode == 0, out + err
    t.send("exit")  # the grandchild reads the commands now
