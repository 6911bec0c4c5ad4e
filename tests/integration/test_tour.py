# SPDX-License-Identifier: MIT
"""The README tour, end to end, on the example server and client."""
import os
import re
import socket
import subprocess

import pytest

from .xp import BUILD, REPO, TIMEOUT, LineReader, base_env, ok, parse_sites

SERVER = os.path.join(BUILD, "examples", "server")
CLIENT = os.path.join(BUILD, "examples", "client")
CONN_STATS = os.path.join(BUILD, "modules", "conn_stats.so")

REQUEST_SIG = "example_request(const struct conn*, const char*, size_t)"
RELEASE_SIG = "example_conn_release(const struct conn*)"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(procs, cwd):
    """The server on a port nobody uses; returns (process, port).  The port
    is picked by binding port 0 first: if another process takes it in
    between, the server says so and we try another."""
    for _ in range(5):
        port = free_port()
        p = procs.popen([SERVER, "-p", str(port), "-t", "4"], stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, env=base_env(), cwd=cwd)
        line = LineReader(p.stdout.fileno(), "server").readline()
        if line.startswith("listening on"):
            assert f"(pid {p.pid})" in line, line
            return p, port
        assert "cannot listen" in line, line
        p.wait(timeout=TIMEOUT)
    pytest.fail("no free port for the example server")


def run_client(port, conns=4, reqs=100, binary=1):
    """Client traffic; returns (GET, SET) as the client counted them."""
    r = subprocess.run([CLIENT, "-p", str(port), "-c", str(conns), "-n", str(reqs),
                        "-b", str(binary)], capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(rf"sent {conns} connections, (\d+) GET, (\d+) SET\n", r.stdout)
    assert m, r.stdout
    return int(m.group(1)), int(m.group(2))


def test_readme_tour(procs, tmp_path):
    server, port = start_server(procs, cwd=str(tmp_path))
    pid = server.pid

    run_client(port)

    sites = parse_sites(ok(pid, "sites"))
    assert list(sites) == [SERVER], sites
    assert sorted(sites[SERVER]) == sorted([REQUEST_SIG, RELEASE_SIG]), sites

    # As in the README: from the source tree, with a relative path (the
    # tool makes it absolute; the server runs elsewhere).
    rel = os.path.relpath(CONN_STATS, REPO)
    out = ok(pid, "load", rel, cwd=REPO)
    assert out == "loaded conn_stats.so: 2 attachments\n", out

    sites = parse_sites(ok(pid, "sites"))
    assert sorted(sites[SERVER]) == sorted([
        f"* {REQUEST_SIG} => example_request -> on_request [{CONN_STATS}]",
        f"* {RELEASE_SIG} => *_conn_release -> on_release [{CONN_STATS}]",
    ]), sites

    gets, sets = run_client(port, conns=5, reqs=37, binary=2)
    assert gets > 0 and sets > 0
    # The client waits for every reply and the site fires before the
    # reply is written, so every request it sent has been counted.
    out = ok(pid, "command", "conn_stats.so", "requests")
    lines = out.splitlines()
    assert lines[0] == f"GET: {gets}", out
    assert lines[1] == f"SET: {sets}", out
    assert lines[2] == "other: 2", out  # one binary PING per binary connection

    out = ok(pid, "unload", "conn_stats.so")
    assert out == "unloaded conn_stats.so\n"
    assert ok(pid, "modules") == ""
    sites = parse_sites(ok(pid, "sites"))
    assert sorted(sites[SERVER]) == sorted([REQUEST_SIG, RELEASE_SIG]), sites

    # The server still serves, with nothing attached.
    run_client(port, conns=1, reqs=3)
    assert server.poll() is None
