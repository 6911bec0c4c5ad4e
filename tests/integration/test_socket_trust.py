# SPDX-License-Identifier: MIT
"""The tool trusts no socket it finds, and no other user can deny a uid its
agent: a symlink planted in a socket directory, a fake agent (in its
owner's directory, or in a directory another user made first), a squatted
/tmp/.xprobes-UID, and replies full of terminal escape sequences.

Every test gets its own run directory (XPROBES_RUNDIR), world-writable
and sticky like /tmp, so the squats never touch the real /tmp/.xprobes-*
of other tests and users.  uid 65534 plays the user whose processes are
attacked or attached to, uid 4242 (no account) another user, and the tool
runs as root, whose commands are worth stealing."""
import os
import shutil
import subprocess
import sys

import pytest

from .test_shell import start_shell
from .xp import (BUILD, NOBODY, TIMEOUT, XPROBES, LineReader, Target, as_user, base_env, fails,
                 fixture, in_pid_namespace, module_count, ok, xprobes)

SQUATTER = 4242

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0,
                       reason="needs root: to run processes as other users"),
    pytest.mark.skipif(shutil.which("setpriv") is None,
                       reason="needs setpriv (util-linux) to run as other users"),
]

# Pretends to be the agent of a process: answers every connection at once
# with a success full of escape sequences, counts the bytes it is sent, and
# reports on "report" from stdin.  argv: socket path, mode of its directory
# if it has to make it.
FAKE_AGENT = r"""
import os, select, socket, struct, sys
path, mode = sys.argv[1], int(sys.argv[2], 8)
d = os.path.dirname(path)
if not os.path.isdir(d):
    os.mkdir(d)
    os.chmod(d, mode)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(8)
print("listening", flush=True)
reply = b"\x00xprobes agent 9 \x1b[2J\x1b]0;owned\x07 done\n"
conns, received = [], 0
def take(c):
    try:
        c.sendall(struct.pack("<I", len(reply)) + reply)
    except OSError:
        pass
    conns.append(c)
def drain(c):
    global received
    try:
        b = c.recv(65536)
    except OSError:
        b = b""
    received += len(b)
    if not b:
        conns.remove(c)
        c.close()
while True:
    r, _, _ = select.select([srv, sys.stdin] + conns, [], [])
    if sys.stdin in r:
        break
    if srv in r:
        take(srv.accept()[0])
    for c in [c for c in conns if c in r]:
        drain(c)
# The tool has exited: whatever it sent is queued; take it all.
srv.setblocking(False)
while True:
    try:
        take(srv.accept()[0])
    except BlockingIOError:
        break
for c in list(conns):
    while c in conns:
        drain(c)
print("received", received, flush=True)
"""


@pytest.fixture(scope="module", autouse=True)
def others_can_run_the_build():
    """The targets run as uid 65534: the build must be theirs to run."""
    for path in (fixture("sitehost"), XPROBES, os.path.join(BUILD, "libxprobes.so")):
        r = subprocess.run(as_user(NOBODY, ["test", "-r", path]), timeout=TIMEOUT)
        if r.returncode != 0:
            pytest.fail(f"uid {NOBODY} cannot read {path}: make the build directory "
                        "readable to others (chmod a+rX on it and its parents)")


def target_as(procs, uid, name, rundir, agent=True):
    """A fixture program run as uid (and gid uid) with our run directory."""
    env = base_env(XPROBES_RUNDIR=rundir)
    if not agent:
        env["XPROBES_AGENT"] = "off"
    p = procs.popen(as_user(uid, [fixture(name)]), stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, env=env, cwd="/")
    t = Target(p, f"{name} as uid {uid}")
    assert int(t.expect("ready ").split()[1]) == p.pid
    return t


def run_as(uid, *argv):
    subprocess.run(as_user(uid, list(argv)), check=True, timeout=TIMEOUT)


