# SPDX-License-Identifier: MIT
"""Recordings as uftrace data directories (tools/trace_uftrace.c),
checked by uftrace itself against its own recording of the same program.

The program is tests/trace/prog_callgraph.c, built here without XProbes with
-fpatchable-function-entry=5 and recorded by `uftrace record -P .` (no
library calls, no events): that gives the reference call tree.  Our
directories are written by tests/trace/uft_write (the writer driven by
lines of events) with the real addresses of that binary's functions:
  - once for the call tree the program's source says it makes;
  - once for what `xprobes trace --format chrome` recorded of the same
    source built for XProbes (its events, named, mapped to addresses).
Then `uftrace replay` of ours must print the reference's call tree,
`uftrace report` the same call counts, `uftrace dump --chrome` and
`--flame-graph`, `uftrace graph`, `uftrace info` and `uftrace tui` must
read it, and each thread's .dat must have the reference's record types
and depths, record for record.  Our reader reads uftrace's directory back.

Every wait is on a process's exit."""
import collections
import json
import os
import re
import shutil
import struct
import subprocess
import time

import pytest

from tracefix import REPO, TIMEOUT, XPROBES, env, fixture

UFTRACE = shutil.which("uftrace")
pytestmark = pytest.mark.skipif(not UFTRACE, reason="uftrace is not installed")

BASE = 0x555555554000  # where our recording says the binary was loaded
FUNCS = ["main", "handle_run", "worker_main", "work", "mid", "fib", "leaf"]
CALLS = {"main": 1, "handle_run": 1, "worker_main": 1, "work": 2, "mid": 4, "fib": 18,
         "leaf": 8}


def driver():
    return fixture("uft_write")


def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=env(), **kw)
    assert r.returncode == 0, (argv, r.stdout, r.stderr)
    return r.stdout


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("uftrace")


@pytest.fixture(scope="module")
def prog(work):
    """prog_callgraph.c for uftrace -P: patchable entries, no XProbes."""
    path = str(work / "prog_callgraph")
    run(["gcc", "-O2", "-g", "-fpatchable-function-entry=5", "-I", os.path.join(REPO, "include"),
         "-o", path, os.path.join(REPO, "tests", "trace", "prog_callgraph.c"), "-lpthread"])
    return path


@pytest.fixture(scope="module")
def reference(work, prog):
    """uftrace's own recording of one `run`."""
    d = str(work / "ref")
    run([UFTRACE, "record", "--no-libcall", "--no-event", "-P", ".", "-d", d, prog],
        input="run\nquit\n")
    return d


def symbols(path):
    """name -> value of the functions of an ELF file (nm)."""
    out = run(["nm", "--defined-only", path])
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            syms.setdefault(parts[2], int(parts[0], 16))
    return syms


def maps_text(prog):
    """A /proc/PID/maps for the binary loaded at BASE."""
    return (f"{BASE:x}-{BASE + 0x1000:x} r--p 00000000 08:01 42   {prog}\n"
            f"{BASE + 0x1000:x}-{BASE + 0x2000:x} r-xp 00001000 08:01 42   {prog}\n"
            f"{BASE + 0x2000:x}-{BASE + 0x4000:x} rw-p 00002000 08:01 42   {prog}\n"
            "7f0000000000-7f0000020000 r--p 00000000 08:01 77   /usr/lib/x86_64-linux-gnu/libc.so.6\n"
            "7f0000020000-7f0000100000 r-xp 00020000 08:01 77   /usr/lib/x86_64-linux-gnu/libc.so.6\n"
            "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0    [stack]\n")


def write_ours(work, name, prog, threads):
    """Our directory from threads: [(tid, thread name, [(kind, ns, function)])]."""
    syms = symbols(prog)
    mapsfile = work / f"{name}.maps"
    mapsfile.write_text(maps_text(prog))
    lines = [f"object {prog} {BASE:#x}"]
    for tid, tname, _ in threads:
        lines.append(f"thread {tid} {tname}")
    for tid, _, events in threads:
        for i, (kind, ns, fn) in enumerate(events):
            lines.append(f"{kind} {tid} {ns} {BASE + syms[fn]:#x}")
            if i % 7 == 6:
                lines.append("")  # the stream in several appends
    d = str(work / name)
    out = run([driver(), "write", d, str(threads[0][0]), prog, str(mapsfile)],
              input="\n".join(lines) + "\n")
    assert out.strip() == "skipped 0"
    return d


