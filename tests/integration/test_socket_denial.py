"""Nobody who may not attach to a process can deny its agent to those who
may (issue 26): not an agent of the same uid in another pid namespace,
which judged liveness by pids of its own namespace and swept every socket
it could not see; not whoever removes or replaces an agent's socket file.

Every test gets its own run directory (XPROBES_RUNDIR, the `rundir`
fixture): the agents here sweep and bind sockets, and must not touch
those of other tests running meanwhile."""
import os
import shutil
import socket

import pytest

from .xp import base_env, in_pid_namespace, needs_root_and_setpriv, ok, wait_until

pytestmark = needs_root_and_setpriv("the agents run as root")

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
