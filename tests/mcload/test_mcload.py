# SPDX-License-Identifier: MIT
"""mcload against Debian's memcached: what it says it sent is
what memcached counted, Zipf is reproducible and as skewed as theory says,
an open-loop rate is kept, and bad options are refused with exit 2."""
import json
import math
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
MCLOAD = os.path.join(BUILD, "mcload")
MEMCACHED = shutil.which("memcached") or "/usr/bin/memcached"


sys.path.insert(0, os.path.join(ROOT, "tests", "memcached"))
import mcserver as _mc  # noqa: E402  (the real memcached, tests/memcached/mcserver.py)
free_port = _mc.free_port


class Server(_mc.Memcached):
    """Debian's memcached (no agent) in the foreground on a free loopback port."""

    def __init__(self, tmp):
        super().__init__(MEMCACHED, tmp, preload=False, daemon=False)

    def stats(self):
        with self.client() as s:
            s.sendall(b"stats\r\n")
            data = b""
            while not data.endswith(b"END\r\n"):
                chunk = s.recv(65536)
                assert chunk, "memcached closed the stats connection"
                data += chunk
        return {f[1]: int(f[2]) for f in (l.split() for l in data.decode().splitlines())
                if len(f) == 3 and f[0] == "STAT" and f[2].isdigit()}


@pytest.fixture
def server(tmp_path):
    srv = Server(str(tmp_path))
    yield srv
    srv.stop()


