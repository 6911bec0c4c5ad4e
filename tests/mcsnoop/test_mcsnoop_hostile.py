# SPDX-License-Identifier: MIT
"""mcsnoop trusts nothing in a watch stream: against a fake memcached
(tests/memcached/fakewatch.py) whose lines carry escape sequences and
quotes in every field, numbers no memcached writes, a line that drips in
without ever ending and one that never ends at full speed, its output has
no control byte, every JSON line parses to the fields documented, and -d
ends it whatever the stream does."""
import json
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
MCSNOOP = os.path.join(BUILD, "mcsnoop")
# Only catches a hang: a tool that ends on time ends seconds after -d.
DEADLINE = 60

sys.path.insert(0, os.path.join(ROOT, "tests", "memcached"))
import fakewatch  # noqa: E402
import keytext  # noqa: E402  (the key text rule, written again as the oracle)

FIELDS = {"time_ns", "time_s", "thread", "conn", "cmd", "key", "key_escaped", "key_bytes",
          "size_bytes", "result", "lat_ns"}
CONTROL = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")  # newline aside


def snoop(fake, *args):
    """mcsnoop's (stdout, stderr) bytes; it must end by itself."""
    p = subprocess.Popen([MCSNOOP, "-p", str(fake.pid), "--port", str(fake.port),
                          *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        out, err = p.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail("mcsnoop %s did not end on a stream that never ends its line" % (args,))
    assert p.returncode == 0, err
    return out, err


def expected():
    return sorted((conn, keytext.from_bytes(cmd)[0], keytext.from_bytes(key))
                  for conn, cmd, key in fakewatch.ESCAPE_EVENTS)


def test_text_has_no_control_byte_and_every_field_is_key_text():
    with fakewatch.fake("escapes") as fake:
        out, err = snoop(fake, "-d", 1)
    assert not CONTROL.search(out), out
    rows = [line.split() for line in out.decode("utf-8").splitlines()[1:]]
    got = sorted((int(r[2]), r[3], r[4]) for r in rows)
    assert got == [(conn, cmd, text) for conn, cmd, (text, _) in expected()]
    # The lines no memcached writes are not shown, and are said.
    assert b"%d lines of the watch stream ignored" % fakewatch.ESCAPE_MALFORMED in err


def test_json_is_valid_and_holds_only_its_fields():
    with fakewatch.fake("escapes") as fake:
        out, _ = snoop(fake, "--json", "-d", 1)
    assert not CONTROL.search(out), out
    events = [json.loads(line) for line in out.decode("utf-8").splitlines()]
    for e in events:
        assert set(e) == FIELDS, e  # a quote in a field added none
    got = sorted((e["conn"], e["cmd"], (e["key"], e["key_escaped"])) for e in events)
    assert got == expected()
    for e in events:
        assert keytext.to_bytes(e["key"], e["key_escaped"]) in \
            {key for _, _, key in fakewatch.ESCAPE_EVENTS}


@pytest.mark.parametrize("scenario", ["drip", "endless"])
@pytest.mark.parametrize("json_out", [False, True])
def test_duration_ends_it_whatever_the_stream_sends(scenario, json_out):
    # One event, then a line that never ends: dripping a byte every 20 ms
    # (its statistics too), or pouring in as fast as it goes.
    with fakewatch.fake(scenario) as fake:
        out, err = snoop(fake, *(["--json"] if json_out else []), "-d", 2)
    assert not CONTROL.search(out)
    lines = out.decode("utf-8").splitlines()
    if json_out:
        assert [json.loads(line)["key"] for line in lines] == ["first"]
    else:
        assert [line.split()[4] for line in lines[1:]] == ["first"]
    if scenario == "endless":  # dropped whole, not cut into a line that parses
        assert b"1 lines of the watch stream ignored" in err
