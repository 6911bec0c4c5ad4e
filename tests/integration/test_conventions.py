# SPDX-License-Identifier: MIT
"""What every tool does the way the Unix tools around it do:
--help and --version, usage errors exit 2, messages named after the
program that prints them, a reader that goes away ends the tool quietly
with status 0 and leaves memcached as it was, and JSON fields that name
their units (docs/json.md).  Against the real memcached built with
xprobes-dtrace."""
import json
import os
import subprocess
import sys
import time

import pytest

from .xp import BUILD, REPO, TIMEOUT, base_env, socket_path

sys.path.insert(0, os.path.join(REPO, "tests", "memcached"))
import mcserver as _mc  # noqa: E402  (the real memcached)
from mcserver import memcached, memcached_bin  # noqa: E402,F401  (fixtures)

TOOLS = ["xprobes", "xprobes-dtrace", "mctop", "mcsnoop", "mclat", "mcload"]
MC_TOOLS = ["mctop", "mcsnoop", "mclat"]


def tool(name):
    return os.path.join(BUILD, name)


def run(*argv, **kw):
    return subprocess.run([*map(str, argv)], capture_output=True, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL, **kw)


def run_into_closed_pipe(*argv):
    """argv with stdout a pipe whose reader is already gone, as in
    `cmd | head` once head has exited: any write fails."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run([*map(str, argv)], stdout=w, stderr=subprocess.PIPE, text=True,
                              timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    finally:
        os.close(w)


@pytest.mark.parametrize("name", TOOLS)
def test_help_and_version(name):
    r = run(tool(name), "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: "), r.stdout + r.stderr
    r = run(tool(name), "--version")
    assert r.returncode == 0 and r.stdout.startswith(name + " 0."), r.stdout + r.stderr


@pytest.mark.parametrize("name", TOOLS)
def test_a_bad_option_exits_2_with_a_message_under_the_programs_name(name):
    r = run(tool(name), "--frobnicate")
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(name + ": ") and "--frobnicate" in r.stderr, r.stderr


@pytest.mark.parametrize("name", TOOLS)
def test_help_into_a_closed_pipe_ends_quietly_with_0(name):
    r = run_into_closed_pipe(tool(name), "--help")
    assert r.returncode == 0 and r.stderr == "", (r.returncode, r.stderr)


@pytest.mark.parametrize("name", MC_TOOLS)
def test_the_shared_codes_messages_name_the_program(name):
    """The attaching code is shared with xprobes; its messages are not
    xprobes'."""
    r = run(tool(name), "-p", 999999)
    assert r.returncode == 1
    assert r.stderr == f"{name}: no such process: 999999\n", r.stderr


def module_gone(mc, module):
    deadline = time.monotonic() + TIMEOUT
    while True:
        r = _mc.xp(mc.pid, "modules")
        if r.returncode == 0 and module not in r.stdout:
            return
        assert time.monotonic() < deadline, f"{module} still loaded: {r.stdout}"
        time.sleep(0.05)


def serving(mc):
    with mc.client() as s:
        s.sendall(b"version\r\n")
        return _mc.recv_until(s, b"\r\n").startswith(b"VERSION ")


@pytest.mark.parametrize("argv,module", [
    (["mctop", "--json", "0.1"], "mctop.so"),
    (["mctop", "-C", "0.1"], "mctop.so"),
    (["mcsnoop"], "mcsnoop.so"),
    (["mclat", "0.1"], "mclat.so"),
    (["xprobes", "PID", "sites"], None),
])
def test_a_reader_that_went_away_ends_the_tool_quietly_and_memcached_is_left_as_it_was(
        memcached, argv, module):
    argv = [tool(argv[0])] + [str(memcached.pid) if a == "PID" else a for a in argv[1:]]
    if module:
        argv[1:1] = ["-p", str(memcached.pid)]
    r = run_into_closed_pipe(*argv)
    assert r.returncode == 0, r.stderr
    assert "writing the output failed" not in r.stderr, r.stderr
    if module:
        module_gone(memcached, module)
    assert serving(memcached)


def test_mcload_into_a_closed_pipe(memcached):
    r = run_into_closed_pipe(tool("mcload"), "-s", f"127.0.0.1:{memcached.port}", "-n", 10)
    assert r.returncode == 0 and r.stderr == "", r.stderr


