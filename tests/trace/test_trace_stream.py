# SPDX-License-Identifier: MIT
"""Recording without loss: `xprobes trace -o DIR -- PROG` and
`xprobes PID trace record -o DIR` drain every thread's ring into a uftrace
data directory while the program runs.  Checked here: fib(27) recorded
whole with the default options (every call, as the program counts them
itself, and as uftrace counts them reading our directory); Ctrl-C keeps
the recording; a recording client killed with SIGKILL leaves the target
running untraced, its NOPs back; a full disk says so, counts the loss and
leaves the target unharmed.  Waits are on lines, exits and files, each
bounded by TIMEOUT."""
import os
import re
import shutil
import signal
import subprocess

import pytest

from tracefix import BUILD, TIMEOUT, XPROBES, LineProgram, env, fixture, wait_for


def fib_traced():
    path = os.path.join(BUILD, "bench", "fib-traced")
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: run `make fixtures`")
    return path


def stat(dir_):
    r = subprocess.run([XPROBES, "trace", "stat", "-d", dir_], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return {m.group(2): int(m.group(1))
            for m in re.finditer(r"^\s+(\d+)\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+)$", r.stdout, re.M)}


def test_fib_27_recorded_whole(tmp_path):
    rec = str(tmp_path / "rec")
    r = subprocess.run([XPROBES, "trace", "-o", rec, "--", fib_traced(), "27"],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    calls = int(re.search(r"calls=(\d+)", r.stdout).group(1))
    assert calls == 635621
    m = re.search(r"trace record: (\d+) records of 1 thread in \S+, (\d+) lost", r.stderr)
    assert m and m.group(2) == "0", r.stderr
    ours = stat(rec)
    assert ours["fib"] == calls
    if shutil.which("uftrace"):
        u = subprocess.run(["uftrace", "report", "-d", rec], capture_output=True, text=True,
                           timeout=TIMEOUT)
        assert u.returncode == 0, u.stderr
        assert re.search(rf"\s{calls}\s+fib$", u.stdout, re.M), u.stdout
        # uftrace's own recording of the same source (its -pg build): every
        # function's count is ours.
        theirs_dir = str(tmp_path / "uftrace.data")
        pg = os.path.join(BUILD, "bench", "fib-pg")
        r = subprocess.run(["uftrace", "record", "-d", theirs_dir, pg, "27"],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        u = subprocess.run(["uftrace", "report", "-d", theirs_dir, "--no-pager"],
                           capture_output=True, text=True, timeout=TIMEOUT)
        theirs = {m.group(2): int(m.group(1)) for m in
                  re.finditer(r"^\s+\S+ \S+\s+\S+ \S+\s+(\d+)\s+(\w+)$", u.stdout, re.M)}
        # (theirs also has the library calls -pg's PLT hooks see: printf...)
        assert {"main", "fib", "ns_of"} <= set(ours), ours
        assert {f: theirs.get(f) for f in ours} == ours, (theirs, ours)


def dat_bytes(dir_):
    try:
        return sum(os.path.getsize(os.path.join(dir_, f)) for f in os.listdir(dir_)
                   if f.endswith(".dat") and not f.startswith("perf"))
    except FileNotFoundError:
        return 0


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_ctrl_c_keeps_the_recording(tmp_path, cc):
    """SIGINT, as a terminal sends it to both: the program dies of it, the
    tool drains what it can, closes the directory and says so."""
    rec = str(tmp_path / "rec")
    p = subprocess.Popen([XPROBES, "trace", "--no-libcall", "-o", rec, "--", fixture(f"prog_flip-{cc}"),
                          fixture(f"libtracee-{cc}.so")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                         start_new_session=True)
    try:
        assert p.stdout.readline().startswith("ready ")
        # Megabytes in: the recorder has seen the library prog_flip loaded
        # (it looks for new objects every 20 ms; the program's death by
        # the same SIGINT leaves nobody to ask afterwards).
        # and named it: its symbols are in the directory.
        wait_for(lambda: dat_bytes(rec) > 8 << 20 and any(
            f.startswith("libtracee") and f.endswith(".sym") for f in os.listdir(rec)),
            "nothing recorded")
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 128 + signal.SIGINT, err
    assert "the recording in" in err and "keeps what it did" in err, err
    calls = stat(rec)
    with open(os.path.join(rec, "task.txt")) as f:
        tasks = f.read()
    assert calls.get("fib", 0) > 0 and calls.get("tracee_sum_squares", 0) > 0, tasks + err


def test_recording_client_killed_leaves_the_target_untraced(tmp_path):
    t = LineProgram([fixture("prog_flip-gcc"), fixture("libtracee-gcc.so")])
    rec = str(tmp_path / "rec")
    try:
        client = subprocess.Popen([XPROBES, str(t.pid), "trace", "record", "-o", rec],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
        wait_for(lambda: dat_bytes(rec) > 100000, "nothing recorded")
        client.kill()
        client.wait(timeout=TIMEOUT)

        def untraced():
            r = subprocess.run([XPROBES, str(t.pid), "trace", "status"], capture_output=True,
                               text=True, timeout=TIMEOUT, env=env())
            return "tracing: off" in r.stdout and "functions: 0 patched" in r.stdout
        wait_for(untraced, "the agent kept tracing after its recording client died")
        t.say("check")
        m = re.fullmatch(r"rounds=(\d+) bad=(\d+)", t.line())
        assert m and m.group(2) == "0"
        assert stat(rec).get("fib", 0) > 0  # what was drained is readable
    finally:
        t.close()


def test_full_disk_says_so_and_leaves_the_target_unharmed(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True)
    t = LineProgram([fixture("prog_flip-gcc"), fixture("libtracee-gcc.so")])
    try:
        r = subprocess.run([XPROBES, str(t.pid), "trace", "record", "-o", str(mnt / "rec"),
                            "-d", "30"], capture_output=True, text=True, timeout=TIMEOUT,
                           env=env())
        assert r.returncode != 0
        assert "No space left on device" in r.stderr, r.stderr
        s = subprocess.run([XPROBES, str(t.pid), "trace", "status"], capture_output=True,
                           text=True, timeout=TIMEOUT, env=env())
        assert "tracing: off" in s.stdout, s.stdout
        t.say("check")
        assert re.fullmatch(r"rounds=\d+ bad=0", t.line())
    finally:
        t.close()
        subprocess.run(["umount", str(mnt)], check=False)


def test_others_cannot_clear_under_a_recording_and_a_stop_ends_it(tmp_path):
    """A recording client writes each ring's tail into the target: a clear
    under it would start the rings over (or free them) and the client's
    next tail would let the thread write over records nobody copied, or
    land in freed memory.  So clear (and a start in another mode) is
    refused while it reads; a stop by someone else ends the recording,
    which keeps what it drained."""
    t = LineProgram([fixture("prog_flip-gcc"), fixture("libtracee-gcc.so")])
    rec = str(tmp_path / "rec")
    try:
        client = subprocess.Popen([XPROBES, str(t.pid), "trace", "record", "-o", rec],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env())
        wait_for(lambda: dat_bytes(rec) > 100000, "nothing recorded")

        def run(*args):
            return subprocess.run([XPROBES, str(t.pid), "trace", *args], capture_output=True,
                                  text=True, timeout=TIMEOUT, env=env())
        c = run("clear")
        assert c.returncode != 0 and "is reading the buffers" in c.stderr + c.stdout, c
        s = run("stop")
        assert s.returncode == 0, s.stderr
        r = run("start", "--overwrite")  # the client may still be draining
        assert r.returncode != 0 and "still reading the buffers" in r.stderr + r.stdout, r
        out, err = client.communicate(timeout=TIMEOUT)
        assert client.returncode == 0, err
        assert "stopped in process %d by another client" % t.pid in err, err
        m = re.search(r"(\d+) records of \d+ threads? in \S+, (\d+) lost", err)
        assert m and int(m.group(1)) > 0, err
        assert stat(rec).get("fib", 0) > 0
        # The client gone, the buffers are anyone's again.
        assert run("clear").returncode == 0
        t.say("check")
        assert re.fullmatch(r"rounds=\d+ bad=0", t.line())
    finally:
        t.close()


def callgraph_recording(tmp_path):
    rec = str(tmp_path / "cg")
    r = subprocess.run([XPROBES, "trace", "-o", rec, "--", fixture("prog_callgraph-gcc")],
                       input="run\nquit\n", capture_output=True, text=True, timeout=TIMEOUT,
                       env=env())
    assert r.returncode == 0, r.stderr
    return rec


def our_calls(text):
    """tid -> [(depth, function)] of each call line of `trace cat`."""
    out, tid = {}, None
    for line in text.splitlines():
        m = re.match(r" -+ tid (\d+)", line)
        if m:
            tid = int(m.group(1))
            out[tid] = []
            continue
        m = re.match(r"[^|]*\|  ( *)(\w+)\(\)", line)
        if m and tid is not None:
            out[tid].append((len(m.group(1)) // 2, m.group(2)))
    return out


def uftrace_calls(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"[^\[]*\[ *(\d+)\] \| ( *)(\w+)\(\)", line)
        if m:
            out.setdefault(int(m.group(1)), []).append((len(m.group(2)) // 2, m.group(3)))
    return out


@pytest.mark.parametrize("filters", [["-F", "work"], ["-N", "mid", "-D", "3"],
                                     ["-F", "w*", "-N", "fib"], ["-D", "1"],
                                     # each match counts its own levels: fib's
                                     # recursion shows whole, leaf under work
                                     ["-F", "fib", "-D", "1"],
                                     ["-F", "work", "-F", "leaf", "-D", "1"]])
def test_offline_filters_show_what_uftrace_replay_shows(tmp_path, filters):
    """-F, -N and -D on a recording mean what they mean to uftrace replay:
    the same calls at the same depths, thread by thread (our patterns are
    globs, as in `trace start -F`: uftrace's are regexes unless told)."""
    if not shutil.which("uftrace"):
        pytest.skip("uftrace is not installed")
    rec = callgraph_recording(tmp_path)
    ours = subprocess.run([XPROBES, "trace", "cat", "-d", rec, *filters], capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert ours.returncode == 0, ours.stderr
    theirs = subprocess.run(["uftrace", "replay", "--match=glob", "-d", rec, *filters],
                            capture_output=True,
                            text=True, timeout=TIMEOUT)
    assert theirs.returncode == 0, theirs.stderr
    a, b = our_calls(ours.stdout), uftrace_calls(theirs.stdout)
    assert {t: c for t, c in a.items() if c} == b, ours.stdout + theirs.stdout
    everything = our_calls(subprocess.run([XPROBES, "trace", "cat", "-d", rec],
                                          capture_output=True, text=True,
                                          timeout=TIMEOUT).stdout)
    assert sum(map(len, a.values())) < sum(map(len, everything.values()))
    stat = subprocess.run([XPROBES, "trace", "stat", "-d", rec, *filters], capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert stat.returncode == 0, stat.stderr
    shown = {f for calls in a.values() for _, f in calls}
    listed = set(re.findall(r"^\s+\d+\s+\S+\s+\S+\s+\S+\s+\S+\s+(\w+)$", stat.stdout, re.M))
    assert listed == shown, stat.stdout


def test_min_time_while_recording_keeps_only_long_calls(tmp_path):
    """-t with -o DIR leaves short calls out as they are drained (as
    `uftrace record -t` does), balanced: uftrace reads the directory."""
    rec = str(tmp_path / "rec")
    r = subprocess.run([XPROBES, "trace", "-t", "50", "-o", rec, "--", fib_traced(), "25"],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    m = re.search(r"(\d+) calls shorter than 50.000 us left out", r.stderr)
    assert m and int(m.group(1)) > 100000, r.stderr
    cat = subprocess.run([XPROBES, "trace", "cat", "-d", rec], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert cat.returncode == 0, cat.stderr
    times = [float(t) for t in re.findall(r"^[ +!#@*]+\s*([\d.]+)\s+\|", cat.stdout, re.M)]
    assert times and min(times) >= 50.0, cat.stdout[:2000]
    calls = stat(rec)
    assert calls["main"] == 1 and 0 < calls["fib"] < int(m.group(1))
    if shutil.which("uftrace"):
        u = subprocess.run(["uftrace", "report", "-d", rec], capture_output=True, text=True,
                           timeout=TIMEOUT)
        assert u.returncode == 0 and re.search(rf"\s{calls['fib']}\s+fib$", u.stdout, re.M), \
            u.stdout + u.stderr
