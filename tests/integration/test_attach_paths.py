# SPDX-License-Identifier: MIT
"""Finding and reaching a process's agent where real processes put it: a
thread id instead of a pid, a stopped process, a process that dropped
privileges after its agent started, a private /tmp, a command that never
answers, module paths relative to the caller, and setuid programs (no
agent at all)."""
import os
import shutil
import signal
import subprocess
import tempfile

import pytest

from .xp import (NOBODY, REPO, TIMEOUT, XPROBES, BUILD, Target, base_env, fails, fixture,
                 module_count, ok, xprobes)


def agent_tid(pid):
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            if f.read().strip() == "xprobes-agent":
                return int(tid)
    return None


def test_thread_id_attaches_to_its_process(procs):
    t = procs.target("sitehost")
    tid = agent_tid(t.pid)
    assert tid and tid != t.pid
    r = xprobes(tid, "version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("xprobes agent ")
    assert r.stderr == f"xprobes: {tid} is a thread of process {t.pid}; attaching to {t.pid}\n"


def test_stopped_process_is_explained(procs):
    t = procs.target("sitehost")
    os.kill(t.pid, signal.SIGSTOP)
    try:
        # Wait for the stop to take effect (a state change, not a timer).
        while open(f"/proc/{t.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T":
            os.sched_yield()
        _, err = fails(t.pid, "version")
        assert err.startswith(f"xprobes: process {t.pid} is stopped (by a signal)"), err
        assert f"kill -CONT {t.pid}" in err, err
    finally:
        os.kill(t.pid, signal.SIGCONT)
    assert ok(t.pid, "version").startswith("xprobes agent ")
    t.assert_healthy()


def test_reply_timeout(procs):
    """A command that does not answer within --timeout fails with a message;
    the target carries on and finishes the command by itself."""
    t = procs.target("sitehost")
    block = fixture("mod_block.so")
    ok(t.pid, "load", block)
    _, err = fails("--timeout", "1", t.pid, "command", "mod_block.so", "block")
    assert f"no reply from process {t.pid} within 1 s" in err, err
    t.expect("module command blocking")
    t.hit(1)  # releases the module's command
    assert ok(t.pid, "unload", "mod_block.so") == "unloaded mod_block.so\n"
    t.assert_healthy()


@pytest.mark.parametrize("value", ["x", "-1", ""])
def test_bad_timeout_is_a_usage_error(value):
    r = xprobes("--timeout", value, "1", "version")
    assert r.returncode == 2
    assert "--timeout wants seconds" in r.stderr


def test_module_named_by_relative_path(procs):
    t = procs.target("sitehost")
    where = os.path.dirname(fixture("mod_count.so"))
    assert ok(t.pid, "load", "./mod_count.so", cwd=where) == "loaded mod_count.so: 1 attachment\n"
    t.hit(4)
    assert ok(t.pid, "command", "./mod_count.so", "count", cwd=where) == "count 4\n"
    assert ok(t.pid, "disable", "../fixtures/mod_count.so", cwd=where) == "disabled mod_count.so\n"
    assert ok(t.pid, "unload", "./mod_count.so", cwd=where) == "unloaded mod_count.so\n"
    _, err = fails(t.pid, "unload", "./mod_count.so", cwd=where)
    assert "unknown module" in err, err


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


@needs_root
def test_process_that_dropped_privileges(procs):
    """Like `memcached -u memcache`: the agent started as root, so its
    socket is in root's directory; root still attaches, and the new uid is
    told why it cannot."""
    t = procs.target("sitehost")
    t.ask(f"setuid {NOBODY}", f"setuid {NOBODY} done")
    count = fixture("mod_count.so")
    assert ok(t.pid, "load", count) == "loaded mod_count.so: 1 attachment\n"
    t.hit(3)
    assert module_count(t.pid, "mod_count.so") == 3
    _, err = fails(t.pid, "version", user=NOBODY)
    assert "started its\n  agent as uid 0 (before changing to uid 65534)" in err, err
    assert ok(t.pid, "unload", "mod_count.so") == "unloaded mod_count.so\n"
    t.assert_healthy()


@needs_root
def test_private_tmp(procs):
    """systemd's PrivateTmp=, or a container: the socket is in the target's
    own mount namespace, which the tool reaches through /proc/PID/root.
    The target gets a private tmpfs on its socket directory's parent
    (XPROBES_RUNDIR; the tool reads the target's value from its
    environment), not on /tmp itself, which may hold the build."""
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) not installed")
    host = fixture("sitehost")
    rundir = tempfile.mkdtemp(prefix="xp-private-")
    try:
        p = procs.popen(["unshare", "-m", "sh", "-c",
                         f"mount -t tmpfs xprobes-test {rundir} && exec {host}"],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        env=base_env(XPROBES_RUNDIR=rundir), cwd="/")
        t = Target(p, "sitehost with a private run directory")
        assert int(t.expect("ready ").split()[1]) == p.pid
        # Not visible from here: only through the target's root.
        assert os.listdir(rundir) == []
        count = fixture("mod_count.so")
        assert ok(p.pid, "load", count) == "loaded mod_count.so: 1 attachment\n"
        t.hit(2)
        assert module_count(p.pid, "mod_count.so") == 2
        assert ok(p.pid, "unload", "mod_count.so") == "unloaded mod_count.so\n"
    finally:
        procs.cleanup()
        os.rmdir(rundir)


@needs_root
def test_setuid_program_gets_no_agent(procs, tmp_path):
    """AT_SECURE: a setuid program never starts the agent, so no module can
    ride on its privileges.  Built here with an absolute run path (the
    loader ignores $ORIGIN in setuid programs)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    prog = tmp_path / "suid_sitehost"
    subprocess.run([cc, "-std=gnu11", "-O1", "-I", os.path.join(REPO, "include"),
                    "-o", str(prog), os.path.join(REPO, "tests", "fixtures", "sitehost.c"),
                    "-L", BUILD, f"-Wl,-rpath,{BUILD}", "-Wl,--no-as-needed", "-lxprobes"],
                   check=True, timeout=TIMEOUT)
    os.chmod(tmp_path, 0o755)
    os.chown(prog, NOBODY, NOBODY)
    os.chmod(prog, 0o4755)
    p = procs.popen([str(prog)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=base_env(),
                    cwd="/")
    t = Target(p, "setuid sitehost")
    t.expect("ready ")
    with open(f"/proc/{p.pid}/status") as f:
        uids = next(line for line in f if line.startswith("Uid:")).split()[1:3]
    assert uids == ["0", str(NOBODY)], "not running setuid: the test proves nothing"
    assert agent_tid(p.pid) is None
    _, err = fails(p.pid, "version")
    assert err.startswith(f"xprobes: process {p.pid} has no XProbes agent."), err
    t.hit(2)
    t.assert_healthy()
