# SPDX-License-Identifier: MIT
"""A probe declaring other types than its site's is refused; the module's
other probes are attached and work."""
from .xp import fails, fixture, ok, parse_sites


def test_signature_mismatch_refused(procs):
    host = fixture("sitehost")
    mod = fixture("mod_mismatch.so")
    t = procs.target("sitehost")
    pid = t.pid

    # The refusal fails the command (status 1, on stderr) so scripts see it;
    # the probe that matched stays attached.
    _, out = fails(pid, "load", mod)
    lines = out.splitlines()
    assert (f"refused: host_msg -> on_msg_wrong on host_msg in {host}: "
            "site has (const char*, size_t), probe declares (char*, size_t)") in lines, out
    assert lines[-2] == "loaded mod_mismatch.so: 1 attachment, some refused", out
    assert lines[-1] == ("load: 1 probe attachment refused; "
                         "mod_mismatch.so stays loaded with the rest"), out
    assert not any("on_msg_right" in line for line in lines if line.startswith("refused")), out

    sites = parse_sites(ok(pid, "sites"))
    assert sorted(sites[host]) == sorted([
        "host_tick(long)",
        f"* host_msg(const char*, size_t) => host_msg -> on_msg_right [{mod}]",
    ]), sites
    assert list(sites) == [host], sites
    assert "mod_mismatch.so: host_msg -> on_msg_wrong(char*, size_t): 0 sites" in \
        ok(pid, "probes"), "refused probe must not count as attached"

    t.ask("msg 9", "msg 9 done")
    assert ok(pid, "command", "mod_mismatch.so") == "right 9 wrong 0\n"
    t.ask("msg 3", "msg 3 done")
    assert ok(pid, "command", "mod_mismatch.so") == "right 12 wrong 0\n"

    ok(pid, "unload", "mod_mismatch.so")
    t.assert_healthy()


def test_module_with_every_probe_refused_is_not_loaded(procs):
    """A module none of whose probes attaches is unloaded again: the load
    fails, says why, and neither `modules` nor the process's mappings keep
    it."""
    mod = fixture("mod_allwrong.so")
    t = procs.target("sitehost")
    pid = t.pid

    _, out = fails(pid, "load", mod)
    lines = out.splitlines()
    assert lines[-1] == ("load: every probe attachment of mod_allwrong.so was refused (1); "
                         "it was not loaded"), out
    assert not any(line.startswith("loaded ") or "stays loaded" in line for line in lines), out
    assert "mod_allwrong.so" not in ok(pid, "modules")
    with open(f"/proc/{pid}/maps") as f:
        assert "mod_allwrong.so" not in f.read()
    # Loaded again, it is refused again (not "already loaded").
    _, out = fails(pid, "load", mod)
    assert out.splitlines()[-1].startswith("load: every probe attachment"), out
    t.assert_healthy()
