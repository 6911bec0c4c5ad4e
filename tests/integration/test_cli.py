# SPDX-License-Identifier: MIT
"""The ways of giving xprobes its commands, and its exit status: 0 when
every command succeeded, 1 when any failed, 2 for a usage error."""
import subprocess

from .xp import (FIXTURES, TIMEOUT, XPROBES, LineReader, base_env, fails, fixture, ok,
                 xprobes)


def test_piped_commands(procs):
    t = procs.target("sitehost")
    count = fixture("mod_count.so")
    script = ("version\n"
              "# a comment, then a blank line\n"
              "\n"
              "   \n"
              "load mod_count.so\n"      # relative to the tool's directory
              "modules\n"
              "command mod_count.so count\n")
    r = xprobes(t.pid, input=script, cwd=FIXTURES)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0].startswith("xprobes agent ")
    assert lines[1:] == [
        "loaded mod_count.so: 1 attachment",
        f"* mod_count.so ({count}): 1 probe, 1 attachment, has commands",
        "count 0",
    ]


def test_piped_failure_sets_status_and_goes_on(procs):
    t = procs.target("sitehost")
    r = xprobes(t.pid, input="version\nfrobnicate\nunload nosuch.so\nversion\n")
    assert r.returncode == 1
    # Errors on stderr, successes on stdout, and the commands after the
    # failures still ran.
    assert r.stderr == ("unknown command 'frobnicate' (try 'help')\n"
                        "unknown module 'nosuch.so' (see 'modules')\n")
    assert [line.split()[0] for line in r.stdout.splitlines()] == ["xprobes", "xprobes"]
    t.assert_healthy()


def test_piped_without_final_newline(procs):
    t = procs.target("sitehost")
    r = xprobes(t.pid, input="version")
    assert r.returncode == 0 and r.stdout.startswith("xprobes agent "), r


def test_quit_and_exit_stop_reading(procs):
    t = procs.target("sitehost")
    for word in ("quit", "exit"):
        r = xprobes(t.pid, input=f"version\n{word}\nfrobnicate\n")
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""
        assert r.stdout.startswith("xprobes agent ")


def test_c_forms(procs):
    t = procs.target("sitehost")
    count = fixture("mod_count.so")
    r = xprobes(t.pid, "-c", "version", "-c", f"load {count}", "-c", "sites *:host_tick",
                "-c", "command mod_count.so count")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("xprobes agent ")
    assert lines[1:] == [
        "loaded mod_count.so: 1 attachment",
        f"{fixture('sitehost')}:",
        f"* host_tick(long) => *_tick -> on_tick [{count}]",
        "count 0",
    ]

    r = xprobes(t.pid, "-c", "unload nosuch.so", "-c", "version")
    assert r.returncode == 1
    assert r.stderr == "unknown module 'nosuch.so' (see 'modules')\n"
    assert r.stdout.startswith("xprobes agent "), "later commands still run"

    r = xprobes(t.pid, "-c", "version", "-c", "quit", "-c", "frobnicate")
    assert r.returncode == 0 and r.stderr == ""


def test_c_usage_errors(procs):
    t = procs.target("sitehost")
    out, err = fails(t.pid, "-c", status=2)
    assert err == "xprobes: expected -c CMD, got '-c'\n"
    out, err = fails(t.pid, "-c", "version", "sites", status=2)
    assert err == "xprobes: expected -c CMD, got 'sites'\n"
    assert out == ""
    assert ok(t.pid, "modules") == ""


def test_one_command_of_several_words(procs):
    t = procs.target("sitehost")
    count = fixture("mod_count.so")
    ok(t.pid, "load", count)
    t.hit(6)
    # The words are joined into one command line.
    out, err = fails(t.pid, "command", "mod_count.so", " \t", "reset", status=2)
    assert err.startswith("xprobes: argument 3 is only spaces;"), err
    assert ok(t.pid, "command", "mod_count.so", "count") == "count 6\n"
    out = ok(t.pid, "sites", "*:host_msg")
    assert out == f"{fixture('sitehost')}:\n  host_msg(const char*, size_t)\n"
    assert ok(t.pid, "sites", "nomatch*") == ""
    # The module gets the rest of the line as its arguments.
    assert ok(t.pid, "command", "mod_count.so", "count", "extra") == "usage: count|reset\n"
    # An empty word would vanish from the line: refused, nothing sent.
    out, err = fails(t.pid, "command", "mod_count.so", "", "reset", status=2)
    assert err == ("xprobes: argument 3 is empty; commands are words separated by "
                   "spaces, so it would be lost\n") and out == ""
    assert ok(t.pid, "command", "mod_count.so", "count") == "count 6\n"


