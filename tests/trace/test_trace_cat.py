# SPDX-License-Identifier: MIT
"""`trace cat` and `trace stat` on a real traced program (prog_callgraph,
built by gcc and by clang): the graph has the program's call tree, every
call closed, children within their parent; chrome output is JSON with the
same calls properly nested; folded stacks and stat agree with the graph
(which prints exact ns, as us with three decimals) within the 1 ns that two
reads' TSC conversions may differ by.  The program must still quit with
status 0 after being traced.

Every wait is on a line from the program or on a command's exit."""
import collections
import contextlib
import json
import re
import subprocess

import pytest

from tracefix import TIMEOUT, XPROBES, LineProgram, env, fixture

COMPILERS = ["gcc", "clang"]


def prog(cc):
    return fixture(f"prog_callgraph-{cc}")


class Target(LineProgram):
    """prog_callgraph, driven line by line on its stdin."""

    def __init__(self, cc):
        super().__init__([prog(cc)])

    def run(self):
        self.say("run")
        assert self.line() == "done"

    def xp(self, *args, ok=True):
        r = subprocess.run([XPROBES, str(self.pid), *args], capture_output=True, text=True,
                           timeout=TIMEOUT, env=env())
        if ok:
            assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r


@contextlib.contextmanager
def traced_run(cc, *start_args):
    """A program that ran one `run` under `trace start START_ARGS`,
    tracing stopped."""
    t = Target(cc)
    try:
        r = t.xp("trace", "start", "--no-libcall", *start_args)
        assert re.match(r"tracing \d+ functions?", r.stdout), r.stdout
        t.run()
        t.xp("trace", "stop")
        yield t
    finally:
        t.close()


@pytest.fixture(params=COMPILERS)
def traced(request):
    with traced_run(request.param) as t:
        yield t


# ---- the graph, parsed --------------------------------------------------

Node = collections.namedtuple("Node", "name ns children")
LINE = re.compile(r"^(.)\s*(\d+\.\d{3})?\s+\|  (.*)$")


def ns_of(text):
    us, frac = text.split(".")
    return int(us) * 1000 + int(frac)


def parse_graph(text):
    """{tid: [root Node...]}; asserts the structure holds on the way:
    indentation follows nesting and every call is closed."""
    threads, roots, stack = {}, None, []
    for line in text.splitlines():
        m = re.match(r"^ ------- tid (\d+)(?: \(([^)]*)\))? -------$", line)
        if m:
            assert not stack, f"calls left open: {[n['name'] for n in stack]}"
            roots = threads.setdefault(int(m.group(1)), [])
            continue
        if not line or line.startswith("   Time(us)") or set(line) == {"-"}:
            continue
        m = LINE.match(line)
        assert m and roots is not None, f"not a graph line: {line!r}"
        dur, body = m.group(2), m.group(3)
        depth = (len(body) - len(body.lstrip(" "))) // 2
        body = body.strip()
        if body == "}":
            assert dur and depth == len(stack) - 1, line
            n = stack.pop()
            node = Node(n["name"], ns_of(dur), n["children"])
            (stack[-1]["children"] if stack else roots).append(node)
        elif body.endswith("() {"):
            assert dur is None and depth == len(stack), line
            stack.append({"name": body[:-4], "children": []})
        elif body.endswith("();"):
            assert dur and depth == len(stack), line
            (stack[-1]["children"] if stack else roots).append(Node(body[:-3], ns_of(dur), []))
        else:
            pytest.fail(f"unexpected line (missing exit or entry, lost records?): {line!r}")
    assert not stack, f"calls left open: {[n['name'] for n in stack]}"
    return threads


def shape(node):
    return (node.name, [shape(c) for c in node.children])


def fib_shape(n):
    return ("fib", [] if n < 2 else [fib_shape(n - 1), fib_shape(n - 2)])


MID = ("mid", [("leaf", []), ("leaf", [])])
WORK = ("work", [MID, fib_shape(4), MID])


def walk(node):
    yield node
    for c in node.children:
        yield from walk(c)


def all_nodes(threads):
    for roots in threads.values():
        for r in roots:
            yield from walk(r)


def graph(t, *args):
    return parse_graph(t.xp("trace", "cat", *args).stdout)


def near(got, want, slack):
    """Two reads of one trace convert TSC to ns through the clock pairs
    each read gets, whose "now" moves: a duration may round 1 ns apart."""
    return abs(got - want) <= slack


# ---- the tests ----------------------------------------------------------

def test_graph_has_the_call_tree_closed_and_nested(traced):
    threads = graph(traced)
    assert len(threads) == 2, threads.keys()
    assert [shape(r) for r in threads[traced.pid]] == [("handle_run", [WORK])]
    (worker,) = [tid for tid in threads if tid != traced.pid]
    assert [shape(r) for r in threads[worker]] == [("worker_main", [WORK])]
    for n in all_nodes(threads):
        assert sum(c.ns for c in n.children) <= n.ns, n


def test_graph_of_one_thread(traced):
    threads = graph(traced, "--tid", str(traced.pid))
    assert list(threads) == [traced.pid]


