"""Issue 3 on the real target: Debian's memcached 1.6.18 built with
`./configure --enable-dtrace DTRACE=xprobes-dtrace` and no other change."""
import os
import shutil
import signal
import struct
import subprocess

import pytest

from conftest import BUILD, Memcached, xp

D_PROBES = {
    "conn__allocate": "int", "conn__release": "int", "conn__create": "void*",
    "conn__destroy": "void*", "conn__dispatch": "int, int64_t",
    "slabs__allocate": "int, int, int, void*", "slabs__allocate__failed": "int, int",
    "slabs__slabclass__allocate": "int", "slabs__slabclass__allocate__failed": "int",
    "slabs__free": "int, int, void*", "assoc__find": "const char*, int, int",
    "assoc__insert": "const char*, int", "assoc__delete": "const char*, int",
    "item__link": "const char*, int, int", "item__unlink": "const char*, int, int",
    "item__remove": "const char*, int, int", "item__update": "const char*, int, int",
    "item__replace": "const char*, int, int, const char*, int, int",
    "process__command__start": "int, const void*, int",
    "process__command__end": "int, const void*, int",
    "command__incr": "int, const char*, int, int64_t",
    "command__decr": "int, const char*, int, int64_t",
    "command__delete": "int, const char*, int",
}
for _c in ("get", "add", "set", "replace", "prepend", "append", "touch", "cas"):
    D_PROBES["command__" + _c] = "int, const char*, int, int, int64_t"
MODULE = os.path.join(BUILD, "modules", "mc_count.so")


def recv_until(sock, end):
    data = b""
    while not data.endswith(end):
        chunk = sock.recv(65536)
        assert chunk, "memcached closed the connection"
        data += chunk
    return data


def text_set(sock, key, value=b"v"):
    sock.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (key, len(value), value))
    assert recv_until(sock, b"\r\n") == b"STORED\r\n"


def text_get(sock, *keys):
    sock.sendall(b"get " + b" ".join(keys) + b"\r\n")
    return recv_until(sock, b"END\r\n")


def bin_request(sock, opcode, key, extras=b"", value=b""):
    body = extras + key + value
    hdr = struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), len(extras), 0, 0, len(body), 0, 0)
    sock.sendall(hdr + body)
    resp = b""
    while len(resp) < 24:
        resp += sock.recv(24 - len(resp))
    magic, _, _, _, _, status, bodylen = struct.unpack(">BBHBBHI", resp[:12])
    assert magic == 0x81
    rest = b""
    while len(rest) < bodylen:
        rest += sock.recv(bodylen - len(rest))
    return status


def totals(pid):
    r = xp(pid, "command", "mc_count.so", "totals")
    assert r.returncode == 0, r.stderr
    return dict(line.split() for line in r.stdout.splitlines())


def test_sites_show_all_31_probes_with_their_d_signatures(memcached):
    r = xp(memcached.pid, "sites")
    assert r.returncode == 0, r.stderr
    seen = {}
    for line in r.stdout.splitlines():
        line = line.strip()
        if not line.startswith("memcached:"):
            continue
        name, rest = line[len("memcached:"):].split("(", 1)
        seen[name] = rest.split(")", 1)[0]
    assert seen == D_PROBES


def test_list_reads_the_process_without_attaching(memcached):
    r = xp("list", "-p", memcached.pid)
    assert r.returncode == 0, r.stderr
    for name in D_PROBES:
        assert "memcached:" + name in r.stdout, name


@pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace not installed")
def test_bpftrace_lists_the_same_probes(memcached):
    r = subprocess.run(["bpftrace", "-l", "usdt:*", "-p", str(memcached.pid)],
                       capture_output=True, text=True, timeout=120)
    names = {line.rsplit(":", 1)[1] for line in r.stdout.splitlines() if ":memcached:" in line}
    assert names == set(D_PROBES)


