# SPDX-License-Identifier: MIT
"""Sites in a library the target dlopen()s and dlcloses while modules are
loaded: found, attached automatically, counted, forgotten."""
import os

from .xp import base_env, fixture, module_count, ok, parse_sites


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


def test_a_module_command_reply_is_the_modules_alone(procs):
    """What a rescan found waits for a reply meant for people: a module
    command's reply is parsed by tools (mctop, mclat) and stays the
    module's own."""
    lib = fixture("libdlsite.so")
    t = procs.target("dlhost")
    ok(t.pid, "load", fixture("mod_wrongtick.so"))
    ok(t.pid, "load", fixture("mod_count.so"))
    t.ask("open", "opened")
    assert ok(t.pid, "command", "mod_count.so", "reset") == "reset\n"
    later = ok(t.pid, "modules")
    assert later.startswith("since the last command:\n"), later
    assert f"refused: dl_tick -> on_tick on dl_tick in {lib}: " in later, later
    t.ask("close", "closed")
    t.assert_healthy()


def test_hits_straight_after_dlopen_are_counted(procs):
    """The application's dlopen() (the agent's, in front of libc's) rescans
    before it returns: hits right after it, with no command in between, are
    all seen.  Also after a dlclose() and a dlopen() of the same library,
    which usually lands at the same address: a fresh mapping there is not
    mistaken for the one the module was attached to."""
    lib = fixture("libdlsite.so")
    count = fixture("mod_count.so")
    t = procs.target("dlhost")
    pid = t.pid
    ok(pid, "load", count)
    t.ask("openhit 50", "opened 50")
    assert module_count(pid, "mod_count.so") == 50
    t.ask("close", "closed")
    t.ask("openhit 7", "opened 7")
    assert module_count(pid, "mod_count.so") == 57
    sites = parse_sites(ok(pid, "sites"))
    assert sites == {lib: [f"* dl_tick(long) => *_tick -> on_tick [{count}]"]}, sites
    assert ok(pid, "modules") == f"* mod_count.so ({count}): 1 probe, 1 attachment, has commands\n"
    t.ask("close", "closed")
    ok(pid, "unload", "mod_count.so")
    assert ok(pid, "modules") == ""
    t.assert_healthy()


def test_dlopen_without_agent_is_plain_dlopen(procs):
    """XPROBES_AGENT=off: the agent's dlopen() is libc's and nothing else."""
    t = procs.target("dlhost", env=base_env(XPROBES_AGENT="off"))
    t.ask("openhit 3", "opened 3")
    t.ask("close", "closed")
    t.assert_healthy()


def test_dlopen_keeps_the_callers_origin(procs):
    """glibc expands $ORIGIN in dlopen()'s argument (and searches a bare
    name's RUNPATH) relative to the calling object: the agent's dlopen()
    must leave the caller as it was, not become it."""
    lib = fixture("libdlsite.so")
    count = fixture("mod_count.so")
    t = procs.target("dlhost")
    ok(t.pid, "load", count)
    t.ask("openorigin", "opened")
    sites = parse_sites(ok(t.pid, "sites"))
    assert sites == {lib: [f"* dl_tick(long) => *_tick -> on_tick [{count}]"]}, sites
    t.hit(5)
    assert module_count(t.pid, "mod_count.so") == 5
    t.ask("close", "closed")
    t.assert_healthy()


def test_library_replaced_between_close_and_open(procs, tmp_path):
    """A library closed, replaced on disk, and opened again at the same
    address is a new object: the agent must see the new build's sites and
    never write through the old build's record addresses (that crashed
    the target at the next load)."""
    import shutil
    import subprocess
    from .xp import BUILD, Target
    host = tmp_path / "dlhost"
    shutil.copy(fixture("dlhost"), host)
    shutil.copy(fixture("libdlsite.so"), tmp_path / "libdlsite.so")
    p = procs.popen([str(host)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    env=base_env(LD_LIBRARY_PATH=BUILD), cwd="/")
    t = Target(p, "dlhost")
    t.expect("ready ")
    t.ask("open", "opened")
    lib = str(tmp_path / "libdlsite.so")
    assert list(parse_sites(ok(p.pid, "sites"))[lib]) == ["dl_tick(long)"]
    t.ask("close", "closed")
    shutil.copy(fixture("libdlsite_v2.so"), tmp_path / "libdlsite.so.new")
    os.rename(tmp_path / "libdlsite.so.new", tmp_path / "libdlsite.so")
    t.ask("open", "opened")
    sites = parse_sites(ok(p.pid, "sites"))[lib]
    assert sorted(sites) == ["aa_first(long)", "bb_second(long, long)", "dl_tick(long)"], sites
    assert ok(p.pid, "load", fixture("mod_count.so")).startswith("loaded mod_count.so: 1 attachment")
    t.hit(7)
    assert module_count(p.pid, "mod_count.so") == 7
    t.assert_healthy()
