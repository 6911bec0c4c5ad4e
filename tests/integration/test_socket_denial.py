# SPDX-License-Identifier: MIT
"""Nobody who may not attach to a process can deny its agent to those who
may: not an agent of the same uid in another pid namespace,
which judged liveness by pids of its own namespace and swept every socket
it could not see; not whoever removes or replaces an agent's socket file;
not the uid a root daemon drops to before it forks.

Every test gets its own run directory (XPROBES_RUNDIR, the `rundir`
fixture): the agents here sweep and bind sockets, and must not touch
those of other tests running meanwhile."""
import os
import shutil
import socket
import subprocess

import pytest

from .xp import (NOBODY, TIMEOUT, LineReader, as_user, base_env, fixture, in_pid_namespace,
                 module_count, needs_root_and_setpriv, ok, run_as_nobody, wait_until, xprobes)

pytestmark = needs_root_and_setpriv("the agents run as root and the attacker as uid 65534")

UNSHARE_PID = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]


def needs_unshare():
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) not installed")


def sockets_of(rundir, uid=0):
    return sorted(os.listdir(os.path.join(rundir, f".xprobes-{uid}")))


def listening_on(pid):
    """The path or @name the agent of pid says it listens on."""
    first = ok(pid, "socket").splitlines()[0]
    assert first.startswith("listening on "), first
    return first.split()[2]


def test_agents_in_other_pid_namespaces_keep_each_others_sockets(rundir, procs):
    """One agent on the host and two more, each pid 1 of a pid namespace of
    its own (unshare -pf --mount-proc), all root and in one directory.
    The newcomers see no host pid, so they may not take the host agent's
    socket for stale; and the second may not remove the first's 1.sock.
    All three are reachable afterwards."""
    needs_unshare()
    env = base_env(XPROBES_RUNDIR=rundir)
    host = procs.target("sitehost", env=env)
    first, first_pid = in_pid_namespace(procs, UNSHARE_PID, "sitehost", env, "first in a pidns")
    second, second_pid = in_pid_namespace(procs, UNSHARE_PID, "sitehost", env,
                                          "second in a pidns")
    for pid in (host.pid, first_pid, second_pid):
        assert ok(pid, "version").startswith("xprobes agent "), pid

    names = sockets_of(rundir)
    assert f"{host.pid}.sock" in names and "1.sock" in names, names
    assert len(names) == 3, names  # the second took 1.TOKEN.sock
    paths = {listening_on(pid) for pid in (host.pid, first_pid, second_pid)}
    assert paths == {os.path.join(rundir, ".xprobes-0", n) for n in names}, paths
    for t in (host, first, second):
        t.assert_healthy()


def test_removed_or_replaced_socket_file_is_bound_again(rundir, procs):
    """The socket's file removed, then replaced by a socket nobody listens
    on: each time the agent notices, binds again, and answers."""
    t = procs.target("sitehost", env=base_env(XPROBES_RUNDIR=rundir))
    path = os.path.join(rundir, ".xprobes-0", f"{t.pid}.sock")
    os.unlink(path)
    wait_until(lambda: os.path.exists(path), "the agent's socket file made again")
    assert ok(t.pid, "socket").splitlines() == [
        f"listening on {path}",
        "made again: 1 after its file was removed or replaced, "
        "0 after the program took its descriptor"]

    # Replaced in one step (made beside it, renamed over it), so that the
    # agent never finds the name free in between.
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path + ".new")
    stale.close()
    os.replace(path + ".new", path)

    def answers():
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            return True
        except (ConnectionRefusedError, FileNotFoundError):  # not yet, or mid-way
            return False
        finally:
            s.close()

    wait_until(answers, "the agent listening on its socket file again")
    assert "made again: 2 after its file was removed or replaced" in ok(t.pid, "socket")
    t.assert_healthy()


# Runs as uid 65534 against the agent of a process that dropped to it:
# removes every file of its own directories under the run directory, puts
# a listener of its own where the agent's socket file would be, and tries
# to bind the agent's abstract name.  Reports, then holds its listener
# until stdin closes.
ATTACK = r"""
import os, socket, sys
rundir, pid = sys.argv[1], sys.argv[2]
removed = 0
for d in os.listdir(rundir):
    if d.startswith(".xprobes-65534"):
        for f in os.listdir(os.path.join(rundir, d)):
            os.unlink(os.path.join(rundir, d, f))
            removed += 1
mine = os.path.join(rundir, ".xprobes-65534")
if not os.path.isdir(mine):
    os.mkdir(mine, 0o700)
fake = socket.socket(socket.AF_UNIX)
fake.bind(os.path.join(mine, pid + ".sock"))
fake.listen(8)
taken = 0
with open("/proc/self/net/unix") as f:
    for line in f:
        name = line.split()[-1]
        if name.startswith("@.xprobes-") and "/" + pid + "." in name:
            s = socket.socket(socket.AF_UNIX)
            try:
                s.bind("\0" + name[1:])
                taken += 1
            except OSError:
                pass
print("removed", removed, "taken", taken, flush=True)
sys.stdin.read()
"""