# Fields that are counts, fractions, flags, identifiers or text: no unit to name.
UNITLESS = {"pid", "target", "total", "tracked", "omitted", "bound", "lat_every", "keys", "key",
            "key_escaped", "source", "window", "sampled_fraction", "cut",
            "calls", "err", "clients", "get_hits", "get_misses", "sets", "adds", "replaces",
            "appends", "prepends", "cas", "touches", "incrs", "decrs", "deletes", "thread",
            "conn", "cmd", "result", "per", "count", "unmatched", "partial", "noreply", "lost",
            "stages", "batch", "tid", "fd", "rx", "tcpip_rx", "epoll", "wait", "read",
            "memcached", "tx"}
UNITS = ("_s", "_ns", "_us", "_bytes", "_per_s")


def unitless_fields(obj, path=""):
    """Every field of obj (recursively) whose name should carry a unit but
    does not."""
    bad = []
    for k, v in obj.items():
        if not k.endswith(UNITS) and k not in UNITLESS:
            bad.append(path + k)
        if isinstance(v, dict):
            bad += unitless_fields(v, path + k + ".")
        elif isinstance(v, list):
            for e in v:
                if isinstance(e, dict):
                    bad += unitless_fields(e, path + k + "[].")
    return bad


def traffic(mc):
    with mc.client() as s:
        for i in range(20):
            s.sendall(b"set k%d 0 0 3\r\nabc\r\nget k%d\r\n" % (i, i))
            _mc.recv_until(s, b"END\r\n")


@pytest.mark.parametrize("argv", [
    ["mctop", "--json", "0.2", "3"],
    ["mcsnoop", "--json", "-d", "1.5"],
    ["mclat", "--json", "--batches", "0.5", "2"],
])
def test_json_fields_name_their_units(memcached, argv):
    p = subprocess.Popen([tool(argv[0]), "-p", str(memcached.pid), *argv[1:]],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT
        while _mc.xp(memcached.pid, "modules").stdout.count(".so") == 0:
            assert p.poll() is None, p.stderr.read()
            assert time.monotonic() < deadline, "the tool never loaded its module"
            time.sleep(0.05)
        traffic(memcached)
        out, err = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    objs = [json.loads(line) for line in out.splitlines()]
    assert objs, err
    for o in objs:
        assert unitless_fields(o) == [], o
    assert any("time_s" in o for o in objs)


# ---- a command that finds nothing says so ----

@pytest.fixture
def bare(procs):
    """A program with no site at all (sleep), agent preloaded or not."""
    def start(agent):
        env = base_env(LD_PRELOAD=os.path.join(BUILD, "libxprobes.so")) if agent else base_env()
        p = procs.popen(["/bin/sleep", "600"], env=env, stdin=subprocess.DEVNULL)
        if agent:
            deadline = time.monotonic() + TIMEOUT
            while not os.path.exists(socket_path(p.pid)):
                assert time.monotonic() < deadline, "the agent never listened"
                time.sleep(0.02)
        return p.pid
    return start


@pytest.mark.parametrize("cmd,message", [
    (["sites"], "no sites in process {pid}"),
    (["sites", "nosuch*"], "no sites match 'nosuch*' in process {pid}"),
    (["objects"], "no objects with sites in process {pid}"),
    (["modules"], "no modules loaded in process {pid}"),
    (["probes"], "no probes in loaded modules in process {pid}"),
])
def test_an_empty_listing_says_so(bare, cmd, message):
    pid = bare(agent=True)
    r = run(tool("xprobes"), pid, *cmd)
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    assert r.stderr == "xprobes: " + message.format(pid=pid) + "\n"


def test_list_of_a_process_without_probes_says_so(bare):
    pid = bare(agent=False)
    r = run(tool("xprobes"), "list", "-p", pid)
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    assert r.stderr.startswith(f"xprobes list: no sites or SDT probes in process {pid}'s "), \
        r.stderr


def agent_mapped(pid):
    with open(f"/proc/{pid}/maps") as f:
        return "libxprobes" in f.read()


def test_inject_into_a_process_without_sites_is_refused_before_injecting(bare):
    pid = bare(agent=False)
    r = run(tool("xprobes"), "--inject", pid, "sites")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.startswith(f"xprobes: process {pid} has no probe sites"), r.stderr
    assert "--force" in r.stderr
    assert not agent_mapped(pid)
    # Forced, it injects, and the listing says what it found.
    r = run(tool("xprobes"), "--inject", "--force", pid, "sites")
    assert r.returncode == 0, r.stderr
    assert r.stderr.endswith(f"xprobes: no sites in process {pid}\n"), r.stderr
    assert agent_mapped(pid)