def test_target_dies_under_a_session(procs):
    t = procs.target("sitehost")
    xp = procs.popen([XPROBES, str(t.pid)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, env=base_env())
    out = LineReader(xp.stdout.fileno(), "xprobes")
    xp.stdin.write(b"version\n")
    xp.stdin.flush()
    assert out.readline().startswith("xprobes agent ")
    t.proc.kill()
    t.proc.wait(timeout=TIMEOUT)
    try:
        xp.stdin.write(b"version\nversion\n")
        xp.stdin.flush()
    except BrokenPipeError:
        pass
    assert xp.wait(timeout=TIMEOUT) == 1
    err = xp.stderr.read().decode()
    assert f"xprobes: lost connection to process {t.pid}" in err, err


def test_closed_standard_streams_are_not_the_agent_socket(procs):
    """Started with stdout or stdin closed, the tool's socket would take
    that number: its output would go to the agent, or its commands come
    from it.  Closed ones are reserved on /dev/null first."""
    t = procs.target("sitehost")
    env = base_env()
    r = subprocess.run(["sh", "-c", 'exec "$0" "$1" version >&-', XPROBES, str(t.pid)],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    r = subprocess.run(["sh", "-c", 'exec "$0" "$1" <&-', XPROBES, str(t.pid)],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert r.returncode == 0, r.stderr  # end of input at once, not a hang
    t.assert_healthy()


def test_output_that_cannot_be_written_fails_with_a_message(procs):
    t = procs.target("sitehost")
    with open("/dev/full", "w") as full:
        r = subprocess.run([XPROBES, str(t.pid), "version"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=TIMEOUT, env=base_env())
    assert r.returncode == 1, r.stderr
    assert "writing the output failed" in r.stderr, r.stderr
    t.assert_healthy()


def test_malformed_globs_are_named(procs):
    # fnmatch would take an unclosed '[' literally and match nothing, which
    # reads as "no such site"; the agent and the CLI say what is wrong.
    t = procs.target("sitehost")
    for cmd in ("sites", "objects", "modules", "probes"):
        out, err = fails(t.pid, cmd, "host_[msg")
        assert err == "%s: 'host_[msg' is not a valid glob: a '[' is not closed by ']'\n" % cmd
        assert out == ""
    out, err = fails(t.pid, "sites", "*:host\\")
    assert err == "sites: '*:host\\' is not a valid glob: it ends with a lone '\\'\n"
    # A colon inside a set does not split OBJ:SITE ("mod[:x]" is one glob).
    assert ok(t.pid, "probes", "mod[:x]") == ""
    out, err = fails(t.pid, "sites", "[[:alpah:]]*")
    assert "'[[:alpah:]]*' is not a valid glob: a \"[:name:]\" class is not one of" in err
    # Well formed ones still match, a class's colons no separator.
    assert "host_msg(const char*, size_t)" in ok(t.pid, "sites", "*:host_[m]sg")
    assert "host_msg(const char*, size_t)" in ok(t.pid, "sites", "host_[[:alpha:]]sg")
    # A module with a malformed probe glob is refused whole: nothing
    # attaches, not even its valid first probe.
    bad = fixture("mod_badglob.so")
    out, err = fails(t.pid, "load", bad)
    assert err == ("%s: probe 2 (on_msg) has glob 'host_[msg', which is not valid: "
                   "a '[' is not closed by ']'\n" % bad), err
    assert ok(t.pid, "modules") == ""
    assert "=>" not in ok(t.pid, "sites")
    # The CLI checks trace -F/-N before sending anything.
    out, err = fails(t.pid, "trace", "start", "-F", "main[")
    assert "-F 'main[' is not a valid glob: a '[' is not closed by ']'" in err, err