def test_live_graph_names_each_thread(traced):
    """As a recording's view (trace cat -d) does, the live one names each
    thread beside its tid: its name now, or the one it ended with."""
    out = traced.xp("trace", "cat").stdout
    heads = re.findall(r"^ ------- tid (\d+)(?: \(([^)]*)\))? -------$", out, re.M)
    assert len(heads) == 2 and all(name for _, name in heads), out
    for tid, name in heads:
        try:
            with open(f"/proc/{traced.pid}/task/{tid}/comm") as f:
                assert name == f.read().strip(), out
        except FileNotFoundError:
            pass  # ended: the name its buffer kept


def test_chrome_is_json_with_the_same_calls_nested(traced):
    doc = json.loads(traced.xp("trace", "cat", "--format", "chrome").stdout)
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert all(e["pid"] == traced.pid for e in events)
    count = collections.Counter(e["name"] for e in events)
    assert count == {"handle_run": 1, "worker_main": 1, "work": 2, "mid": 4, "leaf": 8,
                     "fib": 18}
    assert not [e for e in doc["traceEvents"] if e["ph"] in ("B", "E")]
    by_tid = collections.defaultdict(list)
    for e in events:
        by_tid[e["tid"]].append(e)
    eps = 1e-6  # three decimals parsed as floats
    for evs in by_tid.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        ends = []  # of the calls that enclose the current one
        for e in evs:
            while ends and ends[-1] <= e["ts"] + eps:
                ends.pop()
            end = e["ts"] + e["dur"]
            assert not ends or end <= ends[-1] + eps, (e, ends)
            ends.append(end)


def test_folded_stacks_and_self_times(traced):
    threads = graph(traced)
    lines = traced.xp("trace", "cat", "--format", "folded").stdout.splitlines()
    folded = {}
    for line in lines:
        stack, value = line.rsplit(" ", 1)
        assert stack not in folded
        folded[stack] = int(value)
    want, slack = collections.Counter(), collections.Counter()

    def add(node, path):
        path = path + [node.name]
        want[";".join(path)] += node.ns - sum(c.ns for c in node.children)
        slack[";".join(path)] += 1 + len(node.children)
        for c in node.children:
            add(c, path)

    for roots in threads.values():
        for r in roots:
            add(r, [])
    assert set(folded) == set(want)
    for stack, value in folded.items():
        assert near(value, want[stack], slack[stack]), (stack, value, want[stack])
    assert "handle_run;work;fib;fib;fib;fib" in folded
    assert "worker_main;work;mid;leaf" in folded


def parse_stat(text):
    rows = text.splitlines()
    assert rows[0].split() == ["calls", "total(us)", "self(us)", "avg(us)", "max(us)",
                               "function"]
    out = []
    for r in rows[1:]:
        calls, total, self_, avg, mx, name = r.split()
        out.append((name, int(calls), ns_of(total), ns_of(self_), ns_of(avg), ns_of(mx)))
    return out


def test_stat_agrees_with_the_graph(traced):
    threads = graph(traced)
    per = collections.defaultdict(list)
    for n in all_nodes(threads):
        per[n.name].append(n)
    rows = parse_stat(traced.xp("trace", "stat").stdout)
    assert {r[0] for r in rows} == set(per)
    for name, calls, total, self_, avg, mx in rows:
        nodes = per[name]
        children = sum(len(n.children) for n in nodes)
        assert calls == len(nodes), name
        assert near(total, sum(n.ns for n in nodes), calls), name
        assert near(self_, sum(n.ns - sum(c.ns for c in n.children) for n in nodes),
                    calls + children), name
        assert near(mx, max(n.ns for n in nodes), 1), name
        assert avg == total // calls, name
    assert [r[2] for r in rows] == sorted((r[2] for r in rows), reverse=True)  # -s total
    by_calls = parse_stat(traced.xp("trace", "stat", "-s", "calls").stdout)
    assert by_calls[0][:2] == ("fib", 18)
    assert [r[1] for r in by_calls] == sorted((r[1] for r in by_calls), reverse=True)


def test_min_duration_hides_shorter_calls(traced):
    everything = list(all_nodes(graph(traced)))
    # A threshold from the trace itself: above the longest leaf, and not
    # within rounding (see near) of any call, which the second read could
    # put on the other side.
    t = max(n.ns for n in everything if n.name == "leaf") + 3
    while any(near(n.ns, t, 2) for n in everything):
        t += 1
    kept = list(all_nodes(graph(traced, "-t", f"{t // 1000}.{t % 1000:03d}")))
    assert "leaf" not in {n.name for n in kept}
    assert len(kept) == sum(1 for n in everything if n.ns >= t)
    assert all(n.ns >= t for n in kept)


@pytest.mark.parametrize("cc", COMPILERS)
def test_start_selects_functions_by_glob(cc):
    with traced_run(cc, "-F", "fib", "-F", "w*", "-N", "worker_*") as t:
        threads = graph(t)
    assert {n.name for n in all_nodes(threads)} == {"work", "fib"}
    for roots in threads.values():
        assert [shape(r) for r in roots] == [("work", [fib_shape(4)])]