def mcload(*args, check=True):
    r = subprocess.run([MCLOAD, *map(str, args)], capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def run_json(srv, *args):
    return json.loads(mcload("-s", "127.0.0.1:%d" % srv.port, "--json", *args).stdout)


def read_truth(path):
    """{escaped key: (gets, sets)} from a TSV or JSON truth file."""
    with open(path) as f:
        text = f.read()
    if text.startswith("{"):
        return {k: (v["get"], v["set"]) for k, v in json.loads(text).items()}
    out = {}
    for line in text.splitlines():
        key, gets, sets = line.split("\t")
        out[key] = (int(gets), int(sets))
    return out


@pytest.mark.parametrize("proto", [
    ["--protocol", "text", "-P", "8"],
    ["-B", "-P", "3"],
    ["-B", "--binary-keys", "--truth-format", "json"],
], ids=["text-pipelined", "binary-pipelined", "binary-keys-json"])
def test_truth_matches_memcached_stats(server, tmp_path, proto):
    truth = str(tmp_path / "truth")
    res = run_json(server, *proto, "-c", "6", "-T", "2", "-k", "2000", "-z", "0.9",
                   "-r", "3:1", "-v", "10-300", "-m", "3", "-n", "6000", "--truth", truth)
    st = server.stats()
    t = read_truth(truth)
    gets = sum(g for g, _ in t.values())
    sets = sum(s for _, s in t.values())
    assert res["requests"] == res["completed"] == 6000
    assert res["gets"] + res["sets"] == 6000
    assert gets == res["get_keys"] == 3 * res["gets"] == st["cmd_get"]
    assert sets == res["sets"] == st["cmd_set"]
    assert res["hits"] == st["get_hits"] > 0
    assert res["misses"] == st["get_misses"] > 0
    assert res["server_errors"] == res["conn_errors"] == res["unanswered"] == 0
    lat = res["latency_us"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]
    if "--binary-keys" in proto:
        # 8 raw bytes after the prefix: small key numbers are mostly NULs.
        assert any(k.startswith("key:\x00\x00\x00\x00\x00\x00") for k in t)
    else:
        assert set(t) <= {"key:%d" % i for i in range(2000)}


@pytest.mark.parametrize("proto", [[], ["-B"]], ids=["text", "binary"])
def test_multiget_counts_every_key_and_hit(server, tmp_path, proto):
    """Every key set first, so a 10-key multi-get must hit all 10: checks
    the VALUE / getkq parsing as well as the counting."""
    sets = str(tmp_path / "sets")
    run_json(server, *proto, "-k", "40", "-r", "0:1", "-n", "2000", "--truth", sets)
    assert len(read_truth(sets)) == 40, "some key was never set"
    res = run_json(server, *proto, "-k", "40", "-r", "1:0", "-m", "10", "-n", "500")
    st = server.stats()
    assert res["get_keys"] == 5000 == st["cmd_get"]
    assert res["hits"] == 5000 == st["get_hits"]
    assert st["cmd_set"] == 2000


def harmonic(n, s):
    """H(n, s) = sum of k^-s for k = 1..n: exactly up to m, then the
    Euler-Maclaurin tail (its error is far below 1e-9 here)."""
    m = min(n, 10000)
    head = sum(k ** -s for k in range(1, m))
    if m == n:
        return head + n ** -s
    integral = (n ** (1 - s) - m ** (1 - s)) / (1 - s)
    f = lambda x: x ** -s
    df = lambda x: -s * x ** (-s - 1)
    return head + integral + (f(m) + f(n)) / 2 + (df(n) - df(m)) / 12


@pytest.mark.parametrize("keys", [1000, 10_000_000])
def test_zipf_reproducible_and_skewed(server, tmp_path, keys):
    args = ["-c", "4", "-T", "2", "-k", keys, "-z", "0.99", "-r", "1:1", "-v", "8",
            "-n", "20000"]
    a, b, c = (str(tmp_path / n) for n in "abc")
    run_json(server, *args, "--seed", "7", "--truth", a)
    run_json(server, *args, "--seed", "7", "--truth", b)
    run_json(server, *args, "--seed", "8", "--truth", c)
    with open(a) as fa, open(b) as fb, open(c) as fc:
        ta, tb, tc = fa.read(), fb.read(), fc.read()
    assert ta == tb, "same seed, same requests: the truth must be identical"
    assert ta != tc, "another seed must draw other keys"
    t = read_truth(a)
    draws = {k: g + s for k, (g, s) in t.items()}
    n = sum(draws.values())
    assert n == 20000
    # Key 0 is rank 1.  Its count is Binomial(n, p) with p = 1/H(K, s):
    # 5 standard deviations away happens by chance less than once in a
    # million runs, while a sampler off by a few percent in p fails.
    p = 1 / harmonic(keys, 0.99)
    sd = math.sqrt(n * p * (1 - p))
    assert abs(draws["key:0"] - n * p) < 5 * sd, (draws["key:0"], n * p, sd)
    # And rank 2 at p / 2^0.99, the shape and not just the head.
    p2 = p / 2 ** 0.99
    assert abs(draws["key:1"] - n * p2) < 5 * math.sqrt(n * p2 * (1 - p2))
    assert max(draws, key=draws.get) == "key:0"
    assert all(0 <= int(k[4:]) < keys for k in draws)


def test_open_loop_rate_is_kept(server):
    res = run_json(server, "-R", "2000", "-d", "2", "-c", "4", "-T", "2")
    st = server.stats()
    # The timeline holds 2000 x 2 = 4000 intended sends (10% slack for a
    # run cut short); each was sent and answered, whatever its lateness.
    assert 3600 <= res["requests"] <= 4400, res["requests"]
    assert res["completed"] == res["requests"] == st["cmd_get"] + st["cmd_set"]


def test_unreachable_server_fails_cleanly():
    r = mcload("-s", "127.0.0.1:%d" % free_port(), "-n", "10", check=False)
    assert r.returncode == 1
    assert "cannot connect to 127.0.0.1:" in r.stderr


@pytest.mark.parametrize("args,word", [
    (["--connections", "0"], "--connections"),
    (["-c", "abc"], "--connections"),
    (["-c", "2", "-T", "3"], "--threads"),
    (["--zipf", "-1"], "--zipf"),
    (["--zipf", "nan"], "--zipf"),
    (["--ratio", "9"], "--ratio"),
    (["--ratio", "0:0"], "--ratio"),
    (["--value-size", "300-20"], "--value-size"),
    (["--value-size", "2000000"], "--value-size"),
    (["--multiget", "0"], "--multiget"),
    (["--rate", "0"], "--rate"),
    (["--rate", "100", "--pipeline", "4"], "--pipeline"),
    (["--binary-keys"], "--binary-keys"),
    (["--key-prefix", "a b"], "--key-prefix"),
    (["--key-prefix", "x" * 250], "--key-prefix"),
    (["--protocol", "udp"], "--protocol"),
    (["--truth-format", "xml"], "--truth-format"),
    (["--truth", "/nonexistent/dir/truth.tsv"], "--truth"),  # refused before any load
    (["-s", "localhost"], "--server"),
    (["-s", "127.0.0.1:99999"], "port"),
    (["--seconds"], "--seconds"),
    (["--frobnicate"], "--frobnicate"),
    (["-q"], "-q"),
    (["extra"], "extra"),
])
def test_bad_options_exit_2(args, word):
    r = mcload(*args, check=False)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert r.stderr.startswith("mcload: ") and word in r.stderr, r.stderr
    assert r.stdout == ""


def test_value_size_takes_the_units_people_type(server):
    """-v 2K is 2048 bytes; a size out of range is answered in its unit."""
    run_json(server, "-k", 1, "-r", "0:1", "-v", "2K", "-n", 5, "-c", 1)
    stored = server.stats()["bytes"]  # one item: the value and memcached's header
    assert 2048 <= stored < 2048 + 300, stored
    r = mcload("-v", "2M", check=False)
    assert r.returncode == 2
    assert r.stderr.startswith("mcload: --value-size: 2M is out of range (0 to 1M)"), r.stderr
    assert "0 to 1M, K and M suffixes" in mcload("--help").stdout
