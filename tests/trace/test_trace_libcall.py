# SPDX-License-Identifier: MIT
"""Library calls in the function graph (lib/trace/trace_plt.c,
tools/xprobes/trace_libcall.c), on tests/trace/prog_libcall.c.

- `xprobes trace -o DIR -- prog calls` (malloc, free, qsort calling a
  traced comparator, read, raise running a traced signal handler,
  pthread_create of a traced start routine, pthread_join) must read back in `uftrace replay` as uftrace's own
  recording of the -pg build does, times and tids aside (and -pg's own
  calls, and uftrace's sched events): lazy binding and -z now (full RELRO).
  -fno-plt: uftrace shows none of its library calls; ours must show them
  as for the PLT build.
- --no-libcall leaves them out (the tool asks the agent for them unless
  told so; the agent's own `trace start` needs --libcall).
- setjmp, longjmp out of a traced function, fork, and exit() inside a
  traced function: the program runs to its end and the graph holds them.
- start and stop many times while threads call malloc, free, strlen and
  qsort flat out: every result right, and the GOT, read through
  /proc/PID/mem, exactly as before (lazy binding: a slot may only have
  gone from unresolved to the loader's resolution meanwhile).

Every wait is on a line from the program or a process exit."""
import os
import re
import shutil
import subprocess

import pytest

from tracefix import TIMEOUT, XPROBES, LineProgram, env, fixture, trace_build, xprobes

UFTRACE = shutil.which("uftrace")
CALLS = ["malloc", "free", "qsort", "cmp", "read", "signal", "raise", "handler", "pthread_create",
         "pthread_join", "start"]


def replay(d, *opts):
    """uftrace replay of d (with opts), one "depth name" per line, thread
    after thread in the order they first show (replay interleaves them by
    time): times, tids, events and -pg's own startup calls left out."""
    out = subprocess.run([UFTRACE, "replay", *opts, "-d", d], capture_output=True, text=True,
                         timeout=TIMEOUT, check=True).stdout
    threads = {}
    for line in out.splitlines():
        m = re.match(r"^.*\[\s*(\d+)\] \| (\s*)(.*)$", line)
        if not m or "/* linux:" in line:
            continue
        body = m.group(3)
        if re.match(r"(\} /\* )?(__monstartup|__cxa_atexit)\b", body):
            continue
        threads.setdefault(m.group(1), []).append(f"{len(m.group(2)) // 2} {body}")
    flat = []
    for lines in threads.values():
        for line in lines:
            # A call another thread's line split: "f() {" then "} /* f */".
            m = re.match(r"(\d+) \} /\* (.*) \*/$", line)
            if m and flat and flat[-1] == f"{m.group(1)} {m.group(2)}() {{":
                flat[-1] = f"{m.group(1)} {m.group(2)}();"
            else:
                flat.append(line)
    return flat