@pytest.mark.parametrize("cc", COMPILERS)
def test_start_passes_depth_and_threads_to_the_agent(cc):
    t = Target(cc)
    try:
        t.xp("trace", "start", "--no-libcall", "-D", "2", "-T", str(t.pid))
        t.run()
        t.xp("trace", "stop")
        threads = graph(t)
    finally:
        t.close()
    assert list(threads) == [t.pid]
    assert [shape(r) for r in threads[t.pid]] == [("handle_run", [("work", [])])]


def test_start_refuses_globs_that_match_nothing():
    t = Target("gcc")
    try:
        r = t.xp("trace", "start", "-F", "no_such_function*", ok=False)
        assert r.returncode == 1
        assert "no traced function matches" in r.stderr
        assert "tracing: off" in t.xp("trace", "status").stdout
    finally:
        t.close()


def test_bad_options_are_refused():
    t = Target("gcc")
    try:
        for args in (["start", "-D", "x"], ["start", "-b", "0"], ["cat", "--format", "svg"],
                     ["stat", "-s", "name"], ["cat", "-t", "1.2345"], ["cat", "extra"]):
            r = t.xp("trace", *args, ok=False)
            assert r.returncode == 1 and r.stderr, args
        r = t.xp("trace", "cat", "--format", "svg", ok=False)
        assert "bad value for --format (graph, chrome or folded): 'svg'" in r.stderr, r.stderr
        # A thread that recorded nothing (here: no such thread) is a failure.
        r = t.xp("trace", "cat", "--tid", "1", ok=False)
        assert r.returncode == 1 and "nothing recorded by that thread" in r.stderr, r.stderr
        assert "tracing: off" in t.xp("trace", "status").stdout
    finally:
        t.close()


@pytest.mark.parametrize("cc", COMPILERS)
def test_trace_a_program_from_start_to_exit(cc, tmp_path):
    out = tmp_path / "graph.txt"
    r = subprocess.run([XPROBES, "trace", "--no-libcall", "--format", "graph", "-o", str(out), "--",
                        prog(cc)],
                       input="run\nquit\n", capture_output=True, text=True, timeout=TIMEOUT,
                       env=env())
    assert r.returncode == 0, r.stderr
    assert "done" in r.stdout
    check_program_graph(out.read_text())


def check_program_graph(text):
    threads = parse_graph(text)
    (main_tid,) = [tid for tid, roots in threads.items() if roots[0].name == "main"]
    assert [shape(r) for r in threads[main_tid]] == [("main", [("handle_run", [WORK])])]
    (worker,) = [tid for tid in threads if tid != main_tid]
    assert [shape(r) for r in threads[worker]] == [("worker_main", [WORK])]
    return threads


@pytest.mark.parametrize("cc", COMPILERS)
def test_record_a_program_then_read_it_back(cc, tmp_path):
    """-o DIR without --format records; `trace cat -d DIR` shows
    the same calls, each thread with its name, with no process around."""
    rec = tmp_path / "rec"
    r = subprocess.run([XPROBES, "trace", "--no-libcall", "-o", str(rec), "--", prog(cc)],
                       input="run\nquit\n",
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    assert re.search(r"trace record: \d+ records of 2 threads in \S+, 0 lost", r.stderr), r.stderr
    cat = subprocess.run([XPROBES, "trace", "cat", "-d", str(rec)], capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert cat.returncode == 0, cat.stderr
    check_program_graph(cat.stdout)
    names = re.findall(r"^ ------- tid \d+ \(([^)]*)\) -------$", cat.stdout, re.M)
    assert len(names) == 2 and all(names), cat.stdout
    bad = subprocess.run([XPROBES, "trace", "cat"], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert bad.returncode == 2 and "-d DIR is needed" in bad.stderr


def test_trace_a_program_in_chrome_format(tmp_path):
    r = subprocess.run([XPROBES, "trace", "-F", "fib", "--format", "chrome", "--", prog("gcc")],
                       input="run\nquit\n", capture_output=True, text=True, timeout=TIMEOUT,
                       env=env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ready ") and "\ndone\n" in r.stdout
    doc = json.loads(r.stdout[r.stdout.index("done\n") + 5:])  # after the program's output
    names = collections.Counter(e["name"] for e in doc["traceEvents"] if e["ph"] == "X")
    assert names == {"fib": 18}


def test_trace_a_program_that_cannot_run():
    r = subprocess.run([XPROBES, "trace", "--", "/nonexistent/prog"], capture_output=True,
                       text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 127
    assert "cannot run /nonexistent/prog" in r.stderr
    assert "did not offer" not in r.stderr  # it never started: nothing else to say


def test_trace_a_program_that_is_not_traced(tmp_path):
    r = subprocess.run([XPROBES, "trace", "--", "/bin/true"], capture_output=True, text=True,
                       timeout=TIMEOUT, env=env())
    assert r.returncode == 1
    assert "did not offer to be traced" in r.stderr
