# SPDX-License-Identifier: MIT
"""mcsnoop shows keys as people write them: the same key text
as mctop (tests/memcached/keytext.py's rule) in its table, aligned by
terminal width, and in its JSON with "key_escaped", reversing to the
exact bytes sent."""
import json
import re

from test_mcsnoop import Snoop, memcached, memcached_bin, _mc  # noqa: F401
import keytext  # noqa: E402  (tests/memcached/keytext.py, on the path test_mcsnoop set)
from keytext import KEYS, cols, send_keys  # noqa: E402

TEXT = {k: keytext.from_bytes(k)[0] for k, _ in KEYS}


def snoop_keys(mc, *args):
    """mcsnoop's lines for the keys sent (one mcsnoop at a time: the
    module is one per memcached), up to an end marker."""
    snoop = Snoop(mc, *args)
    send_keys(mc)
    s = mc.client()
    s.sendall(b"get __end__\r\n")
    _mc.recv_until(s, b"END\r\n")
    s.close()
    snoop.wait_line(lambda line: "__end__" in line, "the end marker")
    assert snoop.finish() == 0, snoop.stderr()
    return [line.encode("latin-1").decode("utf-8") for line in snoop.lines]  # as sent


def test_json_keys_reverse_to_the_bytes(memcached):
    events = [json.loads(line) for line in snoop_keys(memcached, "--json")]
    got = {(keytext.to_bytes(e["key"], e["key_escaped"]), e["cmd"]) for e in events}
    assert {(k, "set") for k, _ in KEYS} <= got
    for e in events:
        key = keytext.to_bytes(e["key"], e["key_escaped"])
        assert e["key"] == keytext.from_bytes(key)[0] and e["key_bytes"] == len(key)
        assert e["key_escaped"] == (e["key"] != key.decode("utf-8", "replace"))


def test_table_shows_key_texts_aligned(memcached):
    lines = snoop_keys(memcached)
    header, rows = lines[0], lines[1:]
    size_end = header.index("SIZE") + len("SIZE")
    for key, text in TEXT.items():
        line = next(r for r in rows if r.split()[4] == text and r.split()[3] == "set")
        start = line.index(" %s " % text) + 1
        m = re.match(r"%s +\d+" % re.escape(text), line[start:])
        assert m, line
        assert cols(line[:start + m.end()]) == size_end, (line, header)  # aligned by width
