"""The application owns its descriptor numbers.  A program that closes
every descriptor above stderr (as daemons do) and reuses the numbers must
get its own data back, its own clients, and an agent that still answers."""
import socket

from .xp import TIMEOUT, fixture, module_count, ok


def test_close_all_then_reuse(procs):
    t = procs.target("fdreuse")
    pid = t.pid
    count = fixture("mod_count.so")
    assert ok(pid, "load", count) == "loaded mod_count.so: 1 attachment\n"

    t.ask("closeall", "closed")
    _, rfd, wfd, lfd, port = t.ask("reuse").split()
    # The agent's old numbers are now the application's.
    assert sorted(int(x) for x in (rfd, wfd, lfd))[0] == 3

    # A client of the application's listener, before and after the agent
    # is asked something: it must reach the application, not the agent.
    app_client = socket.create_connection(("127.0.0.1", int(port)), timeout=TIMEOUT)
    assert ok(pid, "version").startswith("xprobes agent ")
    t.ask("serve", "served 25")
    assert app_client.makefile("rb").readline() == b"HELLO FROM APP\n"
    app_client.close()

    # The module loaded before the close is still attached and counting.
    t.hit(5)
    assert module_count(pid, "mod_count.so") == 5
    assert ok(pid, "unload", "mod_count.so") == "unloaded mod_count.so\n"
    t.assert_healthy()
