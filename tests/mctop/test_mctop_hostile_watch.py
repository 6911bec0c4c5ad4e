# SPDX-License-Identifier: MIT
"""mctop trusts nothing in a watch stream: against a fake memcached
(tests/memcached/fakewatch.py), `mctop --json INTERVAL COUNT` ends after
its COUNT frames whatever the stream does (a line dripping in without
ever ending, a line that never ends at full speed: its reader thread
must come back), every frame parses, keys follow the key text rule, and
lines no memcached writes are not counted."""
import json
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
MCTOP = os.path.join(BUILD, "mctop")
DEADLINE = 60  # only catches a hang: mctop ends seconds after its last frame

sys.path.insert(0, os.path.join(ROOT, "tests", "memcached"))
import fakewatch  # noqa: E402
import keytext  # noqa: E402  (the key text rule, written again as the oracle)

CONTROL = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")  # newline aside


def frames(fake, *args):
    p = subprocess.Popen([MCTOP, "-p", str(fake.pid), "--port", str(fake.port), "--json",
                          *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        out, err = p.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail("mctop --json %s did not end after its frames" % (args,))
    assert p.returncode == 0, err
    assert not CONTROL.search(out), out
    return [json.loads(line) for line in out.decode("utf-8").splitlines()]


def test_keys_are_key_texts_and_malformed_lines_are_not_counted():
    with fakewatch.fake("escapes") as fake:
        got = frames(fake, 0.5, 2)
    assert len(got) == 2
    want = sorted(keytext.from_bytes(key) for _, _, key in fakewatch.ESCAPE_EVENTS)
    assert sorted((k["key"], k["key_escaped"]) for k in got[-1]["keys"]) == want
    assert got[-1]["total"] == len(fakewatch.ESCAPE_EVENTS)


@pytest.mark.parametrize("scenario", ["drip", "endless"])
def test_count_ends_it_whatever_the_stream_sends(scenario):
    with fakewatch.fake(scenario) as fake:
        got = frames(fake, 1, 2)
    assert len(got) == 2
    assert [k["key"] for k in got[-1]["keys"]] == ["first"]