def test_module_counts_exactly_what_clients_sent(memcached):
    r = xp(memcached.pid, "load", MODULE)
    assert r.returncode == 0 and "refused" not in r.stdout, r.stdout + r.stderr
    s = memcached.client()
    # Text protocol: 20 sets, then gets including a multi-get with a miss.
    for i in range(20):
        text_set(s, b"key:%d" % i)
    for i in range(10):
        assert b"VALUE key:%d " % i in text_get(s, b"key:%d" % i)
    out = text_get(s, b"key:1", b"key:2", b"nokey")  # 3 fires: hit, hit, miss
    assert out.count(b"VALUE") == 2
    # Binary protocol: 5 sets (opcode 1) and 7 gets (opcode 0), 2 of them misses.
    b = memcached.client()
    for i in range(5):
        assert bin_request(b, 0x01, b"bin:%d" % i, extras=struct.pack(">II", 0, 0),
                           value=b"x") == 0
    for i in range(7):
        bin_request(b, 0x00, b"bin:%d" % i)
    t = totals(memcached.pid)
    assert int(t["set"]) == 20 + 5
    assert int(t["get"]) == 10 + 3 + 7
    assert t["dropped"] == "0"
    keys = xp(memcached.pid, "command", "mc_count.so", "keys").stdout.splitlines()
    per_key = {line.split()[2]: (int(line.split()[0]), int(line.split()[1])) for line in keys}
    assert per_key["key:1"] == (2, 1)  # keys read by keylen: "key:1" != "key:10"
    assert per_key["key:10"] == (0, 1)
    assert per_key["nokey"] == (1, 0)
    assert per_key["bin:6"] == (1, 0)
    assert xp(memcached.pid, "unload", "mc_count.so").returncode == 0
    assert b"VALUE key:3" in text_get(s, b"key:3")


@pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace not installed")
def test_bpftrace_at_the_same_time_sees_the_same_count(memcached):
    assert xp(memcached.pid, "load", MODULE).returncode == 0
    bt = subprocess.Popen(
        ["bpftrace", "-p", str(memcached.pid), "-e",
         'usdt:*:memcached:command__get { @g = count(); } '
         'usdt:*:memcached:command__set { @s = count(); } '
         'BEGIN { printf("armed\\n"); }'],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in bt.stdout:  # wait until its probes are attached
            if "armed" in line:
                break
        s = memcached.client()
        for i in range(40):
            text_set(s, b"bt:%d" % i)
        for i in range(0, 40, 2):
            text_get(s, b"bt:%d" % i, b"bt:%d" % (i + 1))
    finally:
        bt.send_signal(signal.SIGINT)
        out, _ = bt.communicate(timeout=60)
    counts = dict(line.split(": ") for line in out.splitlines() if line.startswith("@"))
    assert counts == {"@g": "40", "@s": "40"}, out
    t = totals(memcached.pid)
    assert (t["get"], t["set"]) == ("40", "40")


def test_inject_into_memcached_without_preload(memcached_bin, tmp_path):
    mc = Memcached(memcached_bin, str(tmp_path), preload=False)
    try:
        r = xp(mc.pid, "sites")
        assert r.returncode == 1 and "no XProbes agent" in r.stderr
        r = xp("--inject", mc.pid, "load", MODULE)
        assert r.returncode == 0, r.stderr
        s = mc.client()
        text_set(s, b"inj")
        text_get(s, b"inj")
        assert totals(mc.pid)["get"] == "1"
    finally:
        mc.stop()


def test_memcacheds_own_test_suite_passes_on_this_build(memcached_bin):
    """The part of memcached's t/ suite that runs here, on the build that
    has XProbes sites (memcached-debug carries them too)."""
    srcdir = os.path.dirname(memcached_bin)
    tests = ["t/getset.t", "t/incrdecr.t", "t/multiversioning.t", "t/noreply.t",
             "t/binary.t", "t/cas.t", "t/flush-all.t", "t/expirations.t", "t/touch.t",
             "t/issue_70.t", "t/item_size_max.t"]
    tests = [t for t in tests if os.path.exists(os.path.join(srcdir, t))]
    r = subprocess.run(["prove", *tests], cwd=srcdir, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "Result: PASS" in r.stdout