def start_fake_agent(procs, uid, path, dir_mode):
    p = procs.popen(as_user(uid, [sys.executable, "-c", FAKE_AGENT, path, dir_mode]),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/")
    out = LineReader(p.stdout.fileno(), "fake agent")
    assert out.readline() == "listening"
    return p, out


def fake_agent_received(p, out):
    """Bytes the fake agent was sent, all of them, once the tool is gone."""
    p.stdin.write(b"report\n")
    p.stdin.flush()
    word, n = out.readline().split()
    assert word == "received"
    return int(n)


@pytest.mark.parametrize("victim_has_agent", [False, True], ids=["no-agent", "agent"])
def test_planted_symlink_is_refused(rundir, procs, victim_has_agent):
    """uid 65534 points the socket name of its own process at a root
    process's agent, hoping for root's `load` there: refused, and the root
    process never gets the command."""
    root_target = procs.target("sitehost", env=base_env(XPROBES_RUNDIR=rundir))
    victim = target_as(procs, NOBODY, "sitehost", rundir, agent=victim_has_agent)
    mine = os.path.join(rundir, f".xprobes-{NOBODY}")
    planted = os.path.join(mine, f"{victim.pid}.sock")
    aim = os.path.join(rundir, ".xprobes-0", f"{root_target.pid}.sock")
    run_as(NOBODY, "sh", "-c", 'mkdir -p -m 700 "$1" && rm -f "$2" && ln -s "$3" "$2"', "sh",
           mine, planted, aim)
    assert os.readlink(planted) == aim and os.path.exists(aim)

    _, err = fails(victim.pid, "load", fixture("mod_count.so"))
    # (The path may be shown through /proc/PID/root.)
    assert f"refusing to attach to process {victim.pid}: " in err, err
    assert f"{planted} is a symbolic link (to {aim}, owned by uid {NOBODY})" in err, err
    assert "mod_count.so" not in ok(root_target.pid, "modules")
    root_target.assert_healthy()


@pytest.mark.parametrize("owner", ["victim", "squatter"])
def test_fake_agent_is_refused(rundir, procs, owner):
    """Something listens where process PID's agent would: in its owner's
    own directory (only the kernel's word on who listens gives it away), or
    in a directory another user made first.  Nothing is sent to it, and
    its reply (a fake success with escape sequences) is never shown."""
    victim = target_as(procs, NOBODY, "sitehost", rundir, agent=False)
    uid = NOBODY if owner == "victim" else SQUATTER
    path = os.path.join(rundir, f".xprobes-{NOBODY}", f"{victim.pid}.sock")
    fake, fake_out = start_fake_agent(procs, uid, path, "700" if owner == "victim" else "755")

    r = xprobes(victim.pid, "load", fixture("mod_count.so"))
    shown = r.stdout + r.stderr
    assert r.returncode == 1, shown
    if owner == "victim":
        assert (f"{path}: it is served by process {fake.pid} (uid {NOBODY}), "
                f"not by process {victim.pid}") in r.stderr, r.stderr
    else:
        assert (f"{os.path.dirname(path)} belongs to uid {SQUATTER} with mode 755"
                in r.stderr), r.stderr
    assert r.stderr.startswith("xprobes: refusing "), r.stderr
    assert "\x1b" not in shown and "xprobes agent 9" not in shown, shown
    assert fake_agent_received(fake, fake_out) == 0
    victim.assert_healthy()


def test_squatted_directory_still_gives_an_agent(rundir, procs):
    """Another user made RUNDIR/.xprobes-65534 first (wide open, theirs):
    the agent of a uid-65534 process goes to a private directory of its
    own, the tool finds it there and says why, and uid 65534 attaches to
    its own process too."""
    squat = os.path.join(rundir, f".xprobes-{NOBODY}")
    os.mkdir(squat)
    os.chown(squat, SQUATTER, SQUATTER)
    os.chmod(squat, 0o777)
    t = target_as(procs, NOBODY, "sitehost", rundir)
    private = [d for d in os.listdir(rundir) if d.startswith(f".xprobes-{NOBODY}.")]
    assert len(private) == 1, os.listdir(rundir)
    private = os.path.join(rundir, private[0])
    st = os.lstat(private)
    assert (st.st_uid, st.st_mode & 0o7777) == (NOBODY, 0o700)
    assert os.listdir(private) == [f"{t.pid}.sock"]

    r = xprobes(t.pid, "load", fixture("mod_count.so"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "loaded mod_count.so: 1 attachment\n"
    assert (f"note: {squat} is not uid {NOBODY}'s own (owner uid {SQUATTER}, mode 777)"
            in r.stderr), r.stderr
    assert f"process {t.pid}'s agent listens in {private} instead" in r.stderr, r.stderr
    t.hit(3)
    assert module_count(t.pid, "mod_count.so") == 3
    r = xprobes(t.pid, "command", "mod_count.so", "count", user=NOBODY)
    assert (r.returncode, r.stdout) == (0, "count 3\n"), r.stderr
    assert os.listdir(squat) == []  # nothing of ours in the squatter's directory
    t.assert_healthy()


def test_peer_check_across_pid_namespaces(rundir, procs):
    """The target is pid 1 in a pid namespace of its own (its socket is
    1.sock); the kernel reports the listener to the tool under the pid the
    user named, so the peer check lets its real agent through."""
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) not installed")
    t, pid = in_pid_namespace(procs, ["unshare", "--pid", "--fork", "--kill-child"], "sitehost",
                              base_env(XPROBES_RUNDIR=rundir), "sitehost in a pid namespace")
    assert os.listdir(os.path.join(rundir, ".xprobes-0")) == ["1.sock"]
    assert ok(pid, "load", fixture("mod_count.so")) == "loaded mod_count.so: 1 attachment\n"
    t.hit(2)
    assert module_count(pid, "mod_count.so") == 2


# What mod_escape.so's "screen" reply leaves: the text around the escapes.
SCREEN = "beforemiddle tab\tend\ncaf\u00e9 31m red\n"


def test_replies_are_sanitised(procs):
    t = procs.target("sitehost")
    esc = fixture("mod_escape.so")
    ok(t.pid, "load", esc)
    assert ok(t.pid, "command", "mod_escape.so", "screen") == SCREEN
    assert ok(t.pid, "-c", "command mod_escape.so screen", "-c", "version").startswith(SCREEN)
    assert ok(t.pid, input="command mod_escape.so screen\n") == SCREEN
    # A failing command's text (the agent echoes the name it was given).
    _, err = fails(t.pid, "unload", "x\x1b[2J\x1b]0;owned\x07y")
    assert "unknown module" in err and "\x1b" not in err and "\x07" not in err, err
    t.assert_healthy()


def test_shell_replies_are_sanitised(procs, tmp_path):
    t = procs.target("sitehost")
    ok(t.pid, "load", fixture("mod_escape.so"))
    xp, master, screen = start_shell(procs, t, tmp_path)  # reaped by procs
    os.write(master, b"command mod_escape.so screen\n")
    # Only the sanitised text makes these runs of characters.
    screen.wait_for("beforemiddle tab\tend\r\n")
    screen.wait_for("caf\u00e9 31m red\r\n")
    screen.wait_for("xprobes> ")
    os.write(master, b"quit\n")
    assert xp.wait(timeout=TIMEOUT) == 0
    os.close(master)
