# SPDX-License-Identifier: MIT
"""Request-scoped recording (trace start --requests, lib/trace/trace_record.c
and trace_request.c): a probe module opens recording at a request's start
site and closes it at its end, keeping it or not.  prog_requests serves
"requests" between reqtest_start and reqtest_end; tests/fixtures/
mod_requests.c keeps those the program calls slow, labelled "req ID".
Exactly the kept requests reach the recording, each one call named by its
label with the request's calls under it; calls outside requests, dropped
requests, a request left open (a begin with no end, a thread that ends, a
module unloaded) never do."""
import os
import shutil
import signal
import subprocess

import pytest

from tracefix import BUILD, TIMEOUT, XPROBES, LineProgram, env, fixture, requests, wait_for

MOD = os.path.join(BUILD, "tests", "fixtures", "mod_requests.so")
UFTRACE = shutil.which("uftrace")


@pytest.fixture(params=["gcc", "clang"])
def prog(request):
    p = LineProgram([fixture(f"prog_requests-{request.param}")])
    yield p
    if p.p.poll() is None:
        p.p.kill()
    p.p.wait()


def xp(pid, *args, ok=True):
    r = subprocess.run([XPROBES, str(pid), *args], capture_output=True, text=True,
                       timeout=TIMEOUT, env=env())
    assert (r.returncode == 0) == ok, (args, r.stdout, r.stderr)
    return r.stdout


def status(pid):
    return xp(pid, "trace", "status")


def record(prog, out):
    """`trace record --requests -o out`, once tracing is on."""
    r = subprocess.Popen([XPROBES, str(prog.pid), "trace", "record", "-o", str(out),
                          "--requests"], stderr=subprocess.PIPE, text=True, env=env())
    wait_for(lambda: "tracing: on" in status(prog.pid) or r.poll() is not None, "tracing on")
    assert r.poll() is None, r.stderr.read()
    assert "requests: only what modules keep" in status(prog.pid)
    return r


def finish(r):
    r.send_signal(signal.SIGINT)
    _, err = r.communicate(timeout=TIMEOUT)
    assert r.returncode == 0, err
    return err


def ask(prog, line):
    prog.say(line)
    assert prog.line() == "done"


def cat(out):
    r = subprocess.run([XPROBES, "trace", "cat", "-d", str(out)], capture_output=True,
                       text=True, timeout=TIMEOUT)
    return r


def test_only_kept_requests_are_recorded(prog, tmp_path):
    assert "3 attachments" in xp(prog.pid, "load", MOD)
    assert xp(prog.pid, "command", "mod_requests.so", "api") == "api lent\n"
    out = tmp_path / "rec"
    r = record(prog, out)
    ask(prog, "req 1 0")
    ask(prog, "req 2 1")
    ask(prog, "open 5")     # left open: the next begin drops it
    ask(prog, "req 3 0")
    ask(prog, "thread 6")   # a thread that ends with its request open
    ask(prog, "req 4 1")
    ask(prog, "open 7")     # open when its module goes
    xp(prog.pid, "unload", "mod_requests.so")
    ask(prog, "req 8 1")    # no module: nothing opens
    xp(prog.pid, "load", MOD)
    ask(prog, "req 9 1")
    err = finish(r)
    assert " 0 lost" in err, err
    c = cat(out)
    assert c.returncode == 0, c.stderr
    assert_kept(c.stdout, ["req 2", "req 4", "req 9"])
    for never in ("req_idle", "req_open", "req_serve"):
        assert never not in c.stdout, c.stdout
    if UFTRACE:
        u = subprocess.run([UFTRACE, "replay", "-d", str(out)],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert u.returncode == 0, u.stderr
        assert_kept(u.stdout, ["req 2", "req 4", "req 9"])
        assert "req_idle" not in u.stdout, u.stdout


def assert_kept(text, names):
    """Each kept request one call named by its label, entered first and
    left last, its calls (and nothing else) one level under it."""
    kept = requests(text)
    assert [name for name, _, _ in kept] == names, text
    for name, us, calls in kept:
        assert us is not None and us > 0, (name, text)
        assert calls == [(0, "req_work"), (1, "strtol")] + [(1, "req_leaf")] * 3, (name, text)


def test_a_lazy_call_first_made_outside_a_request_is_recorded_inside(prog, tmp_path):
    """strtoul is first called (and bound by the loader) on a thread with no
    request open, then inside a kept request: the request shows it.  The
    unrecorded first call still follows its return to put the stub back."""
    xp(prog.pid, "load", MOD)
    out = tmp_path / "rec"
    r = record(prog, out)
    ask(prog, "late 1 1")
    ask(prog, "late 2 1")
    err = finish(r)
    assert " 0 lost" in err, err
    c = cat(out)
    assert c.returncode == 0, c.stderr
    kept = requests(c.stdout)
    assert [(name, calls) for name, _, calls in kept] == [
        (f"req {i}", [(0, "late_work"), (1, "strtoul")]) for i in (1, 2)], c.stdout


def test_nothing_slow_keeps_nothing(prog, tmp_path):
    xp(prog.pid, "load", MOD)
    out = tmp_path / "rec"
    r = record(prog, out)
    for i in range(20):
        ask(prog, f"req {i} 0")
    err = finish(r)
    assert "0 records of" in err, err
    c = cat(out)
    assert "req_work" not in c.stdout and "request:" not in c.stdout, c.stdout


def test_kill_9_of_the_tool_leaves_it_untraced(prog, tmp_path):
    xp(prog.pid, "load", MOD)
    r = record(prog, tmp_path / "rec")
    ask(prog, "req 1 1")
    r.kill()
    r.wait(timeout=TIMEOUT)
    wait_for(lambda: "tracing: off" in status(prog.pid), "tracing off after the tool died")
    assert "functions: 0 patched" in status(prog.pid)
    ask(prog, "req 2 1")  # runs on, untraced


def test_requests_refuse_overwrite(prog):
    r = subprocess.run([XPROBES, str(prog.pid), "trace", "start", "--requests", "--overwrite"],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode != 0 and "--requests does not go with --overwrite" in r.stderr, r.stderr


def test_live_cat_shows_kept_requests_without_loss(prog):
    xp(prog.pid, "load", MOD)
    xp(prog.pid, "trace", "start", "--requests")
    ask(prog, "req 1 1")
    ask(prog, "req 2 0")
    ask(prog, "req 3 1")
    out = xp(prog.pid, "trace", "cat")
    assert_kept(out, ["req 1", "req 3"])
    assert "req_idle" not in out, out
    assert "lost" not in out.lower(), out
    xp(prog.pid, "trace", "stop")
