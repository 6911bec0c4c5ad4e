# SPDX-License-Identifier: MIT
"""--inject leaves nothing behind and never harms the target: every failed
step unmaps what it mapped, the tool's death (even SIGKILL) while it holds
a thread leaves the thread working, the borrowed system call resumes
correctly, and a process under seccomp is refused unless told otherwise.

XPROBES_INJECT_TEST_FAIL=STEP makes one step of the injection fail;
XPROBES_INJECT_TEST_PAUSE=POINT makes the tool print "test pause at
POINT" and wait there to be killed."""
import os
import signal
import subprocess
import time

import pytest

from test_inject import CFLAGS, HERE, XPROBES, Target, bins, xp  # noqa: F401 (bins: fixture)

TIMEOUT = 60


def our_pages(pid):
    """Writable and executable mappings: the injector's regions are the
    only ones these targets ever have."""
    with open(f"/proc/{pid}/maps") as f:
        return [m for m in f if m.split()[1].startswith("rwx")]


def wait_no_pages(pid):
    """The loader thread unmaps its region by itself (at once when the tool
    answers, within 5 s when the tool is gone): wait for that state."""
    deadline = time.monotonic() + TIMEOUT
    while our_pages(pid):
        assert time.monotonic() < deadline, our_pages(pid)
        time.sleep(0.01)


