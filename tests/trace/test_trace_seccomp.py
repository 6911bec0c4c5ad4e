# SPDX-License-Identifier: MIT
"""`trace start` in a program under a seccomp filter (prog_seccomp.c).
Before anything in the target changes, the tool runs the filters of every
thread (read with ptrace, as root) on the system calls tracing makes: a
filter that kills on mremap, or makes it fail, gets the start refused with
the reason, and the program goes on alive, untraced, its memory map as it
was.  A filter that allows them all is traced as usual.  The agent itself
refuses a start under seccomp that nobody checked; a tool that cannot read
the filters (not root) refuses and says how to start anyway.  Waits are on
lines from the program and on exits."""
import os
import shutil
import socket
import struct
import subprocess

import pytest

from tracefix import BUILD, TIMEOUT, XPROBES, LineProgram, fixture

NOBODY = 65534


def xp(*args, user=None):
    argv = [XPROBES, *[str(a) for a in args]]
    if user is not None:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, cwd="/")


def maps(pid):
    with open(f"/proc/{pid}/maps") as f:
        return f.read()


def untraced_and_alive(p):
    st = xp(p.pid, "trace", "status")
    assert st.returncode == 0, st.stderr
    assert "tracing: off" in st.stdout and "functions: 0 patched" in st.stdout, st.stdout
    p.say("run")
    assert p.line() == "sum 320"
    p.close()  # status 0: never killed


pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: to read seccomp filters")


@pytest.mark.parametrize("mode,says", [
    ("kill", "kills the process on mremap(MREMAP_MAYMOVE|MREMAP_FIXED)"),
    ("errno", "makes mremap(MREMAP_MAYMOVE|MREMAP_FIXED) fail with EPERM (errno 1)"),
    ("kill-main", "kills the process on mremap(MREMAP_MAYMOVE|MREMAP_FIXED)"),
    ("wx", "makes mprotect(PROT_READ|PROT_EXEC) fail with EPERM (errno 1)"),
])
@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_filter_that_refuses_switching_refuses_the_start(mode, says, cc):
    """kill and errno: a filter on every thread (TSYNC); kill-main: on the
    main thread only, which the agent's thread does not share; wx: on an
    argument (mprotect adding PROT_EXEC, as for trampolines)."""
    p = LineProgram([fixture(f"prog_seccomp-{cc}"), mode])
    assert xp(p.pid, "version").returncode == 0  # the agent's own first maps (its arena)
    before = maps(p.pid)
    r = xp(p.pid, "trace", "start")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.startswith("xprobes: trace start: refused: "), r.stderr
    assert (f"thread {p.pid} of process {p.pid} runs under a seccomp filter that {says}"
            in r.stderr), r.stderr
    assert "nothing was changed" in r.stderr, r.stderr
    assert maps(p.pid) == before  # no trampoline, buffer or copy mapped
    untraced_and_alive(p)


def test_filter_that_allows_switching_is_traced():
    p = LineProgram([fixture("prog_seccomp-clang"), "allow"])
    r = xp(p.pid, "trace", "start")
    assert r.returncode == 0 and "tracing 4 functions" in r.stdout, r.stdout + r.stderr
    p.say("run")
    assert p.line() == "sum 320"
    r = xp(p.pid, "trace", "stop")
    assert "4 functions unpatched" in r.stdout, r.stdout + r.stderr
    p.close()


def agent_says(pid, line):
    """The agent's own answer to line, past the tool: (status, text)."""
    path = xp(pid, "socket").stdout.split()[2]
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(TIMEOUT)
        s.connect(path)
        body = line.encode()
        s.sendall(struct.pack("<I", len(body)) + body)
        n = struct.unpack("<I", s.recv(4, socket.MSG_WAITALL))[0]
        reply = s.recv(n, socket.MSG_WAITALL)
    return reply[0], reply[1:].decode()


def test_agent_refuses_an_unchecked_start_under_seccomp():
    """A client that does not read the filters (the protocol spoken
    directly) is refused by the agent, even where the filter would allow
    everything; --seccomp-checked is the client's word that it did."""
    p = LineProgram([fixture("prog_seccomp-clang"), "allow"])
    status, text = agent_says(p.pid, "trace start")
    assert status != 0, text
    assert text.startswith(f"trace start: thread {p.pid} runs under seccomp (a filter)"), text
    assert "nothing was changed" in text, text
    status, text = agent_says(p.pid, "trace start --seccomp-checked")
    assert status == 0 and text.startswith("tracing 4 functions"), text
    p.say("run")
    assert p.line() == "sum 320"
    p.close()


def test_ignore_seccomp_starts_anyway():
    """The user's word: the tool does not check; under a filter that
    makes mremap fail, the agent's own switch then fails and undoes it."""
    p = LineProgram([fixture("prog_seccomp-gcc"), "errno"])
    r = xp("--ignore-seccomp", p.pid, "trace", "start")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "mremap: Operation not permitted; nothing is traced" in r.stderr, r.stderr
    untraced_and_alive(p)


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_filters_unreadable_without_root_refuse():
    """uid 65534 may trace its own program but not read its filters
    (CAP_SYS_ADMIN): refused, with the way to start anyway."""
    for path in (fixture("prog_seccomp-gcc"), XPROBES, os.path.join(BUILD, "libxprobes.so")):
        if subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                           "--clear-groups", "test", "-r", path]).returncode != 0:
            pytest.skip(f"uid {NOBODY} cannot read {path}")
    p = LineProgram(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                     fixture("prog_seccomp-gcc"), "kill"])
    r = xp(p.pid, "trace", "start", user=NOBODY)
    assert r.returncode == 1, r.stdout + r.stderr
    assert (f"thread {p.pid} of process {p.pid} runs under 1 seccomp filter, which cannot "
            "be read" in r.stderr), r.stderr
    assert f"xprobes --ignore-seccomp PID trace start starts anyway" in r.stderr, r.stderr
    untraced_and_alive(p)
