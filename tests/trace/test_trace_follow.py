# SPDX-License-Identifier: MIT
"""The run form follows the program's whole life, as uftrace does:
fork()ed children, daemon(), vfork()+exec, posix_spawn, exec from the
program and from a thread (tools/xprobes/trace_follow.c).  prog_life.c is
built with -fpatchable-function-entry=5 alone and recorded by `uftrace
record -P .`, and built with our flags
and recorded by `xprobes trace -o DIR`; `uftrace dump` of each must show,
per process image, the same calls of the program's own functions at the
same depths (times and tids aside).  Also: a library dlopen()ed by a
relative path is named in the recording; the agent's own thread is never
in it (a program with its own traced malloc); `trace record` of a running
process records the children it forks."""
import os
import re
import select
import shutil
import signal
import subprocess

import pytest

from tracefix import REPO, TIMEOUT, XPROBES, LineProgram, env, fixture, wait_for

UFTRACE = shutil.which("uftrace")
pytestmark = pytest.mark.skipif(not UFTRACE, reason="uftrace is not installed")

OWN = {"main", "do_fork", "child_work", "parent_work", "leaf_a", "image_work", "run_image",
       "do_vfork", "do_spawn", "do_daemon", "exec_thread", "do_texec", "do_dlopen"}
DUMP = re.compile(r"^\s*[\d.]+\s+(\d+): \[(entry|exit )\] (\S+?)\(([0-9a-f]+)\) depth: (\d+)")


def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=env(), **kw)
    assert r.returncode == 0, (argv, r.stdout, r.stderr)
    return r


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """prog_life.c for uftrace -P: the fixture's flags without XProbes,
    so both tracers see the same code, compiler by compiler."""
    d = tmp_path_factory.mktemp("plain")
    out = {}
    for cc in ("gcc", "clang"):
        out[cc] = str(d / f"prog_life-{cc}")
        run([cc, "-O2", "-g", "-fpatchable-function-entry=5", "-I", os.path.join(REPO, "include"),
             "-o", out[cc], os.path.join(REPO, "tests", "trace", "prog_life.c"), "-lpthread", "-ldl"])
    return out


def tasks(d):
    """Per thread, the program's own calls as (kind, name, depth), in its
    .dat order; the list of them sorted (tids differ between recordings).
    A thread that exec'd holds both images, one after the other."""
    out = run([UFTRACE, "dump", "-d", d]).stdout
    per = {}
    for line in out.splitlines():
        m = DUMP.match(line)
        name = m.group(3).split(".")[0] if m else ""  # gcc's clones: f.constprop.0
        if name in OWN:
            per.setdefault(m.group(1), []).append((m.group(2).strip(), name, int(m.group(5))))
    return sorted(per.values())


@pytest.mark.parametrize("mode", ["fork", "vfork", "spawn", "exec", "texec", "daemon"])
@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_life_recorded_as_uftrace_does(tmp_path, plain, mode, cc):
    ref = str(tmp_path / "ref")
    # Library calls recorded too (and left out of the comparison): only
    # when it hooks exec does uftrace flush what a thread recorded before
    # it, the entry of run_image here.
    run([UFTRACE, "record", "--no-event", "-P", ".", "-d", ref, plain[cc], mode])
    ours = str(tmp_path / "ours")
    r = run([XPROBES, "trace", "-o", ours, "--", fixture(f"prog_life-{cc}"), mode])
    want = tasks(ref)
    got = tasks(ours)
    if mode == "texec":
        # uftrace keeps what the other threads of an image that exec'd
        # had not flushed, or not: main's do_texec is there or not from
        # run to run.  Ours always has it.
        want = [[c for c in t if c[1] != "do_texec"] for t in want]
        got = [[c for c in t if c[1] != "do_texec"] for t in got]
    assert got == want, (r.stderr, open(os.path.join(ours, "task.txt")).read())
    # uftrace reads it back.
    run([UFTRACE, "replay", "-d", ours])


def test_daemon_child_recorded(tmp_path):
    """After daemon() both the parent's entries and the daemon's calls."""
    ours = str(tmp_path / "ours")
    r = run([XPROBES, "trace", "-o", ours, "--", fixture("prog_life-clang"), "daemon"])
    got = tasks(ours)
    flat = [c for t in got for c in t]
    why = r.stderr + open(os.path.join(ours, "task.txt")).read()
    assert ("entry", "child_work", 2) in flat, why
    assert ("entry", "do_daemon", 1) in flat
    assert "FORK " in open(os.path.join(ours, "task.txt")).read()