def xp_env(env, *args):
    e = dict(os.environ)
    e.update(env)
    return subprocess.run([XPROBES, *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT, stdin=subprocess.DEVNULL, env=e)


def build(tmp_path_factory, name, *libs):
    out = str(tmp_path_factory.mktemp("inject-cleanup") / name)
    subprocess.run(["gcc", *CFLAGS, "-o", out, os.path.join(HERE, name + ".c"), *libs],
                   check=True)
    return out


@pytest.fixture(scope="module")
def restart_target(tmp_path_factory):
    return build(tmp_path_factory, "restart_target", "-lpthread", "-lm")


@pytest.fixture(scope="module")
def seccomp_target(tmp_path_factory):
    return build(tmp_path_factory, "seccomp_target")


FAILURES = [
    ("frame", "cannot write to the stack of thread"),
    ("mmap", "mmap in process %d failed"),
    ("write", "cannot write to the memory of process %d"),
    ("create", "could not start a thread in process %d"),
    ("verdict", "has not finished loading in process %d"),
]


@pytest.mark.parametrize("step,message", FAILURES, ids=[f[0] for f in FAILURES])
def test_failed_step_leaves_nothing(bins, step, message):
    t = Target([bins["target"]])
    try:
        r = xp_env({"XPROBES_INJECT_TEST_FAIL": step}, "--inject", t.pid, "sites")
        assert r.returncode == 1
        assert (message % t.pid if "%d" in message else message) in r.stderr, r.stderr
        assert our_pages(t.pid) == [], "a page of the injector is left"
        # The borrowed thread (blocked in read()) reads its input as before.
        assert t.hit() == "hit 1"
        # Nothing is half-done: a plain injection works afterwards.
        r = xp("--inject", t.pid, "sites")
        assert r.returncode == 0 and "inject_conn_release" in r.stdout, r.stderr
        assert our_pages(t.pid) == []
        assert t.hit() == "hit 2"
    finally:
        t.close()


class Paused:
    """xprobes --inject stopped at a test pause point."""

    def __init__(self, pid, point):
        e = dict(os.environ, XPROBES_INJECT_TEST_PAUSE=point)
        self.p = subprocess.Popen([XPROBES, "--inject", str(pid), "version"], env=e,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        line = self.p.stderr.readline()
        assert f"test pause at {point}" in line, line

    def status(self, field):
        with open(f"/proc/{self.p.pid}/status") as f:
            return next(int(l.split()[1], 16) for l in f if l.startswith(field + ":"))

    def kill(self):
        self.p.kill()
        assert self.p.wait(timeout=TIMEOUT) == -signal.SIGKILL


STOP_SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGTSTP,
                signal.SIGPIPE]


def mask(sigs):
    return sum(1 << (s - 1) for s in sigs)


@pytest.mark.parametrize("point", ["borrowed", "running"])
def test_sigkill_while_a_thread_is_borrowed(bins, point):
    """borrowed: stopped, registers untouched; running: the thread's stack
    and registers point into our code, which it runs alone."""
    t = Target([bins["target"]])
    try:
        x = Paused(t.pid, point)
        x.kill()
        # The borrowed main thread was in read(): it still reads correctly.
        assert t.hit() == "hit 1"
        wait_no_pages(t.pid)
        r = xp(t.pid, "sites")
        if point == "running":
            # The injected code needs no tool: the agent got loaded.
            assert r.returncode == 0 and "inject_conn_release" in r.stdout, r.stderr
        else:
            assert r.returncode == 1 and "has no XProbes agent" in r.stderr
            assert xp("--inject", t.pid, "sites").returncode == 0
        assert t.hit() == "hit 2"
    finally:
        t.close()


def test_stop_signals_wait_until_the_thread_is_back(bins):
    t = Target([bins["target"]])
    try:
        x = Paused(t.pid, "running")
        assert x.status("SigBlk") & mask(STOP_SIGNALS) == mask(STOP_SIGNALS)
        os.kill(x.p.pid, signal.SIGTERM)
        os.kill(x.p.pid, signal.SIGINT)
        # Held, not acted on: the tool still holds the thread and lives.
        assert x.status("ShdPnd") & mask([signal.SIGTERM, signal.SIGINT])
        assert x.p.poll() is None
        x.kill()
        assert t.hit() == "hit 1"
        wait_no_pages(t.pid)
    finally:
        t.close()


def test_stop_signals_are_unblocked_after_detaching(bins):
    t = Target([bins["target"]])
    try:
        x = Paused(t.pid, "detached")
        assert x.status("SigBlk") & mask(STOP_SIGNALS) == 0
        x.kill()
        assert t.hit() == "hit 1"
        wait_no_pages(t.pid)
    finally:
        t.close()


@pytest.mark.parametrize("point", [None, "running"])
def test_restartblock_call_and_fpu_state_resume(restart_target, point):
    """The borrowed main thread waits in pthread_cond_timedwait (the kernel
    would restart it through restart_syscall) with rounding mode upward.
    After the injection (or the tool's SIGKILL mid-way) it must still be
    waiting, wake when signalled, with rc 0 and its rounding mode."""
    t = Target([restart_target])
    try:
        if point:
            Paused(t.pid, point).kill()
        else:
            r = xp("--inject", t.pid, "version")
            assert r.returncode == 0, r.stderr
        assert t.hit() == "hit 1"  # the main thread did not wake up early
        t.p.stdin.write("wake\n")
        t.p.stdin.flush()
        assert t.p.stdout.readline().strip() == "woke rc=0 round=upward"
        wait_no_pages(t.pid)
    finally:
        t.close()


@pytest.mark.parametrize("mode,text", [("filter", "runs under 1 seccomp filter (Seccomp: 2)"),
                                       ("strict", "seccomp strict mode (Seccomp: 1)")])
def test_seccomp_is_refused(seccomp_target, mode, text):
    t = Target([seccomp_target, mode])
    try:
        r = xp("--inject", t.pid, "version")
        assert r.returncode == 1
        assert f"cannot inject into process {t.pid}: " in r.stderr and text in r.stderr, r.stderr
        assert "--ignore-seccomp" in r.stderr
        assert t.hit() == "hit 1"
    finally:
        t.close()


def test_ignore_seccomp_injects_under_an_allowing_filter(seccomp_target):
    t = Target([seccomp_target, "filter"])
    try:
        r = xp("--inject", "--ignore-seccomp", t.pid, "version")
        assert r.returncode == 0, r.stderr
        assert "injecting anyway (--ignore-seccomp)" in r.stderr
        assert t.hit() == "hit 1"
        assert our_pages(t.pid) == []
    finally:
        t.close()
