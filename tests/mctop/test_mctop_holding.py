# SPDX-License-Identifier: MIT
"""mctop.so's held keys (modules/mctop.c, count and on_end), driven through
interleavings a real memcached makes only by chance: tests/fixtures/mcsites
fires memcached's command sites in the order a test writes.  A command's
keys wait unpublished until its end writes the latency into them; these
tests check that every key still reaches `top`, once, with one latency."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_mctop_module import BUILD, load_module, raw  # noqa: E402

FIXTURE = os.path.join(BUILD, "tests", "fixtures", "mcsites")


class Worker:
    """The fixture: one thread firing memcached's sites on request."""

    def __init__(self):
        self.proc = subprocess.Popen([FIXTURE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("ready "), line
        self.pid = self.proc.pid

    def run(self, *lines):
        """Send lines, then wait until all were handled."""
        self.proc.stdin.write("".join(line + "\n" for line in lines) + "y\n")
        self.proc.stdin.flush()
        got = self.proc.stdout.readline()
        assert got == "y\n", got

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture
def worker():
    w = Worker()
    try:
        load_module(w.pid)
        yield w
    finally:
        w.stop()


def rows(w):
    head, lines = raw(w, "2000")
    return head, {r[0]: (int(r[1]), int(r[6])) for r in lines}  # key: (calls, lat_n)


def test_another_connections_key_publishes_the_held_ones(worker):
    # a is held for connection 1 when connection 2's key comes: a goes out
    # at once and takes its latency from a record of its own at 1's end;
    # b gets its latency in its own record.
    worker.run("s 1", "g 1 a", "s 2", "g 2 b")
    _, r = rows(worker)
    assert r == {"a": (1, 0)}  # b is still held: its command has not ended
    worker.run("e 2", "e 1")
    head, r = rows(worker)
    assert r == {"a": (1, 1), "b": (1, 1)}
    assert head["total"] == 2 and head["untracked"] == 0


def test_held_keys_of_a_recycled_slot_are_published(worker):
    # Four connections with keys fill the worker's four in-flight slots;
    # three more recycle slots 0-2, and D's second key is held in slot 3
    # when H's start recycles that slot.  D's keys must reach top (its
    # reply went out at its end), counted once.
    worker.run("s 10", "g 10 a", "s 11", "g 11 b", "s 12", "g 12 c", "s 13", "g 13 d1",
               "s 14", "g 14 e", "s 15", "g 15 f", "s 16", "g 16 g", "g 13 d2",
               "s 17", "e 13")
    _, r = rows(worker)
    assert r["d1"][0] == 1 and r["d2"][0] == 1
    assert set(r) == {"a", "b", "c", "d1", "d2", "e", "f", "g"}


def test_an_end_without_keys_publishes_the_connections_held_ones(worker):
    # Connection 5's key is held; its slot is then taken over by a new
    # command of the same connection that ends with no key of its own
    # (the first command's end never came): the held key must not wait.
    worker.run("s 5", "g 5 k")
    worker.run("s 6", "g 6 x", "e 6")  # publishes k (another connection's key)
    worker.run("s 5", "g 5 m", "e 5", "s 5", "e 5")
    _, r = rows(worker)
    assert r["k"][0] == 1 and r["m"] == (1, 1) and r["x"] == (1, 1)


def test_a_command_with_more_keys_than_the_feed_holds_is_counted(worker):
    # One multi-get of 2,000 keys of 200 bytes: 448 KB of records, more
    # than the worker's 256 KiB feed.  Held keys are published 32 KiB at a
    # time, so the drainer (here a top in the middle of the command) takes
    # them while the command runs; none is dropped.  Those still held at
    # the end get its latency in their records; of those published before
    # it, the drainer keeps the first MCTOP_PENDING (24) for the latency
    # record, so no key gets more than one.
    keys = ["%04d" % i + "k" * 196 for i in range(2000)]
    worker.run("s 7", *["g 7 " + k for k in keys[:1000]])
    rows(worker)  # a top drains what is published
    worker.run(*["g 7 " + k for k in keys[1000:]], "e 7")
    head, r = rows(worker)
    assert head["untracked"] == 0 and head["total"] == 2000
    assert all(r[k][0] == 1 and r[k][1] <= 1 for k in keys)
    assert r[keys[0]] == (1, 1) and r[keys[-1]] == (1, 1)
