# SPDX-License-Identifier: MIT
"""Only the owner of a process (or root) may attach to it."""
import os

import pytest

from .xp import (NOBODY, TIMEOUT, fixture, needs_root_and_setpriv, ok, run_as_nobody,
                 socket_path, xprobes)

pytestmark = needs_root_and_setpriv(
    "the target must belong to root and the client run as uid 65534")

# Runs as the other user: connect to the agent's socket, send a request,
# print what happened.
PROBE_SOCKET = r"""
import socket, struct, sys
path, request = sys.argv[1], sys.argv[2].encode()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(%d)
try:
    s.connect(path)
except PermissionError:
    print("EACCES"); sys.exit(0)
try:
    s.sendall(struct.pack("<I", len(request)) + request)
except (BrokenPipeError, ConnectionResetError):
    pass
def exact(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            print("EOF after", len(b)); sys.exit(0)
        b += c
    return b
n, = struct.unpack("<I", exact(4))
body = exact(n)
print("status", body[0])
print(body[1:].decode())
try:
    print("closed" if s.recv(1) == b"" else "open")
except ConnectionResetError:  # closed with our request unread
    print("closed")
""" % TIMEOUT


def test_tool_refuses_non_owner(procs, public_xprobes):
    t = procs.target("sitehost")
    count = fixture("mod_count.so")

    for argv in ([str(t.pid), "sites"], [str(t.pid), "-c", "sites", "-c", f"load {count}"]):
        r = run_as_nobody([public_xprobes, *argv])
        assert r.returncode == 1, r
        assert "permission denied" in r.stderr, r.stderr
        assert f"process {t.pid} belongs to uid 0 and you are uid {NOBODY}" in r.stderr
        assert r.stdout == ""

    # Nothing was loaded, and the target is fine.
    assert ok(t.pid, "modules") == ""
    t.assert_healthy()
    assert xprobes(t.pid, "sites").returncode == 0


def test_socket_directory_refuses_non_owner(procs):
    t = procs.target("sitehost")
    path = socket_path(t.pid)
    assert os.path.exists(path)
    count = fixture("mod_count.so")
    r = run_as_nobody(["/usr/bin/python3", "-c", PROBE_SOCKET, path, f"load {count}"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "EACCES\n"
    assert ok(t.pid, "modules") == ""
    t.assert_healthy()


def test_agent_refuses_non_owner_past_the_directory(procs):
    """Past the directory (CAP_DAC_OVERRIDE kept as uid 65534) the agent's
    own ptrace-equivalent check (lib/control/peer.c) must refuse, before reading
    any request."""
    t = procs.target("sitehost")
    count = fixture("mod_count.so")
    r = run_as_nobody(["/usr/bin/python3", "-c", PROBE_SOCKET, socket_path(t.pid),
                       f"load {count}"], caps=("dac_override",))
    if r.returncode != 0 and "setpriv" in r.stderr:
        pytest.skip(f"cannot keep a capability across setpriv here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "status 1", r.stdout
    assert lines[1] == (f"permission denied: uid {NOBODY} may not attach to process {t.pid}: "
                        f"it runs as uid 0/0/0 gid 0/0/0 (real/effective/saved), not all your "
                        f"uid {NOBODY} and gid {NOBODY} (ptrace would refuse); use root"), r.stdout
    assert lines[-1] == "closed", r.stdout
    assert ok(t.pid, "modules") == ""
    t.assert_healthy()