def test_daemon_that_forks_after_setuid_keeps_root_attached(rundir, procs, public_xprobes):
    """memcached -u nobody -d: started as root (its agent too), setuid(65534),
    then fork().  uid 65534 may not attach to the child (not dumpable), so
    it must not be able to take the child's agent from root either: it
    removes what it can, plants a listener where a socket file would be,
    and tries to take the agent's name.  Root still attaches to the real
    agent, with and without --inject, and uid 65534 is still told why it
    may not."""
    t = procs.target("dropper", env=base_env(XPROBES_RUNDIR=rundir))
    child = int(t.expect("child ").split()[1])
    procs.adopt(child, fixture("dropper"))

    attacker = procs.popen(as_user(NOBODY, ["/usr/bin/python3", "-c", ATTACK, rundir,
                                            str(child)]),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/")
    report = LineReader(attacker.stdout.fileno(), "attacker").readline()
    assert report.split()[2:] == ["taken", "0"], report

    count = fixture("mod_count.so")
    assert ok(child, "load", count) == "loaded mod_count.so: 1 attachment\n"
    t.hit(4)
    assert module_count(child, "mod_count.so") == 4
    r = xprobes("--inject", child, "modules")
    assert r.returncode == 0 and "mod_count.so" in r.stdout, r.stdout + r.stderr
    assert listening_on(child).startswith("@.xprobes-65534/"), "a file uid 65534 could remove"

    r = run_as_nobody([public_xprobes, str(child), "modules"])
    assert r.returncode == 1, r
    assert (f"uid {NOBODY} may not attach to process {child}: it changed credentials and is "
            "not dumpable (ptrace would refuse); use root") in r.stderr, r.stderr
    attacker.stdin.close()
    assert attacker.wait(timeout=TIMEOUT) == 0
    t.assert_healthy()


# Runs as uid 65534 against root's agent listening on FILE (inode from the
# table): listens on the abstract name @.xprobes-0/PID.sock, then binds
# sockets whose names hold a newline and, after it, a copy of the agent's
# line in /proc/net/unix naming that abstract name, until one of them
# comes before the agent's own line.  Reports "forged N ahead", then
# holds everything until stdin closes and reports how many connections
# its abstract listener got.
FORGE = r"""
import os, socket, sys
path, pid, work = sys.argv[1], sys.argv[2], sys.argv[3]
def table():
    with open("/proc/self/net/unix") as f:
        return f.read()
ino = next(l.split()[6] for l in table().splitlines() if l.endswith(" " + path))
real = f" {ino} {path}\n"
name = f".xprobes-0/{pid}.sock"
decoy = socket.socket(socket.AF_UNIX)
decoy.bind("\0" + name)
decoy.listen(8)
fake = f"0000000000000000: 00000002 00000000 00010000 0001 01 {ino} @{name}"
os.chdir(work)
held, ahead = [], False
while not ahead and len(held) < 1000:
    d, sock = os.path.split(f"f{len(held)}\n{fake}")  # the name holds a '/'
    os.mkdir(d)
    s = socket.socket(socket.AF_UNIX)
    s.bind(os.path.join(d, sock))
    s.listen(1)
    held.append(s)
    t = table()
    ahead = 0 <= t.find("\n" + fake + "\n") < t.find(real)
print("forged", len(held), "ahead" if ahead else "behind", flush=True)
sys.stdin.read()
decoy.setblocking(False)
n = 0
try:
    while decoy.accept():
        n += 1
except BlockingIOError:
    pass
print("connections", n, flush=True)
"""


@pytest.mark.parametrize("source", ["diag", "text"])
def test_forged_unix_table_line_does_not_divert_root(rundir, procs, source):
    """Another user binds a socket whose name holds a newline and a copy of
    root's agent's line in the UNIX socket table, naming an abstract socket
    of theirs: the table then lists the agent's inode twice.  Root's tool
    still reaches the agent and never connects to the decoy: from the
    kernel's binary socket diagnostics, or (text: as where the kernel has
    none) from the text table, whose doubled inode it refuses to believe."""
    t = procs.target("sitehost", env=base_env(XPROBES_RUNDIR=rundir))
    path = os.path.join(rundir, ".xprobes-0", f"{t.pid}.sock")
    work = os.path.join(rundir, "forge")
    os.mkdir(work)
    os.chown(work, NOBODY, NOBODY)
    attacker = procs.popen(as_user(NOBODY, ["/usr/bin/python3", "-c", FORGE, path, str(t.pid),
                                            work]),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/")
    out = LineReader(attacker.stdout.fileno(), "attacker")
    report = out.readline().split()
    assert report[0] == "forged" and report[2] == "ahead", report

    env = base_env(**({"XPROBES_SOCKFIND_TEST_TEXT": "1"} if source == "text" else {}))
    assert ok(t.pid, "version", env=env).startswith("xprobes agent ")
    assert listening_on(t.pid) == path
    attacker.stdin.close()
    assert out.readline() == "connections 0"
    assert attacker.wait(timeout=TIMEOUT) == 0
    t.assert_healthy()