def source_tree():
    """The call tree prog_callgraph.c's comment gives for one `run`."""
    def fib(n):
        return ("fib", [] if n < 2 else [fib(n - 1), fib(n - 2)])
    work_ = ("work", [("mid", [("leaf", []), ("leaf", [])]), fib(4),
                      ("mid", [("leaf", []), ("leaf", [])])])
    return [("main", [("handle_run", [work_])]), ("worker_main", [work_])]


def source_stacks():
    """Every caller;...;callee path of source_tree()."""
    out = set()

    def walk(node, prefix):
        path = prefix + [node[0]]
        out.add(";".join(path))
        for k in node[1]:
            walk(k, path)
    for root in source_tree():
        walk(root, [])
    return out


def tree_events(node, clock):
    """Entry and exit events of a call tree, 1 us apart."""
    name, kids = node
    clock[0] += 1000
    ev = [("E", clock[0], name)]
    for k in kids:
        ev += tree_events(k, clock)
    clock[0] += 1000
    return ev + [("X", clock[0], name)]


REPLAY_LINE = re.compile(r"^\s*(?:[\d.]+ [mun]?s)?\s*\[\s*(\d+)\] \| (.*)$")


def replay_trees(d):
    """uftrace replay's lines per thread, in the order threads first show,
    without durations and tids: [(depth, text)]."""
    out = run([UFTRACE, "replay", "-d", d])
    per = collections.OrderedDict()
    for line in out.splitlines()[1:]:
        m = REPLAY_LINE.match(line)
        assert m, line
        text = m.group(2)
        depth = (len(text) - len(text.lstrip(" "))) // 2
        per.setdefault(int(m.group(1)), []).append((depth, text.strip()))
    return list(per.values())


def report_calls(d):
    out = run([UFTRACE, "report", "-d", d])
    calls = {}
    for line in out.splitlines()[2:]:
        parts = line.split()
        calls[parts[-1]] = int(parts[-2])
    return calls


def graph_shape(d):
    """uftrace graph's call-path tree and counts, without times and the session."""
    out = run([UFTRACE, "graph", "-d", d])
    return [line.split(":", 1)[1].rstrip() for line in out.splitlines()
            if ":" in line and not line.startswith("#")]


def sym_lines(d, names):
    """The lines of prog_callgraph.sym naming names."""
    lines = open(os.path.join(d, "prog_callgraph.sym")).read().splitlines()
    return sorted(line for line in lines if line.split()[-1] in names)


def dat_shape(d):
    """Each thread's records as (type, magic, depth), threads in task.txt's order."""
    tids = [int(m) for m in re.findall(r"^TASK .* tid=(\d+)", open(os.path.join(d, "task.txt")).read(),
                                       re.M)]
    shapes = []
    for tid in tids:
        data = open(os.path.join(d, f"{tid}.dat"), "rb").read()
        assert len(data) % 16 == 0
        words = [struct.unpack_from("<QQ", data, i)[1] for i in range(0, len(data), 16)]
        shapes.append([(w & 3, (w >> 3) & 7, (w >> 6) & 0x3ff) for w in words])
    return shapes


def check_against_reference(ours, reference, names, all_stacks=False):
    """Everything uftrace shows of ours is what it shows of its own."""
    want = replay_trees(reference)
    got = replay_trees(ours)
    assert len(want) == 2 and got == want
    assert want[0][0] == (0, "main() {") and (3, "mid() {") in want[0]  # not vacuous
    assert report_calls(ours) == report_calls(reference) == CALLS
    assert dat_shape(ours) == dat_shape(reference)
    # info's header as uftrace's to the feature bits (magic, version 4,
    # header size, endianness, class), and its depth limit.
    ours_info, ref_info = (open(os.path.join(x, "info"), "rb").read() for x in (ours, reference))
    assert ours_info[:16] == ref_info[:16] and ours_info[32:34] == ref_info[32:34]
    # The program's symbols where uftrace puts them.
    assert sym_lines(ours, FUNCS) == sym_lines(reference, FUNCS)

    chrome = json.loads(run([UFTRACE, "dump", "--chrome", "-d", ours]))
    begins = collections.Counter(e["name"] for e in chrome["traceEvents"] if e["ph"] == "B")
    assert begins == CALLS
    labels = {e["args"]["name"] for e in chrome["traceEvents"] if e.get("name") == "thread_name"}
    assert {lbl.split("] ")[1] for lbl in labels} == set(names)

    # Stacks of whole microseconds of self time (shorter ones round to
    # nothing): all of them where every call lasts microseconds.
    flame = run([UFTRACE, "dump", "--flame-graph", "-d", ours])
    stacks = {line.rsplit(" ", 1)[0] for line in flame.splitlines()}
    assert stacks and stacks <= source_stacks()
    if all_stacks:
        assert stacks == source_stacks()

    assert graph_shape(ours) == graph_shape(reference)
    assert "  +-(1) worker_main" in graph_shape(ours)

    info = run([UFTRACE, "info", "-d", ours])
    tids = re.findall(r"^TASK .* tid=(\d+)", open(os.path.join(ours, "task.txt")).read(), re.M)
    listed = ", ".join(f"{t}({n})" for t, n in zip(tids, names))
    assert re.search(r"task list\s+: " + re.escape(listed), info), info


