# SPDX-License-Identifier: MIT
"""Every command completes on a process whose threads never hit a site
and sit blocked in read(): the agent needs nothing from them."""
from .xp import TIMEOUT, fixture, ok, parse_sites


def test_all_commands_on_idle_process(procs):
    idle = fixture("idle")
    count = fixture("mod_count.so")
    t = procs.target("idle")
    pid = t.pid

    assert "  sites [OBJGLOB:][SITEGLOB]" in ok(pid, "help")
    assert ok(pid, "version").startswith("xprobes agent ")
    where = ok(pid, "socket").splitlines()[0]
    assert where.startswith("listening on /") and where.endswith(f"/{pid}.sock"), where
    assert ok(pid, "objects") == f"{idle}: 2 sites\n"
    sites = parse_sites(ok(pid, "sites"))
    assert sorted(sites[idle]) == ["idle_msg(const char*, size_t)", "idle_tick(long)"]

    assert ok(pid, "load", count) == "loaded mod_count.so: 1 attachment\n"
    assert ok(pid, "modules") == f"* mod_count.so ({count}): 1 probe, 1 attachment, has commands\n"
    assert ok(pid, "probes") == "* mod_count.so: *_tick -> on_tick(long): 1 site\n"
    assert ok(pid, "sites", "*:idle_tick") == (
        f"{idle}:\n* idle_tick(long) => *_tick -> on_tick [{count}]\n")
    assert ok(pid, "disable", "mod_count.so") == "disabled mod_count.so\n"
    assert ok(pid, "enable", "mod_count.so") == "enabled mod_count.so\n"
    assert ok(pid, "command", "mod_count.so", "count") == "count 0\n"
    assert ok(pid, "unload", "mod_count.so") == "unloaded mod_count.so\n"
    assert ok(pid, "modules") == ""

    # Still blocked in its read(), unharmed: EOF ends it normally.
    assert t.alive()
    t.proc.stdin.close()
    assert t.proc.wait(timeout=TIMEOUT) == 0