def test_exec_through_a_shell(tmp_path):
    """`sh -c PROG`: the program the shell runs is the one traced."""
    ours = str(tmp_path / "ours")
    prog = fixture("prog_life-clang")
    run([XPROBES, "trace", "-o", ours, "--", "sh", "-c", f"{prog} leaf; true"])
    flat = [c for t in tasks(ours) for c in t]
    assert ("entry", "image_work", 1) in flat


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_relative_dlopen_is_named(tmp_path, cc):
    lib = fixture(f"libtracee-{cc}.so")
    # A library is patched before dlopen() returns only when the agent is
    # free at that moment (lib/agent/dlopen_hook.c); busy answering the
    # recorder, its first calls go unrecorded.  Not what is tested here:
    # a recording where they are recorded is, so up to 5 are made.
    for attempt in range(5):
        ours = str(tmp_path / f"ours{attempt}")
        run([XPROBES, "trace", "-o", ours, "--", fixture(f"prog_life-{cc}"), "dlopen",
             "./" + os.path.basename(lib)], cwd=os.path.dirname(lib))
        out = run([UFTRACE, "replay", "-d", ours]).stdout
        if "do_dlopen() {" in out:
            break
    assert "tracee_sum_squares() {" in out, out
    assert "<7f" not in out, out
    assert f'libname="{lib}"' in open(os.path.join(ours, "task.txt")).read()


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_agent_threads_never_recorded(tmp_path, cc):
    """A program with its own (traced) malloc: the agent's thread, which
    calls it to answer the recorder, is not in the recording."""
    ours = str(tmp_path / "ours")
    r = run([XPROBES, "trace", "-o", ours, "--", fixture(f"prog_ownmalloc-{cc}")])
    tids = re.findall(r"^TASK .* tid=(\d+)", open(os.path.join(ours, "task.txt")).read(), re.M)
    assert len(set(tids)) == 1, (tids, r.stderr)
    out = run([UFTRACE, "report", "-d", ours, "--task"]).stdout
    assert "xprobes-agent" not in out, out
    calls = {line.split()[-1]: int(line.split()[-2])
             for line in run([UFTRACE, "report", "-d", ours]).stdout.splitlines()[2:]}
    assert calls.get("malloc", 0) >= 4000, calls  # the program's own, all there


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_live_recording_follows_forks(tmp_path, cc):
    """`xprobes PID trace record`: a child the process forks while it is
    recorded is recorded too, its calls in a task of its own."""
    t = LineProgram([fixture(f"prog_record-{cc}")])
    rec = str(tmp_path / "rec")
    client = subprocess.Popen([XPROBES, str(t.pid), "trace", "record", "-o", rec],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env())
    try:
        task = os.path.join(rec, "task.txt")
        # The recorder says "tracing N functions" once tracing is on.
        ready, _, _ = select.select([client.stderr], [], [], TIMEOUT)
        assert ready, "the recording did not start"
        first = client.stderr.readline()
        assert first.startswith("tracing "), first
        t.say("fork")
        line = t.line()
        while line.startswith("fn"):  # its functions' addresses, first
            line = t.line()
        assert line == "fork 0"
        wait_for(lambda: "FORK " in open(task).read(), "no FORK line")
        client.send_signal(signal.SIGINT)
        _, err = client.communicate(timeout=TIMEOUT)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
        t.close()
    child = re.search(r"^FORK .* pid=(\d+) ppid=(\d+)", open(task).read(), re.M)
    assert child and int(child.group(2)) == t.pid, err
    out = run([UFTRACE, "dump", "-d", rec]).stdout
    calls = [m.group(3) for m in map(DUMP.match, out.splitlines())
             if m and m.group(1) == child.group(1) and m.group(2) == "entry"]
    assert "calls_top" in calls and "jmp_top" in calls, (calls, err)


def test_signal_after_the_program_was_let_go(tmp_path):
    """Following, the program is let go at its "exit" while what it
    started still runs (here `sh -c "PROG leaf; exec sleep"`: the shell,
    the process the tool ran, becomes sleep).  SIGTERM to the tool alone
    then ends the recording and is passed on to that process; the tool
    must not wait for it to end on its own (it did wait: the program had
    said "exit", so it was reaped as if about to end)."""
    ours = str(tmp_path / "ours")
    prog = fixture("prog_life-clang")
    tool = subprocess.Popen([XPROBES, "trace", "-o", ours, "--", "sh", "-c",
                             f"{prog} leaf; exec sleep 1000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    sleeper = []
    try:
        def sleeping():
            try:
                kids = open(f"/proc/{tool.pid}/task/{tool.pid}/children").read().split()
                sleeper[:] = [int(k) for k in kids
                              if open(f"/proc/{k}/cmdline").read().startswith("sleep")]
                return sleeper
            except OSError:
                return False
        wait_for(sleeping, "the shell never ran sleep")
        tool.send_signal(signal.SIGTERM)
        _, err = tool.communicate(timeout=TIMEOUT)
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait()
            for pid in sleeper:  # never sent the signal: ended here
                os.kill(pid, signal.SIGKILL)
    assert tool.returncode == 128 + signal.SIGTERM, err
    assert "exit_status:15" in open(os.path.join(ours, "info"), errors="replace").read(), err
    flat = [c for t in tasks(ours) for c in t]
    assert ("entry", "image_work", 1) in flat, err
