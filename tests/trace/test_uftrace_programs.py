# SPDX-License-Identifier: MIT
"""uftrace's own test programs, recorded by uftrace and by us.

The programs (tests/s-*.c of Debian's source of the installed uftrace,
GPL: fetched by scripts/fetch-uftrace-tests.sh into a cache outside this
tree, never kept here) are each built twice from the same source with the
same flags but the instrumentation: -pg for `uftrace record`, the trace
flags for `xprobes trace -o DIR --`.  Both directories are read back with
`uftrace replay` and compared as test_trace_libcall.py compares them
(times, tids and -pg's own calls aside), with the options uftrace's own
test of the program (its tests/t*.py) gives.

KNOWN lists the programs whose graph differs for a known limit of ours,
each with a one-line reason and the exact difference, which is asserted:
any other difference fails, and so does none at all (then the entry must
go).

ARGS are uftrace's tests of -A/-R (arguments and return values): they run
once `xprobes trace` takes -A, and are skipped until then.

XPROBES_UFTRACE_TESTS=DIR takes the programs from DIR (a uftrace source
tree's tests/) instead of fetching them.  Every wait is on a process exit."""
import difflib
import functools
import os
import re
import shutil
import subprocess
import warnings

import pytest

from test_trace_libcall import ours, replay, theirs
from tracefix import REPO, TIMEOUT, XPROBES, env, trace_build

UFTRACE = shutil.which("uftrace")
# uftrace's tests build every program with these (tests/runtest.py), at -O0
# to -Os: one level here, the same for both builds.
CFLAGS = ("-O2", "-g", "-fno-inline", "-fno-builtin", "-fno-omit-frame-pointer")

# Programs about library calls: name -> (program arguments, extra link flags,
# `uftrace replay` options of its t*.py).  Each runs in well under a second.
LIBCALL = {
    "abc": ((), (), ()),                  # a() b() c() getpid(): the basic graph
    "getids": ((), (), ()),               # getpid, getppid, getpgid, getsid, getuid, ...
    "openclose": ((), (), ()),            # fopen, fclose
    "mmap": ((), (), ()),                 # open, mmap, mprotect, munmap, close
    "allocfree": ((), (), ()),            # malloc and free five frames deep
    "malloc": ((), (), ()),               # the program's own malloc and free: not library calls
    "float-libcall": ((), ("-lm",), ()),  # expf, log from libm
    "sort": ((), (), ()),                 # usleep
    "signal": ((), (), ()),               # signal, raise running a traced handler
    "thread": ((), ("-pthread",), ()),    # pthread_create of a traced routine, pthread_join
    "exit": ((), (), ()),                 # exit() inside a traced function
    "fork": ((), (), ("--no-merge",)),    # fork, wait; the child's graph
    "longjmp": ((), (), ()),              # setjmp, longjmp out of a traced function
    "longjmp3": ((), (), ()),             # two jmp_bufs, longjmp from two deep
    "vforkexec": (("0",), (), ()),        # vfork, readlink, execl of t-abc
    "forkexec": ((), (), ()),             # fork, execl of t-abc in the child, waitpid
    "ucontext": ((), (), ()),             # getcontext, makecontext, swapcontext to a traced bar
    "thread-tsd": ((), ("-pthread",), ()),  # pthread keys, a traced destructor
    "posix_spawn": ((), (), ()),          # posix_spawn of t-abc and t-openclose, waitpid
    "daemon": ((), (), ()),               # daemon(), then the graph of the daemon
    "variadic": ((), (), ()),             # vsnprintf in a variadic function
}
# Not here: malloc-fork (uftrace 0.13's own record of it does not finish);
# thread-exit (two threads make their first printf and pthread_exit at
# once: under lazy binding a call made while another thread's first call
# of the function is being resolved goes around the hook, uftrace's too).
# What a program execs, built beside it.
EXECS = {"vforkexec": ["abc"], "forkexec": ["abc"], "posix_spawn": ["abc", "openclose"]}

# name -> (why, the difference: "- " lines only uftrace shows, "+ " lines only ours).
LONGJMP = ("longjmp: uftrace closes it by setjmp's second return; we close the calls it left "
           "(the outermost's exit shown, marked)")
