# SPDX-License-Identifier: MIT
"""Eight threads hammer a site while one xprobes session loads, disables,
enables, queries and unloads a second module 1,000 times.  A module that
stays loaded the whole time must see every hit exactly once."""
import re
import shutil

from .xp import fixture, ok, xprobes

CYCLES = 1000


def check(pid, module):
    out = ok(pid, "command", module, "check")
    m = re.fullmatch(r"count (\d+) violations (\d+)\n", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


def test_load_unload_under_fire(procs, tmp_path):
    a = fixture("mod_stress.so")
    b = str(tmp_path / "mod_stress_b.so")
    shutil.copy(a, b)
    t = procs.target("stress")
    pid = t.pid

    assert ok(pid, "load", a) == "loaded mod_stress.so: 1 attachment\n"
    t.ask("go", "going")

    script = "".join(
        f"load {b}\n"
        "disable mod_stress_b.so\n"
        "enable mod_stress_b.so\n"
        "command mod_stress_b.so check\n"
        "unload mod_stress_b.so\n"
        for _ in range(CYCLES))
    r = xprobes(pid, input=script, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr == ""

    lines = r.stdout.splitlines()
    assert len(lines) == 5 * CYCLES, r.stdout[-2000:]
    checks = 0
    b_hits = 0
    for i in range(0, len(lines), 5):
        assert lines[i] == "loaded mod_stress_b.so: 1 attachment", lines[i]
        assert lines[i + 1] == "disabled mod_stress_b.so", lines[i + 1]
        assert lines[i + 2] == "enabled mod_stress_b.so", lines[i + 2]
        m = re.fullmatch(r"count (\d+) violations (\d+)", lines[i + 3])
        assert m, lines[i + 3]
        assert m.group(2) == "0", f"cycle {i // 5}: {lines[i + 3]}"
        checks += 1
        b_hits += int(m.group(1))
        assert lines[i + 4] == "unloaded mod_stress_b.so", lines[i + 4]
    assert checks == CYCLES
    # B was attached for real: over 1,000 cycles it must have seen hits.
    assert b_hits > 0

    t.send("stop")
    total = int(t.expect("total ").split()[1])
    count, violations = check(pid, "mod_stress.so")
    assert violations == 0
    assert count == total, f"module saw {count} hits, threads made {total}"
    assert total > 0
    assert ok(pid, "modules").startswith("* mod_stress.so (")
