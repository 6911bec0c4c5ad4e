"""Sites in a library the target dlopen()s and dlcloses while modules are
loaded: found, attached automatically, counted, forgotten."""
from .xp import fixture, module_count, ok, parse_sites


def test_site_in_dlopened_library(procs):
    lib = fixture("libdlsite.so")
    count = fixture("mod_count.so")
    t = procs.target("dlhost")
    pid = t.pid

    assert "dl_tick" not in ok(pid, "sites")
    assert ok(pid, "objects") == ""

    # Loaded before the library exists: nothing to attach to yet.
    out = ok(pid, "load", count)
    assert "note: *_tick -> on_tick matches no site yet\n" in out, out
    assert out.endswith("loaded mod_count.so: 0 attachments\n"), out

    t.ask("open", "opened")
    # Any command rescans first, so the site is attached by the time
    # `sites` answers, and every later hit is seen.
    sites = parse_sites(ok(pid, "sites"))
    assert sites == {lib: [f"* dl_tick(long) => *_tick -> on_tick [{count}]"]}, sites
    assert ok(pid, "objects") == f"{lib}: 1 site\n"
    assert ok(pid, "modules") == f"* mod_count.so ({count}): 1 probe, 1 attachment, has commands\n"

    t.hit(25)
    assert module_count(pid, "mod_count.so") == 25

    t.ask("close", "closed")
    assert ok(pid, "sites") == ""
    assert ok(pid, "objects") == ""
    assert ok(pid, "modules") == f"* mod_count.so ({count}): 1 probe, 0 attachments, has commands\n"
    t.assert_healthy()

    # Opened again (maybe at another address): attached again.
    t.ask("open", "opened")
    sites = parse_sites(ok(pid, "sites"))
    assert sites == {lib: [f"* dl_tick(long) => *_tick -> on_tick [{count}]"]}, sites
    t.hit(4)
    assert module_count(pid, "mod_count.so") == 29
    t.ask("close", "closed")
    assert ok(pid, "sites") == ""

    ok(pid, "unload", "mod_count.so")
    assert ok(pid, "modules") == ""
    t.assert_healthy()


def test_dlopened_site_without_modules(procs):
    """No module loaded: the site shows up and goes away all the same."""
    lib = fixture("libdlsite.so")
    t = procs.target("dlhost")
    t.ask("open", "opened")
    assert parse_sites(ok(t.pid, "sites")) == {lib: ["dl_tick(long)"]}
    t.hit(3)
    t.ask("close", "closed")
    assert ok(t.pid, "sites") == ""
    t.assert_healthy()


def test_refusal_on_a_library_loaded_later_is_reported_once(procs):
    """A probe refused when its library appears is not silent: whichever
    rescan finds it (the 250 ms background one, or the next command's), the
    next command's reply carries the refusal, and only that reply."""
    lib = fixture("libdlsite.so")
    wrong = fixture("mod_wrongtick.so")
    t = procs.target("dlhost")
    ok(t.pid, "load", wrong)
    t.ask("open", "opened")
    first = ok(t.pid, "modules")
    assert (f"refused: dl_tick -> on_tick on dl_tick in {lib}: "
            "site has (long), probe declares (int)\n") in first, first
    again = ok(t.pid, "modules")
    assert "refused" not in again, again
    assert parse_sites(ok(t.pid, "sites")) == {lib: ["dl_tick(long)"]}
    t.ask("close", "closed")
    t.assert_healthy()
