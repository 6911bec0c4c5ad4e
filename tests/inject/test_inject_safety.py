# SPDX-License-Identifier: MIT
"""Injection borrows only a thread that is safe to borrow.

pthread_create() in the target allocates memory: a thread stopped inside
malloc() holding its arena lock would wait for itself for ever.  These
targets keep their main thread inside malloc()/free() nearly all the time;
the injector must pick another thread, or refuse with an explanation."""
import os
import subprocess

import pytest

from test_inject import Target  # same directory (pytest puts it on sys.path)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
XPROBES = os.path.join(BUILD, "xprobes")
TIMEOUT = 60


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("inject-safety") / "busy_target")
    subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2",
                    "-I" + os.path.join(ROOT, "include"), "-o", out,
                    os.path.join(HERE, "busy_target.c"), "-lpthread"], check=True)
    return out


class Busy(Target):
    """busy_target in one of its modes; answers lines on stdin."""

    def __init__(self, path, mode):
        super().__init__([path, mode])

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()


def xp(*args):
    return subprocess.run([XPROBES, *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("round_", range(4))
def test_main_thread_in_malloc_is_not_borrowed(busy, round_):
    """Before the fix about half of these deadlocked the target."""
    t = Busy(busy, "malloc")
    try:
        r = xp("--inject", t.pid, "sites")
        assert r.returncode == 0, r.stderr
        assert "busy_hit(long)" in r.stdout
        # The injector's one page (code and data, read-write-execute) is
        # gone again: nothing writable and executable is left behind.
        with open(f"/proc/{t.pid}/maps") as f:
            assert not [m for m in f if m.split()[1].startswith("rwx")], "an RWX page is left"
        # The allocating main thread still runs, and the answering thread
        # (the one borrowed) still reads its input.
        assert t.ask("progress") == "progress ok"
        assert t.ask("hit") == "hit 1"
    finally:
        t.close()


def test_all_threads_busy_is_refused(busy):
    t = Busy(busy, "spin")
    try:
        r = xp("--inject", t.pid, "sites")
        assert r.returncode == 1
        assert f"cannot inject into process {t.pid}: none of its 1 thread is waiting" in r.stderr
        assert "LD_PRELOAD=libxprobes.so" in r.stderr
        assert t.p.poll() is None
    finally:
        t.close()


def test_process_whose_main_thread_exited(busy):
    """The leader is a zombie but the process lives: inject through
    another thread, then attach normally."""
    t = Busy(busy, "exitmain")
    try:
        r = xp("--inject", t.pid, "sites")
        assert r.returncode == 0, r.stderr
        assert t.ask("hit") == "hit 1"
        assert xp(t.pid, "version").returncode == 0
    finally:
        t.close()


def test_stopped_process_is_refused(busy):
    t = Busy(busy, "malloc")
    try:
        os.kill(t.pid, 19)  # SIGSTOP
        while open(f"/proc/{t.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T":
            os.sched_yield()
        r = xp("--inject", t.pid, "sites")
        assert r.returncode == 1
        assert "is stopped (by a signal)" in r.stderr, r.stderr
        os.kill(t.pid, 18)  # SIGCONT
        assert t.ask("hit") == "hit 1"
    finally:
        t.close()