KNOWN = {
    "longjmp": (LONGJMP, [
        "- 1 } /* _setjmp */", "+ 2 /* xprobes:exit_not_recorded */", "+ 1 } /* foo */"]),
    "longjmp3": (LONGJMP, [
        "- 1 } /* _setjmp */", "+ 2 /* xprobes:exit_not_recorded */", "+ 1 } /* foo */",
        "- 1 } /* _setjmp */", "+ 2 /* xprobes:exit_not_recorded */", "+ 1 } /* bar */",
        "- 1 } /* _setjmp */", "+ 2 /* xprobes:exit_not_recorded */", "+ 1 } /* foo */",
        "- 1 } /* _setjmp */", "+ 2 /* xprobes:exit_not_recorded */", "+ 1 } /* bar */"]),
    # tsd_dtor's free() is a tail call at -O2 (its t*.py allows both).
    "thread-tsd": ("uftrace loses a library call made by a tail jump, and stops recording a "
                   "thread when its function returns (before its key's destructor runs)", [
        "- 1 tsd_dtor();", "+ 1 tsd_dtor() {", "+ 2 free();", "+ 1 } /* tsd_dtor */",
        "+ 0 tsd_dtor() {", "+ 1 free();", "+ 0 } /* tsd_dtor */"]),
    "posix_spawn": ("a program spawned with an environment of its own is not followed "
                    "(XPROBES_TRACE_FOLLOW is not in it)", [
        "- 0 main() {", "- 1 a() {", "- 2 b() {", "- 3 c() {", "- 4 getpid();", "- 3 } /* c */",
        "- 2 } /* b */", "- 1 } /* a */", "- 0 } /* main */",
        "- 0 main() {", "- 1 fopen();", "- 1 fclose();", "- 0 } /* main */"]),
    # The child's readlink, strrchr, strcpy and execl show as the parent's
    # (uftrace: the child's, between the two returns of vfork); execl then
    # closes with the child's exec, and uftrace replay, which expects no
    # exit of an exec, shows wait at depth 0.
    "vforkexec": ("a vfork child's calls before its exec count as the parent's", [
        "- 1 wait();", "- 0 } /* main */", "- 1 } /* vfork */",
        "+ 0 } /* execl */", "+ 0 wait();", "+ 0 } /* main */"]),
}

# uftrace's tests of arguments and return values: its t*.py's name ->
# (program, its arguments, link flags, `uftrace record` options, ours).
# Ours name functions by glob where uftrace takes a regex (its default
# --match): "^int_" is int_*, "getenv|atoi" two specs; None: the same.
ARGS = {
    "t058_arg_int": ("exp-int", (), (), ("-A", "^int_@arg1,arg2"), ("-A", "int_*@arg1,arg2")),
    "t059_arg_str": ("exp-str", (), (), ("-A", "^str_@arg1/s,arg2/s"),
                     ("-A", "str_*@arg1/s,arg2/s")),
    "t060_arg_fmt": ("exp-int", (), (), ("-A", "int_add@arg1/i32,arg2/u",
                                         "-A", "int_div@arg1/i16,arg2/x8"), None),
    "t061_arg_plt": ("pltarg", ("100",), (), ("-A", "getenv|atoi@arg1/s", "-A", "malloc@arg1"),
                     ("-A", "getenv@arg1/s", "-A", "atoi@arg1/s", "-A", "malloc@arg1")),
    "t062_arg_char": ("exp-char", (), (), ("-A", "foo@arg1/c,arg2/c,arg3/c",
                                           "-A", "bar@arg1/c,arg2/c,arg3/i,arg4/x8"), None),
    "t063_retval": ("exp-int", (), (), ("-A", "^int_@arg1,arg2", "-R", "^int_@retval/i32"),
                    ("-A", "int_*@arg1,arg2", "-R", "int_*@retval/i32")),
    "t065_arg_order": ("exp-int", (), (), ("-A", "int_mul@arg2/x", "-A", "^int_@arg1,arg2",
                                           "-A", "int_add@arg1/i32"),
                       ("-A", "int_mul@arg2/x", "-A", "int_*@arg1,arg2",
                        "-A", "int_add@arg1/i32")),
}
# name -> (why, the difference), as KNOWN.
ARGS_KNOWN = {
}


