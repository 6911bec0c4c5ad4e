#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write the fuzzers' seed inputs into tests/fuzz/corpus/NAME/.

The seeds are committed; rerun this only to change them.  They are small,
valid inputs the fuzzer mutates from: it finds the edge cases itself.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def note(name, ntype, desc):
    """One ELF note: header, name padded to 4, descriptor padded to 4."""
    pad = lambda b: b + b"\0" * (-len(b) % 4)
    return struct.pack("<III", len(name), len(desc), ntype) + pad(name) + pad(desc)


def xprobes_note(offset):
    return note(b"xprobes\0", 1, struct.pack("<i", offset))


def frame(payload):
    return struct.pack("<I", len(payload)) + payload


def notes_seeds():
    build_id = note(b"GNU\0", 3, bytes(range(20)))
    stapsdt = note(b"stapsdt\0", 3, struct.pack("<QQQ", 0x1130, 0, 0) +
                   b"prov\0name\0-4@%edi\0")
    return {
        "one": xprobes_note(64),
        "mixed": build_id + xprobes_note(-128) + stapsdt + xprobes_note(4096),
        # Same name, wrong type or size: walked past, not reported.
        "lookalikes": note(b"xprobes\0", 2, b"\0\0\0\0") +
                      note(b"xprobes\0", 1, b"\0" * 8) + xprobes_note(0),
        "truncated": (build_id + xprobes_note(8))[:-2],
    }


def frames_seeds():
    # Byte 0 picks the size limit (index into fuzz_frames.c's table), byte 1
    # seeds the chunk sizes; then the stream.
    req = frame(b"version") + frame(b"sites *:*") + frame(b"")
    reply = frame(b"\x00xprobes agent 0.1.0 (ABI 1)\n") + frame(b"\x01unknown command\n")
    return {
        "requests": bytes([5, 7]) + req,
        "replies": bytes([6, 200]) + reply,
        "too_big": bytes([3, 1]) + frame(b"ok") + struct.pack("<I", 65) + b"x" * 65,
        "partial": bytes([5, 3]) + frame(b"load /tmp/m.so")[:-4],
    }


def commands_seeds():
    return {
        "tour": b"version\nhelp\nobjects\nsites\nload a.so\nmodules\nprobes\n"
                b"sites *:*_tick\ncommand mod_count.so count\n"
                b"disable mod_count.so\nenable mod_count.so\nunload mod_count.so\n",
        "two_modules": b"load a\nload b\nload a\nmodules *\nprobes mod_*:*\n"
                       b"command mod_nocmd.so x\ncommand inproc.so hello world\n"
                       b"unload mod_nocmd.so\ndisable inproc.so\nsites\nunload inproc.so\n",
        "errors": b"frobnicate\nload\nload b extra\nenable\ndisable ghost.so\n"
                  b"version extra\nsites a b\ncomplete\ncomplete modules\n"
                  b"complete sites\n  \n",
        "globs": b"sites fuzzprov:*\nsites *:fuzz_[pt]*\nobjects *\nprobes :*\n"
                  b"modules /fuzz/*\n",
    }


def tool_readers_seeds():
    # Each input is read as a `trace buffers` reply, a `trace objects`
    # reply and as memory (clock, buffer header, records): see
    # fuzz_tool_readers.c.
    clock = struct.pack("<QQQQ", 1000, 5000, 2000, 6000)
    def header(cap, head, lost=0):
        return struct.pack("<IIiIQQQ3Q", 0x58505452, 1, 7, 0, cap, head, lost, 0, 0, 0)
    def rec(tsc, kind, addr):
        return struct.pack("<QQ", tsc << 2 | kind, addr)
    calls = (rec(1100, 0, 0x401000) + rec(1150, 0, 0x402000) + rec(1160, 2, 0x403000) +
             rec(1170, 1, 0x402000) + rec(1180, 3, 5) + rec(1190, 1, 0x401000) +
             rec(1200, 1, 0x404000))
    return {
        "buffers": b"clock start_tsc=1000 start_ns=5000 now_tsc=2000 now_ns=6000\n"
                   b"buf tid=7 addr=0x7f0000001000 cap=4096\n"
                   b"buf tid=8 addr=0x7f0000100000 cap=16\n",
        "objects": b"object base=0x400000 sites=12 table=0x404000 path=/usr/bin/prog\n"
                   b"object base=0x7f1234560000 sites=0 table=0x0 path=/lib/libx.so (deleted)\n",
        "records": clock + header(8, 7, 9) + calls,
        "empty_buffer": clock + header(4, 0),
    }