def test_source_tree_reads_like_uftraces_own(work, prog, reference):
    clock = [1_000_000]
    main, worker = source_tree()
    main_ev = tree_events(main, clock)
    # The worker runs while handle_run waits in pthread_join, after its
    # work(): the threads' records do not interleave (replay would split
    # a leaf call another thread's record came between, as it does for
    # uftrace's own).
    joined = next(i for i, (k, _, fn) in enumerate(main_ev) if (k, fn) == ("X", "work"))
    clock[0] = main_ev[joined][1]
    worker_ev = tree_events(worker, clock)
    later = clock[0] - main_ev[joined][1]
    main_ev[joined + 1:] = [(k, ns + later, fn) for k, ns, fn in main_ev[joined + 1:]]
    ours = write_ours(work, "ours-source", prog,
                      [(4000, "prog_callgraph", main_ev), (4001, "worker", worker_ev)])
    check_against_reference(ours, reference, ["prog_callgraph", "worker"], all_stacks=True)


def chrome_threads(path):
    """`xprobes trace --format chrome`'s calls, back to entry and exit
    events per thread: complete events come in call order (pre-order), a
    callee within its caller's span."""
    doc = json.load(open(path))
    per = collections.OrderedDict()
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            t0 = round(e["ts"] * 1000)
            per.setdefault(e["tid"], []).append((t0, t0 + round(e["dur"] * 1000), e["name"]))
        else:
            assert e["ph"] == "M", e  # every call closed, nothing lost
    threads = []
    for tid, calls in per.items():
        events, stack = [], []
        for t0, t1, name in calls:
            while stack and stack[-1][0] <= t0:
                end, fn = stack.pop()
                events.append(("X", end, fn))
            events.append(("E", t0, name))
            stack.append((t1, name))
        while stack:
            end, fn = stack.pop()
            events.append(("X", end, fn))
        threads.append((tid, events))
    return threads