def ours(tmp_path, prog, *args, opts=("--libcall",)):
    d = str(tmp_path / ("x-" + os.path.basename(prog)))
    r = subprocess.run([XPROBES, "trace", *opts, "-o", d, "--", prog, *args],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    return d


def theirs(tmp_path, prog, *args, opts=()):
    d = str(tmp_path / ("u-" + os.path.basename(prog)))
    subprocess.run([UFTRACE, "record", *opts, "-d", d, prog, *args], capture_output=True,
                   timeout=TIMEOUT, check=True)
    return d


@pytest.mark.skipif(not UFTRACE, reason="uftrace is not installed")
@pytest.mark.parametrize("variant", [("gcc", "pg"), ("now", "pg-now")], ids=["lazy", "relro"])
def test_calls_as_uftrace_shows_them(tmp_path, variant):
    mine, pg = variant
    got = replay(ours(tmp_path, fixture(f"prog_libcall-{mine}"), "calls"))
    want = replay(theirs(tmp_path, fixture(f"prog_libcall-{pg}"), "calls"))
    assert got == want
    for name in CALLS:
        assert any(line.split(" ", 1)[1].startswith(name) for line in got), name


@pytest.mark.skipif(not UFTRACE, reason="uftrace is not installed")
def test_no_plt_calls(tmp_path):
    """-fno-plt calls go through GLOB_DAT slots: the same graph as the PLT build."""
    got = replay(ours(tmp_path, fixture("prog_libcall-noplt"), "calls"))
    want = replay(ours(tmp_path, fixture("prog_libcall-gcc"), "calls"))
    assert got == want
    assert "2 qsort() {" in got and "3 cmp();" in got
    assert "2 raise() {" in got and "3 handler();" in got


@pytest.mark.parametrize("opts", [["--no-libcall"], ["--libcall", "--no-libcall"]])
def test_no_libcall(opts):
    r = subprocess.run([XPROBES, "trace", *opts, "--", fixture("prog_libcall-gcc"), "calls"],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    assert "cmp()" in r.stdout
    for name in ("malloc", "qsort", "pthread_create", "read"):
        assert name not in r.stdout
    r = subprocess.run([XPROBES, "trace", "--", fixture("prog_libcall-gcc"), "calls"],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    assert "qsort() {" in r.stdout and "pthread_create()" in r.stdout


@pytest.mark.parametrize("variant", ["gcc", "clang", "now", "noplt"])
def test_calls_that_do_not_return_once(variant):
    """setjmp returns twice, longjmp and exit never; fork returns in two
    processes: the program ends as it would untraced, the graph nests."""
    r = subprocess.run([XPROBES, "trace", "--libcall", "--", fixture(f"prog_libcall-{variant}"),
                        "jumps"],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for name in ("setjmp()", "longjmp()", "jump_out()", "fork()", "waitpid()", "finish() {",
                 "exit()"):
        assert name in out, (name, out)
    # After longjmp the calls of jumps() nest under it again, not under jump_out.
    depth = {m.group(2): len(m.group(1)) for m in re.finditer(r"\|(\s+)(\w+)\(\)", out)}
    assert depth["fork"] == depth["jump_out"] == depth["waitpid"]


@pytest.mark.skipif(not UFTRACE, reason="uftrace is not installed")
def test_longjmp_in_uftrace_replay(tmp_path):
    """uftrace replay takes the record after a longjmp's entry as where
    setjmp returned: a recording must hold no exit of longjmp, and of the
    calls it left only the outermost's (an exit of each nested all that
    followed one level too shallow)."""
    got = replay(ours(tmp_path, fixture("prog_libcall-gcc"), "jumps"))
    depth = {line.split(" ", 1)[1]: int(line.split(" ", 1)[0]) for line in got}
    assert depth["fork();"] == depth["jump_out() {"] == depth["waitpid();"], got
    assert depth["longjmp() {"] == depth["jump_out() {"] + 1, got
    assert "} /* longjmp */" not in depth, got


@pytest.mark.parametrize("variant", ["gcc", "now", "noplt"])
def test_calls_that_never_return_under_lazy_binding(variant):
    """pthread_exit's first call goes to the loader, which writes the
    function over the stub, and never returns to put the stub back: the
    next library call must, or the second thread's pthread_exit (and any
    later call through that slot) goes unrecorded."""
    r = subprocess.run([XPROBES, "trace", "--", fixture(f"prog_libcall-{variant}"), "exits"],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("ends_thread() {") == 2, r.stdout
    assert r.stdout.count("pthread_exit()") == 2, r.stdout


@pytest.mark.parametrize("variant", ["gcc", "now", "noplt"])
def test_vfork(variant):
    """vfork returns in the child first, on its parent's stack: every call
    shows (lazy binding: the slot the loader resolved at the first is
    hooked again before the second), and the program runs as untraced."""
    r = subprocess.run([XPROBES, "trace", "--", fixture(f"prog_libcall-{variant}"), "vforks"],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("vfork();") == 3, r.stdout
    assert r.stdout.count("waitpid();") == 3, r.stdout
    assert r.stdout.count("spawn() {") == 3, r.stdout


def got_ranges(path):
    """[(start, end)] of .got and .got.plt in the file (link-time addresses)."""
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True,
                         check=True).stdout
    ranges = []
    for line in out.splitlines():
        m = re.search(r"\]\s+(\.got(?:\.plt)?)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m:
            ranges.append((int(m.group(2), 16), int(m.group(2), 16) + int(m.group(3), 16)))
    assert ranges
    return ranges


def read_got(pid, path, ranges):
    base = None
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == path and int(parts[2], 16) == 0:
                base = int(parts[0].split("-")[0], 16)
                break
    assert base is not None
    words = {}
    with open(f"/proc/{pid}/mem", "rb") as mem:
        for lo, hi in ranges:
            mem.seek(base + lo)
            data = mem.read(hi - lo)
            for i in range(0, len(data), 8):
                words[lo + i] = int.from_bytes(data[i:i + 8], "little")
    return base, words


def text_range(pid, path):
    spans = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == path:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                spans.append((lo, hi))
    return min(s[0] for s in spans), max(s[1] for s in spans)


@pytest.mark.parametrize("variant", ["gcc", "now", "noplt"])
def test_start_stop_under_threads(variant):
    path = os.path.realpath(fixture(f"prog_libcall-{variant}"))
    ranges = got_ranges(path)
    p = LineProgram([path, "loop", "4"])
    try:
        _, before = read_got(p.pid, path, ranges)
        lo, hi = text_range(p.pid, path)
        script = "".join("trace start --libcall\ntrace stop\n" for _ in range(25))
        r = xprobes(p.pid, script)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.count("tracing stopped") == 25, r.stdout
        assert re.search(r"calls through [1-9]\d* library call slot", r.stdout), r.stdout
        _, after = read_got(p.pid, path, ranges)
        changed = {a: (before[a], after[a]) for a in before if before[a] != after[a]}
        # Only lazy slots resolved meanwhile: from the object's own PLT to elsewhere.
        for a, (old, new) in changed.items():
            assert variant == "gcc" and lo <= old < hi and not lo <= new < hi, \
                (hex(a), hex(old), hex(new))
        p.say("quit")
        assert p.line() == "ok"
    finally:
        p.close()


def test_got_restored_with_calls_in_flight():
    """Traced while its threads run: the records name the calls, and after
    stop no GOT slot points into an anonymous executable mapping (a stub)."""
    path = os.path.realpath(fixture("prog_libcall-gcc"))
    ranges = got_ranges(path)
    p = LineProgram([path, "loop", "2"])
    try:
        # 64 MiB: many rounds of the loop, whatever call it was in at the start
        r = xprobes(p.pid, "trace start --libcall -b 65536\n")
        assert r.returncode == 0, r.stdout + r.stderr
        for _ in range(TIMEOUT * 10):  # a bound: each round waits on the agent
            st = xprobes(p.pid, "trace status\n").stdout
            if not re.search(r"records: 0 used", st):
                break
        assert re.search(r"^library calls: through [1-9]\d* GOT slots$", st, re.M), st
        r = xprobes(p.pid, "trace stat\ntrace stop\n")
        assert r.returncode == 0, r.stdout + r.stderr
        for name in ("malloc", "free", "qsort", "cmp"):
            assert re.search(rf"\b{name}\n", r.stdout), (name, r.stdout)
        _, after = read_got(p.pid, path, ranges)
        stubs = []
        with open(f"/proc/{p.pid}/maps") as f:
            for line in f:
                parts = line.split()
                if "x" in parts[1] and len(parts) == 5:
                    lo, hi = (int(x, 16) for x in parts[0].split("-"))
                    stubs += [v for v in after.values() if lo <= v < hi]
        assert not stubs, [hex(v) for v in stubs]
        p.say("quit")
        assert p.line() == "ok"
    finally:
        p.close()


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_library_loaded_while_tracing(cc):
    """A traced library dlopen()ed while tracing: its own library calls
    (strdup, strlen, free) are traced from its load on, and a stop puts
    its GOT back too."""
    lib = fixture(f"libcallee-{cc}.so")
    p = LineProgram([fixture("prog_libcall-gcc"), "dl", lib])
    try:
        r = xprobes(p.pid, "trace start\n")
        assert r.returncode == 0, r.stdout + r.stderr
        p.say("load")
        assert p.line() == "loaded"
        p.say("call")
        assert p.line() == "len=7"
        r = xprobes(p.pid, "trace cat\n")
        assert r.returncode == 0, r.stdout + r.stderr
        m = re.search(r"\|(\s*)callee_len\(\) \{\n((?:.*\n)*?).*\|\1\}", r.stdout)
        assert m, r.stdout
        for name in ("strdup", "strlen", "free"):
            assert re.search(rf"\b{name}\(\);", m.group(2)), (name, r.stdout)
        ranges = got_ranges(lib)
        r = xprobes(p.pid, "trace stop\n")
        assert r.returncode == 0, r.stdout + r.stderr
        _, after = read_got(p.pid, os.path.realpath(lib), ranges)
        with open(f"/proc/{p.pid}/maps") as f:
            anon_x = [tuple(int(x, 16) for x in line.split()[0].split("-"))
                      for line in f if "x" in line.split()[1] and len(line.split()) == 5]
        assert not [v for v in after.values() for lo, hi in anon_x if lo <= v < hi]
        p.say("call")
        assert p.line() == "len=7"
    finally:
        p.close()


def test_a_lazy_call_of_a_thread_left_out_by_t_leaves_the_slot_traced():
    """`trace start -T MAIN`: another thread makes the first call of strtol
    (the loader binds it then) and records nothing, but its return puts the
    stub back, so the main thread's strtol right after is recorded.  (It was
    bound past the stub until the agent's next command.)"""
    p = LineProgram([fixture("prog_libcall-gcc"), "lazythread"])
    try:
        r = xprobes(p.pid, f"trace start -T {p.pid}\n")
        assert r.returncode == 0, r.stdout + r.stderr
        p.say("go")
        assert p.line() == "done 15"
        r = xprobes(p.pid, "trace cat\n")
        assert r.returncode == 0, r.stdout + r.stderr
        assert re.findall(r"\bstrtol\(\);", r.stdout) == ["strtol();"], r.stdout
        assert "first_strtol" not in r.stdout, r.stdout
        p.say("go")
        assert p.line() == "done 15"
        r = xprobes(p.pid, "trace stop\n")
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        p.close()


@pytest.mark.parametrize("cxx", ["g++", "clang++"])
def test_exceptions_through_library_calls(cxx, tmp_path):
    """tests/trace/record_cxx.cc: exceptions thrown (the throw's library
    calls hooked, __cxa_throw left alone), unwound through traced frames
    and caught, with library calls traced: it computes as untraced."""
    out = str(tmp_path / "record_cxx")
    here = os.path.dirname(os.path.abspath(__file__))
    trace_build(cxx, os.path.join(here, "record_cxx.cc"), out, cflags=("-std=c++17", "-O2", "-g"))
    r = subprocess.run([XPROBES, "trace", "--", out], input="throw\nrethrow\nthrow\nquit\n",
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    answers = [line for line in r.stdout.splitlines() if line.startswith(("throw ", "rethrow "))]
    assert answers == ["throw 14", "rethrow 21", "throw 14"], r.stdout
    assert "__cxa_allocate_exception();" in r.stdout
    assert "__cxa_throw" not in r.stdout


def test_selection_names_library_calls():
    """-F/-N match library calls by name as they match functions."""
    prog = fixture("prog_libcall-gcc")
    r = subprocess.run([XPROBES, "trace", "-F", "calls", "-F", "cmp", "-F", "qsort", "-F", "malloc",
                        "--", prog, "calls"], capture_output=True, text=True, timeout=TIMEOUT,
                       env=env())
    assert r.returncode == 0, r.stderr
    assert "qsort() {" in r.stdout and "malloc();" in r.stdout and "cmp();" in r.stdout
    for name in ("free", "read", "raise", "pthread_create", "main"):
        assert f"{name}(" not in r.stdout, (name, r.stdout)
    r = subprocess.run([XPROBES, "trace", "-N", "q*", "-N", "read", "--", prog, "calls"],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    assert "malloc();" in r.stdout and "raise() {" in r.stdout and "cmp();" in r.stdout
    assert "qsort" not in r.stdout and "read(" not in r.stdout