def watch_seeds():
    # Byte 0: how many times the rest is written (minus one, mod 8);
    # byte 1: the chunk size in 64-byte units; then memcached 1.6.18's
    # lines as Debian's writes them (see fuzz_watch.c).
    lines = (b"OK\r\n"
             b"ts=1795853949.907240 gid=2 type=item_get key=caf%C3%A9 status=not_found "
             b"clsid=0 cfd=25 size=0\r\n"
             b"ts=1795853949.907251 gid=3 type=item_store key=caf%C3%A9 status=stored "
             b"cmd=set ttl=0 clsid=1 cfd=25 size=1\r\n"
             b"ts=1795853950.8074 gid=8 type=item_get key=raw%3A%FF%FE status=found "
             b"clsid=1 cfd=25 size=1\r\n"
             b"ts=1795853950.363131 gid=25 type=item_store key=mkey status=exists cmd=cas "
             b"ttl=0 clsid=1 cfd=26 size=1\r\n")
    return {
        "stream": bytes([0, 4]) + lines,
        "skipped": bytes([1, 0]) + lines + b"skipped=12\r\n" + lines,
        "error": bytes([0, 255]) + b"CLIENT_ERROR watch commands not allowed\r\n",
        "long": bytes([7, 1]) + b"ts=1.1 gid=1 type=item_get key=" + b"%41" * 300,
    }


def recorder_seeds():
    # A `trace buffers` reply ({R0}, {R1}: the harness's rings), NUL, then
    # flags, -t's minimum, each ring's version, flags, head, lost and tail,
    # then the rings' records: see fuzz_recorder.c.
    reply = (b"clock start_tsc=1000 start_ns=5000 now_tsc=2000 now_ns=6000\n"
             b"buf tid=7 addr={R0} cap=64\n")
    both = reply + b"buf tid=8 addr={R1} cap=64\nobjects gen=1\nunbuffered lost=3\ntracing on=1\n"
    def ring(head, lost=0, tail=0, flags=0, version=2):
        return struct.pack("<BBHHH", version, flags, head, lost, tail)
    def rec(tsc, kind, addr):
        return struct.pack("<QQ", tsc << 2 | kind, addr)
    calls = (rec(1100, 0, 0x401000) + rec(1150, 0, 0x402000) + rec(1160, 2, 0x403001) +
             rec(1170, 1, 0x402000) + rec(1180, 3, 5) + rec(1190, 1, 0x401000) +
             rec(1200, 1, 0x404000))
    deep = b"".join(rec(1100 + i, 0, 0x401000 + i) for i in range(64))
    unwound = (rec(1100, 0, 0x401000) + rec(1110, 0, 0x402000) + rec(1120, 0, 0x403000) +
               rec(1130, 1, 0x401000) + rec(1140, 1, 0x405000))
    def seed(text, flags, min_ns, r0, r1, records):
        return text + b"\0" + struct.pack("<BH", flags, min_ns) + r0 + r1 + records
    return {
        "calls": seed(reply, 0, 0, ring(7), ring(0), calls),
        "two_rings_filtered": seed(both, 1 | 16, 50, ring(7, lost=2), ring(5, tail=2),
                                   calls + bytes(16 * 57) + unwound),
        "deep": seed(reply, 16, 0, ring(64), ring(0), deep),
        "cut_short": seed(both, 2 << 1 | 16, 0, ring(64, tail=3), ring(5), deep + unwound),
        "flight_recorder": seed(reply, 0, 0, ring(100, flags=2), ring(0), calls),
    }


def dwarf_seeds():
    # Only a bare ELF header: the real seeds, -g builds of
    # tests/trace/dwarf_prog.c, are compiled into the run's corpus by
    # tests/fuzz.mk (binaries are not committed).
    ehdr = (b"\x7fELF" + bytes([2, 1, 1]) + bytes(9) +
            struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 0, 0, 64, 56, 0, 64, 0, 0))
    return {"bare_header": ehdr}


def main():
    for name, seeds in (("dwarf", dwarf_seeds()), ("notes", notes_seeds()), ("frames", frames_seeds()),
                        ("commands", commands_seeds()), ("tool_readers", tool_readers_seeds()),
                        ("watch", watch_seeds()), ("recorder", recorder_seeds())):
        d = os.path.join(HERE, "corpus", name)
        os.makedirs(d, exist_ok=True)
        for fname, data in seeds.items():
            with open(os.path.join(d, fname), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