@pytest.fixture(scope="module")
def uftrace_tests():
    """The tests/ directory of uftrace's source: fetched (cached) by
    scripts/fetch-uftrace-tests.sh, which fails on a machine that cannot
    fetch it, as the memcached tests fail without memcached's source;
    skipped, and said, where the archive answers that it has no such
    files."""
    given = os.environ.get("XPROBES_UFTRACE_TESTS")
    if given:
        return given
    r = subprocess.run([os.path.join(REPO, "scripts", "fetch-uftrace-tests.sh")],
                       capture_output=True, text=True, timeout=900)
    if r.returncode == 3:
        # The archive itself answered that it has no such files: nothing
        # this machine could do about it (XPROBES_UFTRACE_TESTS can help).
        # Said in the warnings summary too, which -q prints.
        warnings.warn(r.stderr.strip())
        pytest.skip(r.stderr.strip())
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def build_both(src_dir, name, out_dir, ldflags):
    """t-NAME twice from uftrace's s-NAME.c: -pg in out_dir/pg, the trace
    flags in out_dir/xp; the file name is the one its t*.py runs."""
    src = os.path.join(src_dir, f"s-{name}.c")
    assert os.path.exists(src), f"{src} is missing: not among uftrace's test programs"
    pg, xp = os.path.join(out_dir, "pg"), os.path.join(out_dir, "xp")
    os.makedirs(pg, exist_ok=True)
    os.makedirs(xp, exist_ok=True)
    # s-*.c include "../utils/...": built from their own directory.
    subprocess.run(["gcc", *CFLAGS, "-pg", "-o", os.path.join(pg, f"t-{name}"), src, *ldflags],
                   check=True, timeout=TIMEOUT, cwd=src_dir, capture_output=True)
    trace_build("gcc", src, os.path.join(xp, f"t-{name}"), cflags=CFLAGS, ldflags=ldflags)
    return os.path.join(pg, f"t-{name}"), os.path.join(xp, f"t-{name}")


def difference(want, got):
    """The lines only uftrace's replay has ("- ") and only ours has ("+ ")."""
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=want, b=got,
                                                      autojunk=False).get_opcodes():
        if op != "equal":
            out += ["- " + line for line in want[i1:i2]] + ["+ " + line for line in got[j1:j2]]
    return out


def compare(name, known, want, got):
    assert "0 main() {" in want, want  # uftrace recorded the program
    diff = difference(want, got)
    if name in known:
        why, expected = known[name]
        assert diff, f"{name} now shows as uftrace shows it: remove its entry ({why})"
        assert diff == expected, "\n".join(diff)
    else:
        assert not diff, "\n".join(diff)


def record_both(monkeypatch, tmp_path, src_dir, program, args, ldflags, replay_opts=(),
                record_opts=(), our_opts=()):
    """Each build recorded in its own directory (a program that execs
    another finds it there, by name as its t*.py runs it)."""
    pg, xp = build_both(src_dir, program, str(tmp_path), ldflags)
    for other in EXECS.get(program, ()):
        build_both(src_dir, other, str(tmp_path), ())
    monkeypatch.chdir(os.path.dirname(pg))
    want = replay(theirs(tmp_path, pg, *args, opts=record_opts), *replay_opts)
    monkeypatch.chdir(os.path.dirname(xp))
    got = replay(ours(tmp_path, xp, *args, opts=("--libcall", *our_opts)), *replay_opts)
    return want, got


@pytest.mark.skipif(not UFTRACE, reason="uftrace is not installed")
@pytest.mark.parametrize("name", sorted(LIBCALL))
def test_library_calls(uftrace_tests, monkeypatch, tmp_path, name):
    args, ldflags, replay_opts = LIBCALL[name]
    want, got = record_both(monkeypatch, tmp_path, uftrace_tests, name, args, ldflags, replay_opts)
    compare(name, KNOWN, want, got)


@functools.lru_cache(maxsize=None)
def has_arguments():
    """Whether `xprobes trace` takes -A: its option parser says (the
    usage lists no trace options)."""
    r = subprocess.run([XPROBES, "trace", "-A", "main@arg1", "--", "/bin/true"],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env())
    return not re.search(r"(invalid|unrecognized) option", r.stderr)


@pytest.mark.skipif(not UFTRACE, reason="uftrace is not installed")
@pytest.mark.parametrize("name", sorted(ARGS))
def test_arguments(uftrace_tests, monkeypatch, tmp_path, name):
    if not has_arguments():
        pytest.skip("xprobes trace has no -A yet")
    program, args, ldflags, record_opts, our_opts = ARGS[name]
    want, got = record_both(monkeypatch, tmp_path, uftrace_tests, program, args, ldflags,
                            record_opts=record_opts,
                            our_opts=record_opts if our_opts is None else our_opts)
    compare(name, ARGS_KNOWN, want, got)
