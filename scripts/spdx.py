#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The SPDX line at the head of every source file of the tree (LICENSE:
MIT), in the file's own comment syntax, after a #! line if there is one.

    python3 scripts/spdx.py           add the line where it is missing
    python3 scripts/spdx.py --check   list the files without it; exit 1 if any

Source files: the tracked C, C++, assembler, header, Python, shell, make
(Makefile, *.mk, debian/rules), bpftrace (.bt) and DTrace provider (.d)
files, outside dot-directories.  Data (fuzz corpora, man pages, docs,
.pc.in templates, the linker map) is left alone.  A file that already
names a license (an SPDX line in its first lines: the BPF programs are
MIT OR GPL-2.0-only) is kept as it is."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLASH_STAR = {".c", ".h", ".cc", ".S", ".bt", ".d"}
HASH = {".py", ".sh", ".mk"}
HASH_NAMES = {"Makefile", "debian/rules"}
TAG = "SPDX-License-Identifier:"


def tracked(root):
    """The tree's files, relative: git's list in a checkout, else a walk
    that skips build directories."""
    if os.path.isdir(os.path.join(root, ".git")) or os.path.isfile(os.path.join(root, ".git")):
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             capture_output=True).stdout.decode()
        return sorted(p for p in out.split("\0") if p)
    found = []
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs if not x.startswith(".") and
                   not (rel == "." and (x == "build" or x.startswith("build-")))]
        found += [os.path.normpath(os.path.join(rel, f)) for f in files]
    return sorted(found)


def header(path):
    """The SPDX line for path, or None when it is not a source file."""
    if any(part.startswith(".") for part in path.split("/")):
        return None
    ext = os.path.splitext(path)[1]
    if ext in SLASH_STAR:
        return "/* %s MIT */\n" % TAG
    if ext in HASH or path in HASH_NAMES or os.path.basename(path) == "Makefile":
        return "# %s MIT\n" % TAG
    return None


def sources(root=ROOT):
    return [(p, h) for p in tracked(root) for h in [header(p)] if h]


def has_tag(lines):
    return any(TAG in line for line in lines[:3])


def main(argv):
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        print("usage: spdx.py [--check]", file=sys.stderr)
        return 2
    missing = []
    for path, line in sources():
        full = os.path.join(ROOT, path)
        with open(full, encoding="utf-8", newline="") as f:
            lines = f.readlines()
        if has_tag(lines):
            continue
        missing.append(path)
        if not check:
            at = 1 if lines and lines[0].startswith("#!") else 0
            lines.insert(at, line)
            with open(full, "w", encoding="utf-8", newline="") as f:
                f.writelines(lines)
    for path in missing:
        print(("no SPDX line: " if check else "added: ") + path)
    return 1 if check and missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
