# SPDX-License-Identifier: MIT
"""Two modules on one site: both see every hit, in load order, and each
can be disabled and enabled without touching the other."""
import shutil

from .xp import fixture, module_count, ok, parse_sites


def tick_lines(pid, host):
    return [line for line in parse_sites(ok(pid, "sites"))[host] if "host_tick(" in line]


def test_two_modules_on_one_site(procs, tmp_path):
    host = fixture("sitehost")
    a = fixture("mod_count.so")
    # A second copy of the same module: another file, so another module
    # with its own counter.
    b = str(tmp_path / "mod_count_b.so")
    shutil.copy(a, b)
    t = procs.target("sitehost")
    pid = t.pid

    assert ok(pid, "load", a) == "loaded mod_count.so: 1 attachment\n"
    assert ok(pid, "load", b) == "loaded mod_count_b.so: 1 attachment\n"
    assert tick_lines(pid, host) == [
        f"* host_tick(long) => *_tick -> on_tick [{a}]",
        f"* host_tick(long) => *_tick -> on_tick [{b}]",
    ]
    assert ok(pid, "modules").splitlines() == [
        f"* mod_count.so ({a}): 1 probe, 1 attachment, has commands",
        f"* mod_count_b.so ({b}): 1 probe, 1 attachment, has commands",
    ]

    t.hit(10)
    assert module_count(pid, "mod_count.so") == 10
    assert module_count(pid, "mod_count_b.so") == 10

    assert ok(pid, "disable", "mod_count_b.so") == "disabled mod_count_b.so\n"
    assert tick_lines(pid, host) == [
        f"* host_tick(long) => *_tick -> on_tick [{a}]",
        f"- host_tick(long) => *_tick -> on_tick [{b}] (disabled)",
    ]
    assert ok(pid, "modules", "mod_count_b.so").startswith("  mod_count_b.so (")
    t.hit(5)
    assert module_count(pid, "mod_count.so") == 15
    assert module_count(pid, "mod_count_b.so") == 10
    assert ok(pid, "disable", "mod_count_b.so") == "mod_count_b.so was already disabled\n"

    assert ok(pid, "enable", "mod_count_b.so") == "enabled mod_count_b.so\n"
    assert tick_lines(pid, host) == [
        f"* host_tick(long) => *_tick -> on_tick [{a}]",
        f"* host_tick(long) => *_tick -> on_tick [{b}]",
    ]
    t.hit(4)
    assert module_count(pid, "mod_count.so") == 19
    assert module_count(pid, "mod_count_b.so") == 14

    # And the other way round: only the first one stops.
    ok(pid, "disable", a)  # by path this time
    t.hit(6)
    assert module_count(pid, "mod_count.so") == 19
    assert module_count(pid, "mod_count_b.so") == 20
    ok(pid, "enable", "mod_count.so")

    # Unloading the first keeps the second attached and counting.
    ok(pid, "unload", "mod_count.so")
    assert tick_lines(pid, host) == [f"* host_tick(long) => *_tick -> on_tick [{b}]"]
    t.hit(2)
    assert module_count(pid, "mod_count_b.so") == 22
    ok(pid, "unload", "mod_count_b.so")
    assert tick_lines(pid, host) == ["host_tick(long)"]
    t.assert_healthy()
