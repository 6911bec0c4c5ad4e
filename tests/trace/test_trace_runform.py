# SPDX-License-Identifier: MIT
"""The run form, `xprobes trace -o DIR -- PROG`, as scripts and supervisors
use it: the program's exit status passed on as a shell gives it (an exit
of 128..255 is no signal), DIR's info with uftrace's exit status, CPU
time and max RSS, task.txt as uftrace writes it, a DIR it cannot take
refused before the program runs, SIGINT and SIGTERM to the tool alone
(the tool always ends; the program gets the signal and, if it survives
it, runs on), and frames longjmp() leaves.  The program is prog_ends.c.
Waits are on lines and exits, each bounded by TIMEOUT."""
import os
import re
import shutil
import signal
import struct
import subprocess
import time

import pytest

from tracefix import TIMEOUT, XPROBES, env, fixture


def ends(cc="gcc"):
    return fixture(f"prog_ends-{cc}")


def record(rec, *args, cc="gcc", **kw):
    return subprocess.run([XPROBES, "trace", "--no-libcall", "-o", str(rec), "--", ends(cc), *args],
                          capture_output=True, text=True, timeout=TIMEOUT, env=env(), **kw)


def uftrace_info(rec):
    r = subprocess.run(["uftrace", "info", "-d", str(rec)], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return dict(re.findall(r"^# (\S[^:]*?)\s*: (.*)$", r.stdout, re.M))


def need_uftrace():
    if not shutil.which("uftrace"):
        pytest.skip("uftrace is not installed")


@pytest.mark.parametrize("status", [0, 1, 128, 255])
def test_exit_status_is_passed_on_as_an_exit(tmp_path, status):
    rec = tmp_path / "rec"
    r = record(rec, "exit", str(status))
    assert r.returncode == status, r.stderr
    assert "signal" not in r.stderr, r.stderr
    info = open(rec / "info", "rb").read()
    assert f"\nexit_status:{status << 8}\n".encode() in info
    if shutil.which("uftrace"):
        i = uftrace_info(rec)
        assert i["exit status"] == f"exited with code: {status}", i
        # What uftrace's own info shows of the run, from the program's rusage.
        assert re.fullmatch(r"\d+\.\d{3} / \d+\.\d{3} sec \(sys / user\)", i["cpu time"]), i
        assert re.fullmatch(r"\d+ KB", i["max rss"]) and int(i["max rss"].split()[0]) > 0, i
        assert re.fullmatch(r"\d+ / \d+ \(major / minor\)", i["page fault"]), i


def test_a_real_signal_is_reported_as_one(tmp_path):
    rec = tmp_path / "rec"
    r = record(rec, "signal")
    assert r.returncode == 128 + signal.SIGUSR1, r.stderr
    assert f"ended by signal {int(signal.SIGUSR1)}" in r.stderr, r.stderr
    if shutil.which("uftrace"):
        assert uftrace_info(rec)["exit status"].startswith(
            f"terminated by signal: {int(signal.SIGUSR1)}")


def processes_named(comm):
    """pid -> state of every process whose name is comm (zombies too)."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:]
        if name == comm:
            out[int(pid)] = rest.split()[0]
    return out


@pytest.mark.parametrize("how", ["not empty", "no parent"])
def test_a_directory_it_cannot_take_fails_at_once(tmp_path, how):
    """Before, the tool printed the error, then waited for the program,
    which waited to be told tracing was on: forever."""
    rec = tmp_path / "rec"
    if how == "not empty":
        rec.mkdir()
        (rec / "keep").write_text("mine")
    else:
        rec = tmp_path / "missing" / "rec"
    # A name of its own, to find the program by (a symbolic link: its
    # libraries are found from the real file).
    comm = f"ends{os.getpid() % 100000}{how[:2]}"
    os.symlink(ends(), tmp_path / comm)
    r = subprocess.run([XPROBES, "trace", "-o", str(rec), "--", str(tmp_path / comm), "exit", "0"],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("xprobes trace: "), r.stderr
    assert ("not empty" if how == "not empty" else "No such file") in r.stderr, r.stderr
    assert processes_named(comm) == {}  # not left running, nor defunct
    if how == "not empty":
        assert os.listdir(rec) == ["keep"]


def started(how, tmp_path):
    """The tool recording prog_ends waiting on its stdin, the program's pid
    and the file of the tool's stderr (a file: the program shares it, and
    may outlive the tool)."""
    err = open(tmp_path / "stderr", "w+")
    tool = subprocess.Popen([XPROBES, "trace", "-o", how[1], "--", ends(), how[0]],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                            text=True, env=env())
    line = tool.stdout.readline()  # printed in main: tracing is on by then
    assert line.startswith("ready "), line
    return tool, int(line.split()[1]), err


def ended(tool, err):
    """The tool's end (its stdin stays open: the program's input) and what it said."""
    tool.wait(timeout=TIMEOUT)
    err.seek(0)
    return err.read()


def state(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None  # reaped


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_tool_alone_is_passed_on(tmp_path, sig):
    """As timeout(1) does: the program gets the signal (here it dies of
    it), the tool keeps the recording, reports and ends."""
    rec = str(tmp_path / "rec")
    tool, pid, out = started(("wait", rec), tmp_path)
    try:
        tool.send_signal(sig)
        err = ended(tool, out)
        assert tool.returncode == 128 + sig, err
        assert f"ended by signal {int(sig)}" in err, err
        assert state(pid) is None  # the tool reaped it
        cat = subprocess.run([XPROBES, "trace", "cat", "-d", rec], capture_output=True, text=True,
                             timeout=TIMEOUT)
        assert cat.returncode == 0 and "main() {" in cat.stdout, cat
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_program_that_survives_the_signal_runs_on(tmp_path, sig):
    """The program ignores the signal: the tool does not wait for it (as
    uftrace record does not); it keeps the recording, says so and ends;
    the program runs on, untraced, and ends when it would have."""
    rec = str(tmp_path / "rec")
    tool, pid, out = started(("deaf", rec), tmp_path)
    try:
        tool.send_signal(sig)
        err = ended(tool, out)
        assert tool.returncode == 128 + sig, err
        assert f"(pid {pid}) was sent SIG{sig.name[3:]} and has not ended; it runs on" in err, err
        assert state(pid) not in (None, "Z")
        assert os.path.exists(os.path.join(rec, "info"))
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait()
    # It still reads its input (the tool's stdin, which it shares), and
    # ends at its end.
    tool.stdin.write("more\n")
    tool.stdin.close()
    deadline = time.monotonic() + TIMEOUT
    while state(pid) not in (None, "Z"):
        assert time.monotonic() < deadline, "the program did not end at the end of its input"
        time.sleep(0.01)  # polling for its end; no synchronisation rides on it


def first_record_ns(rec, tid):
    with open(os.path.join(rec, f"{tid}.dat"), "rb") as f:
        return struct.unpack("<Q", f.read(8))[0]


def ts_ns(text):
    s, ns = text.split(".")
    return int(s) * 10**9 + int(ns)


def test_task_txt_stamps_each_thread_at_its_start(tmp_path):
    """uftrace's order: the session, then each task when it started (its
    first record), ascending; info's tid list in the same order."""
    rec = str(tmp_path / "rec")
    r = subprocess.run([XPROBES, "trace", "-o", rec, "--", fixture("prog_callgraph-gcc")],
                       input="run\nrun\nquit\n", capture_output=True, text=True,
                       timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    text = open(os.path.join(rec, "task.txt")).read()
    sess = ts_ns(re.search(r"^SESS timestamp=(\S+)", text, re.M).group(1))
    tasks = [(ts_ns(t), int(tid)) for t, tid in
             re.findall(r"^TASK timestamp=(\S+) tid=(\d+)", text, re.M)]
    assert len(tasks) == 3, text  # main and two workers
    assert tasks == sorted(tasks) and [t for _, t in tasks] == sorted(t for _, t in tasks), text
    for ns, tid in tasks:
        assert ns == first_record_ns(rec, tid) and ns >= sess, (tid, text)
    info = open(os.path.join(rec, "info"), "rb").read()
    tids = ",".join(str(t) for _, t in tasks)
    assert f"\ntaskinfo:tids={tids}\n".encode() in info


# What the program's own functions make of longjmp(): ends_top at 1, the
# three ends_down it leaves at 2..4, ends_after back at 2.
LONGJMP = [(0, "main"), (1, "ends_top"), (2, "ends_down"), (3, "ends_down"), (4, "ends_down"),
           (2, "ends_after"), (3, "ends_leaf")]


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_frames_longjmp_leaves_show_without_their_exits(tmp_path, cc):
    """As xprobes(1) says: "} /* f: exit not recorded */", in the printed
    trace and in a recording read back; uftrace replay nests what follows
    where it ran, and marks each left call with a comment."""
    from test_trace_stream import our_calls, uftrace_calls
    rec = tmp_path / "rec"
    r = record(rec, "longjmp", cc=cc)
    assert r.returncode == 0, r.stderr
    live = subprocess.run([XPROBES, "trace", "--no-libcall", "--", ends(cc), "longjmp"], capture_output=True,
                          text=True, timeout=TIMEOUT, env=env())
    assert live.returncode == 0, live.stderr
    cat = subprocess.run([XPROBES, "trace", "cat", "-d", str(rec)], capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert cat.returncode == 0, cat.stderr
    for text in (live.stdout, cat.stdout):
        assert text.count("} /* ends_down: exit not recorded */") == 3, text
        assert list(our_calls(text).values()) == [LONGJMP], text
        # No duration for a call that did not return.
        assert not re.search(r"\d\s+\|\s+ends_down\(\);", text), text
    if shutil.which("uftrace"):
        u = subprocess.run(["uftrace", "replay", "-d", str(rec)], capture_output=True, text=True,
                           timeout=TIMEOUT)
        assert u.returncode == 0, u.stderr
        assert list(uftrace_calls(u.stdout).values()) == [LONGJMP], u.stdout
        assert u.stdout.count("/* xprobes:exit_not_recorded */") == 3, u.stdout


def test_uftraces_own_longjmp_recording_reads_the_same(tmp_path):
    """uftrace's recording has no exits for the calls longjmp left (it
    closes setjmp instead): our reader finds them gone by depth."""
    need_uftrace()
    from test_trace_stream import our_calls, uftrace_calls
    prog = str(tmp_path / "prog_ends")
    subprocess.run(["gcc", "-O2", "-g", "-fpatchable-function-entry=5", "-o", prog,
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "prog_ends.c")],
                   check=True, timeout=TIMEOUT)
    d = str(tmp_path / "uftrace.data")
    subprocess.run(["uftrace", "record", "-P", ".", "-d", d, prog, "longjmp"], check=True,
                   capture_output=True, timeout=TIMEOUT)
    theirs = subprocess.run(["uftrace", "replay", "-d", d], capture_output=True, text=True,
                            timeout=TIMEOUT).stdout
    ours = subprocess.run([XPROBES, "trace", "cat", "-d", d], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert ours.returncode == 0, ours.stderr
    assert list(our_calls(ours.stdout).values()) == list(uftrace_calls(theirs).values()), \
        ours.stdout + theirs
    assert ours.stdout.count("} /* ends_down: exit not recorded */") == 3, ours.stdout


def recording(pid, rec, tmp_path, name):
    """`xprobes PID trace record -o REC`, once tracing is on."""
    err = open(tmp_path / f"{name}.err", "w+")
    client = subprocess.Popen([XPROBES, str(pid), "trace", "record", "--no-libcall", "-o", str(rec)],
                              stdout=subprocess.DEVNULL, stderr=err, env=env())
    deadline = time.monotonic() + TIMEOUT
    while True:
        err.seek(0)
        if "tracing " in err.read():
            return client
        assert client.poll() is None and time.monotonic() < deadline, "tracing did not start"
        time.sleep(0.01)  # polling a file for a line, bounded


def stopped(client):
    client.send_signal(signal.SIGINT)  # as Ctrl-C: stop and keep the recording
    assert client.wait(timeout=TIMEOUT) == 0


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_a_call_entered_before_the_recording_is_marked(tmp_path, cc):
    """A server's loop entered under one recording returns under the
    next: its exit shows as the flight recorder's do, "entry not
    recorded", read back from the directory; uftrace replay shows the
    mark in a call of no time."""
    from test_trace_stream import our_calls
    from tracefix import LineProgram
    p = LineProgram([ends(cc), "serve"])
    first, second = tmp_path / "first", tmp_path / "second"
    try:
        client = recording(p.pid, first, tmp_path, "first")
        p.say("enter")
        assert p.line() == "entered"
        stopped(client)
        client = recording(p.pid, second, tmp_path, "second")
        p.say("work")
        assert p.line() == "worked"
        p.say("leave")
        assert p.line() == "left"
        stopped(client)
    finally:
        p.close()
    cat = subprocess.run([XPROBES, "trace", "cat", "-d", str(second)], capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert cat.returncode == 0, cat.stderr
    assert "} /* ends_serve: entry not recorded */" in cat.stdout, cat.stdout
    assert list(our_calls(cat.stdout).values()) == [
        [(0, "ends_work"), (1, "ends_leaf"), (1, "ends_leaf")]], cat.stdout
    if shutil.which("uftrace"):
        u = subprocess.run(["uftrace", "replay", "-d", str(second)], capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert u.returncode == 0, u.stderr
        assert re.search(r"\| ends_serve\(\) \{\n.*\|   /\* xprobes:entry_not_recorded \*/\n"
                         r" +\[ *\d+\] \| \} /\* ends_serve \*/", u.stdout), u.stdout


def test_ctrl_c_on_a_terminal_is_not_sent_again(tmp_path):
    """^C reaches the whole foreground process group, the program
    included: the tool does not send it a second SIGINT (a program may
    count them), and ends all the same."""
    import fcntl
    import pty
    import termios
    master, slave = pty.openpty()

    def controlling_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    err = open(tmp_path / "stderr", "w+")
    tool = subprocess.Popen([XPROBES, "trace", "-o", str(tmp_path / "rec"), "--", ends(), "deaf"],
                            stdin=slave, stdout=slave, stderr=err, env=env(),
                            preexec_fn=controlling_terminal)
    os.close(slave)
    try:
        out = b""
        deadline = time.monotonic() + TIMEOUT
        while b"ready " not in out:  # printed in main: tracing is on by then
            assert time.monotonic() < deadline, out
            out += os.read(master, 1024)
        pid = int(re.search(rb"ready (\d+)", out).group(1))
        os.write(master, b"\x03")  # the terminal's interrupt character
        text = ended(tool, err)
        assert tool.returncode == 128 + signal.SIGINT, text
        assert f"(pid {pid}) got SIGINT and has not ended; it runs on" in text, text
        # (The tool led the terminal's session: its end hangs the terminal
        # up, and the program, which ignores SIGINT only, goes with it.)
        if state(pid) not in (None, "Z"):
            os.kill(pid, signal.SIGKILL)
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait()
        os.close(master)


def test_a_reader_that_goes_away_ends_it_quietly():
    """`xprobes trace -- PROG | head -1`: the graph written after head
    left meets a closed pipe, which is an end, not a failure."""
    p = subprocess.Popen([XPROBES, "trace", "--no-libcall", "--",
                          os.path.join(os.path.dirname(XPROBES), "bench", "fib-traced"), "12"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    first = p.stdout.readline()  # the program's own line, before the graph
    assert first.startswith(b"fib 12 = 144"), first
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=TIMEOUT) == 0, err
    assert "Broken pipe" not in err and "writing" not in err, err