def test_xprobes_recording_reads_like_uftraces_own(work, prog, reference):
    out = str(work / "xprobes.json")
    r = subprocess.run([XPROBES, "trace", "--no-libcall", "--format", "chrome", "-o", out, "--",
                        fixture("prog_callgraph-gcc")], input="run\nquit\n", capture_output=True,
                       text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    threads = chrome_threads(out)
    assert len(threads) == 2
    assert {fn for _, ev in threads for _, _, fn in ev} == set(FUNCS)
    origin = 2_000_000_000  # any: the chrome times count from the trace's start
    ours = write_ours(work, "ours-xprobes", prog,
                      [(tid, name, [(k, origin + ns, fn) for k, ns, fn in ev])
                       for (tid, ev), name in zip(threads, ["prog_callgraph", "worker"])])
    check_against_reference(ours, reference, ["prog_callgraph", "worker"])


def test_sites_lost_records_and_mid_call_start(work, prog):
    """A site is a uftrace event, a lost record uftrace's LOST line; an
    exit whose entry was not recorded is marked with an event and written
    as a call of no time (never drawn at depth -1, never given a duration
    it did not have), which our reader shows as xprobes(1) says."""
    syms = symbols(prog)

    def a(fn):
        return f"{BASE + syms[fn]:#x}"
    lines = [f"object {prog} {BASE:#x}", "site 0x9000 tracetest:hit", "thread 77 prog",
             f"X 77 100 {a('leaf')}", f"X 77 200 {a('mid')}",  # began before the recording
             f"E 77 300 {a('work')}", f"E 77 400 {a('mid')}", "S 77 450 0x9000",
             f"X 77 500 {a('mid')}", "L 77 600 12", f"E 77 700 {a('fib')}", f"X 77 800 {a('fib')}",
             f"X 77 900 {a('work')}", f"X 77 1000 {a('handle_run')}"]
    d = str(work / "ours-misc")
    out = run([driver(), "write", d, "77", prog], input="\n".join(lines) + "\n")
    assert out.strip() == "skipped 0"
    noentry = "/* xprobes:entry_not_recorded */"
    def marked(fn):
        return [(0, f"{fn}() {{"), (1, noentry), (0, f"}} /* {fn} */")]
    assert replay_trees(d) == [marked("leaf") + marked("mid") + [
        (0, "work() {"), (1, "mid() {"), (2, "/* tracetest:hit */"), (1, "} /* mid */"),
        (2, "/* LOST 12 records!! */"), (1, "fib();"), (0, "} /* work */")] +
        marked("handle_run")]
    # No duration is made up for them.
    assert not re.search(r"\d us \[ *77\] \| \} /\* (leaf|handle_run) \*/",
                         run([UFTRACE, "replay", "-d", d]))
    assert open(os.path.join(d, "events.txt")).read() == (
        "EVENT: 1000000 xprobes:entry_not_recorded\nEVENT: 1000001 tracetest:hit\n")
    # Our reader shows the same, and the exits as the flight recorder does.
    graph = run([driver(), "read", d, "graph"])
    assert "/* tracetest:hit */" in graph and "/* 12 records lost */" in graph
    for fn in ("leaf", "mid", "handle_run"):
        assert f"}} /* {fn}: entry not recorded */" in graph, graph
    assert noentry not in graph


def label_records(tid, ns, text):
    """A kept request's label (lib/trace/trace.h): a header at ns with the
    text's length, then 7 records of 7 bytes of it each (LOST records with
    bit 63 set)."""
    head = 1 << 63
    lines = [f"L {tid} {ns} {head | 1 << 56 | len(text):#x}"]
    for k in range(7):
        word = int.from_bytes(text[7 * k:7 * k + 7].ljust(7, b"\0"), "little")
        lines.append(f"L {tid} {ns} {head | 2 << 56 | word:#x}")
    return lines


def test_request_labels_are_calls(work, prog):
    """A kept request is one call named by its label, entered at its begin
    and left at its end, with its calls one level under it: a symbol of
    /xprobes-requests, which uftrace and our reader name alike.  UTF-8
    stays; a control or a byte outside UTF-8 (the target's) becomes '?';
    an end or a text with no header before it (a hostile target) is
    left out."""
    syms = symbols(prog)

    def a(fn):
        return f"{BASE + syms[fn]:#x}"
    end = f"{1 << 63 | 3 << 56:#x}"
    lines = [f"object {prog} {BASE:#x}", "thread 77 prog", f"L 77 50 {end}",
             f"L 77 60 {1 << 63 | 2 << 56 | 0x41:#x}"]
    lines += label_records(77, 100, "get k\u00e9y\x01\t 3.1ms".encode())
    lines += [f"E 77 200 {a('work')}", f"E 77 300 {a('mid')}", f"X 77 400 {a('mid')}",
              f"X 77 500 {a('work')}", f"L 77 600 {end}"]
    lines += label_records(77, 700, b"set \xff 2ms")
    lines += [f"E 77 800 {a('fib')}", f"X 77 900 {a('fib')}", f"L 77 1000 {end}"]
    d = str(work / "ours-requests")
    out = run([driver(), "write", d, "77", prog], input="\n".join(lines) + "\n")
    assert out.strip() == "skipped 0"
    first, second = "get k\u00e9y?? 3.1ms", "set ? 2ms"
    assert replay_trees(d) == [[
        (0, f"{first}() {{"), (1, "work() {"), (2, "mid();"), (1, "} /* work */"),
        (0, f"}} /* {first} */"), (0, f"{second}() {{"), (1, "fib();"),
        (0, f"}} /* {second} */")]]
    # Their times: the request's begin to its end.
    assert re.search(r"0\.500 us \[ *77\] \| \} /\* " + re.escape(first), run(
        [UFTRACE, "replay", "-d", d])), run([UFTRACE, "replay", "-d", d])
    sym = open(os.path.join(d, "xprobes-requests.sym"), encoding="utf-8").read()
    assert f" T {first}\n" in sym and f" T {second}\n" in sym, sym
    graph = run([driver(), "read", d, "graph"])
    assert f"|  {first}() {{" in graph and f"|    work() {{" in graph, graph
    assert f"|  {second}() {{" in graph, graph


def test_request_beyond_the_stack(work, prog):
    """A request that begins deeper than uftrace's 1024 levels is counted
    as the calls beyond them are, and its end closes it: what follows is
    at its own depth again."""
    syms = symbols(prog)
    work_fn, fib = f"{BASE + syms['work']:#x}", f"{BASE + syms['fib']:#x}"
    lines = [f"object {prog} {BASE:#x}", "thread 77 prog"]
    lines += [f"E 77 {100 + i} {work_fn}" for i in range(1024)]
    lines += label_records(77, 2000, b"get deep 1ms")
    lines += [f"L 77 3000 {1 << 63 | 3 << 56:#x}"]
    lines += [f"X 77 {4000 + i} {work_fn}" for i in range(1024)]
    lines += [f"E 77 6000 {fib}", f"X 77 6100 {fib}"]
    d = str(work / "ours-deep-request")
    out = run([driver(), "write", d, "77", prog], input="\n".join(lines) + "\n")
    assert out.strip() == "skipped 0"
    graph = run([driver(), "read", d, "graph"])
    assert graph.rstrip().endswith("|  fib();"), graph[-300:]
    assert "get deep" not in graph


def test_library_loaded_later(work, prog):
    """An object added after the start (a DLOP line and its .sym): uftrace
    names its functions, and so does our reader."""
    lib = fixture("libtracee-gcc.so")
    syms, libsyms, libbase = symbols(prog), symbols(lib), 0x7f1234560000
    main, lsum, lsq = (f"{BASE + syms['main']:#x}", f"{libbase + libsyms['tracee_sum_squares']:#x}",
                       f"{libbase + libsyms['tracee_square']:#x}")
    lines = [f"object {prog} {BASE:#x}", "thread 88 prog", f"E 88 1000 {main}",
             f"dlopen {lib} {libbase:#x}", f"E 88 2000 {lsum}", f"E 88 3000 {lsq}",
             f"X 88 4000 {lsq}", f"X 88 5000 {lsum}", f"X 88 6000 {main}"]
    d = str(work / "ours-dlopen")
    run([driver(), "write", d, "88", prog], input="\n".join(lines) + "\n")
    assert re.search(rf"^DLOP .* base={libbase:x} libname=\"{re.escape(lib)}\"$",
                     open(os.path.join(d, "task.txt")).read(), re.M)
    want = [(0, "main() {"), (1, "tracee_sum_squares() {"), (2, "tracee_square();"),
            (1, "} /* tracee_sum_squares */"), (0, "} /* main */")]
    assert replay_trees(d) == [want]
    graph = run([driver(), "read", d, "graph"])
    assert "|    tracee_sum_squares() {\n" in graph and "tracee_square();" in graph


def test_tui_reads_ours(work, prog):
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed")
    clock = [1000]
    main, _ = source_tree()
    d = write_ours(work, "ours-tui", prog, [(5000, "prog_callgraph", tree_events(main, clock))])
    session = f"uft-test-{os.getpid()}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40",
                    UFTRACE, "tui", "-d", d], check=True, timeout=TIMEOUT)
    try:
        screen = ""
        for _ in range(100):  # until it has drawn: a bound, not a sleep to sync on
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                    capture_output=True, text=True, timeout=TIMEOUT).stdout
            if "handle_run" in screen:
                break
            time.sleep(0.1)
        assert re.search(r"\(1\) main", screen) and re.search(r"\(1\) handle_run", screen), screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], timeout=TIMEOUT)


def test_our_reader_reads_uftraces_own(reference):
    """uft_load on uftrace's directory: its threads, names and call counts."""
    out = run([driver(), "read", reference, "stat"])
    first, rest = out.split("\n", 1)
    assert re.fullmatch(r"threads \d+=prog_callgraph \d+=prog_callgraph", first), first
    calls = {line.split()[-1]: int(line.split()[0]) for line in rest.splitlines()[1:]}
    assert calls == CALLS
    graph = run([driver(), "read", reference, "graph"])
    assert "             |    handle_run() {\n             |      work() {\n" in graph
