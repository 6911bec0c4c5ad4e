# SPDX-License-Identifier: MIT
"""Every command the README shows works, as shown, after `make`.

Each code block of README.md with command lines (`$ ...`) is marked on
the line before it:

    <!-- readme-test: run -->          run here, after make
    <!-- readme-test: needs: WHAT -->  needs what a test cannot give it as
                                       shown (a running target's pid, root,
                                       another source tree): not run

A block without a mark fails, so a new command is classified when it is
written.  A `run` block runs as one bash script, from a directory holding
the tree's top level (symlinks) with this build as build/, so that what
the commands write stays out of the tree; in a network namespace of its
own, so that the example server's fixed port is free.  A command ending
in `&` runs in the background until the block ends, and the next command
waits until it has printed something (the shown output's first line).
Separately: a program built against build/ with the README's pkg-config
lines, before any install."""
import os
import re
import shutil
import subprocess

import pytest

from installed_use import build_run_attach

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
MARK = re.compile(r"^<!-- readme-test: (run|needs: .+) -->$")


def blocks():
    """[(mark or None, [command...], first line number)] of the README's
    fenced blocks that hold commands."""
    with open(os.path.join(ROOT, "README.md")) as f:
        lines = f.read().splitlines()
    found, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        start, body = i, []
        i += 1
        while not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        cmds = [line[2:] for line in body if line.startswith("$ ")]
        if cmds:
            m = MARK.match(lines[start - 1]) if start else None
            found.append((m.group(1) if m else None, cmds, start + 1))
    return found


BLOCKS = blocks()
RUN = [(cmds, line) for mark, cmds, line in BLOCKS if mark == "run"]
BACKGROUND = re.compile(r"^(.*[^&])&\s*(#.*)?$")


def test_every_command_block_is_marked():
    unmarked = [line for mark, _, line in BLOCKS if mark is None]
    assert not unmarked, "README.md: code blocks with commands and no readme-test mark " \
        "on the line before, at lines %s" % unmarked
    assert RUN, "no README block is marked to run"


def script(cmds):
    out = ["set -e",
           "trap 'rc=$?; set +e; kill $(jobs -p) 2>/dev/null; wait; exit $rc' EXIT"]
    for n, cmd in enumerate(cmds):
        bg = BACKGROUND.match(cmd)
        if bg:
            # Started, then waited for until it has printed (a poll with a
            # deadline, which only catches a hang).
            log = ".readme-bg%d" % n
            out += ["{ %s ; } > %s 2>&1 &" % (bg.group(1), log),
                    "for _ in $(seq 1200); do [ -s %s ] && break; sleep 0.05; done" % log,
                    "cat %s; [ -s %s ]" % (log, log)]
        else:
            out.append(cmd)
    return "\n".join(out) + "\n"


def tree_copy(tmp_path):
    """A directory that looks like the tree after make: its top level as
    symlinks, build/ this build."""
    top = tmp_path / "tree"
    top.mkdir()
    for name in os.listdir(ROOT):
        if name not in ("build", ".git"):
            os.symlink(os.path.join(ROOT, name), top / name)
    os.symlink(os.path.abspath(BUILD), top / "build")
    return top


@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare")
@pytest.mark.parametrize("cmds,line", RUN, ids=["line%d" % line for _, line in RUN])
def test_readme_block_runs(cmds, line, tmp_path):
    top = tree_copy(tmp_path)
    (top / ".readme.sh").write_text(script(cmds))
    net = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "-rn"]
    env = {k: v for k, v in os.environ.items() if k not in ("PKG_CONFIG_PATH", "LD_LIBRARY_PATH")}
    r = subprocess.run([*net, "--", "sh", "-c", "ip link set lo up && exec bash .readme.sh"],
                       cwd=top, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, "README.md line %d: %s\n%s%s" % (line, cmds, r.stdout[-3000:],
                                                               r.stderr[-3000:])


def test_run_blocks_use_only_what_make_builds(tmp_path):
    """What a `run` block takes from build/ is made by a plain `make` (the
    test above runs them on a build that has had `make check`'s fixtures
    too): make's dry run into an empty build directory lists it."""
    empty = str(tmp_path / "empty-build")
    dry = subprocess.run(["make", "-s", "-n", "-C", ROOT, "B=" + empty, "all"],
                         capture_output=True, text=True, check=True).stdout
    for cmds, line in RUN:
        for rel in re.findall(r"(?<![\w/$])build/([\w./-]+)", " ".join(cmds)):
            assert re.search(re.escape(empty + "/" + rel) + r"(?=\s|'|$)", dry, re.M), \
                "README.md line %d: build/%s is not made by `make`" % (line, rel)


def readme_text():
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read()


def test_pkg_config_of_the_build_tree(tmp_path):
    """The README's pkg-config lines with PKG_CONFIG_PATH=build, before any
    install: the tree's uninstalled .pc files, no placeholder left, a
    program built with them runs in place and xprobes attaches to it; a
    program built with xprobes-trace is recorded."""
    text = readme_text()
    assert "`$(pkg-config --cflags --libs xprobes)`" in text
    assert "pkg-config --cflags --libs xprobes-trace" in text
    assert "PKG_CONFIG_PATH=$PWD/build" in text
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH",)}
    env["PKG_CONFIG_PATH"] = os.path.abspath(BUILD)
    for pc in ("xprobes", "xprobes-trace"):
        for name in (pc + ".pc", pc + "-uninstalled.pc"):
            with open(os.path.join(BUILD, name)) as f:
                assert "@" not in f.read(), name
        libdir = subprocess.run(["pkg-config", "--variable=libdir", pc], env=env, check=True,
                                capture_output=True, text=True).stdout.strip()
        assert libdir == os.path.abspath(BUILD), pc
    build_run_attach(tmp_path, os.path.join(BUILD, "xprobes"), env)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "xprobes-trace"], env=env,
                           check=True, capture_output=True, text=True).stdout.split()
    fib = tmp_path / "fib"
    subprocess.run(["cc", "-O2", "-o", str(fib), os.path.join(ROOT, "bench", "fib.c"), *flags],
                   check=True)
    r = subprocess.run([os.path.join(BUILD, "xprobes"), "trace", "-o", str(tmp_path / "fib.d"),
                        "--", str(fib), "12"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and re.search(r"records of 1 thread in .*, 0 lost", r.stderr), \
        r.stderr
