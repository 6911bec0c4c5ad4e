#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check that a build's objects keep to their layers.

    scripts/check-layers.py build/lib lib/LAYERS

An object uses another when it leaves a symbol undefined (nm -u) that the
other defines (nm --defined-only -g): a call, or a use of its data.  That
is what the linker resolves, so it is what the code really does; headers
and inline functions leave no trace.  LAYERS names the layers, lowest
first, one line each of glob patterns for object paths under the build
folder; `#` starts a comment, and a comment `# pair: a.o b.o` lets two
objects of one layer refer to each other (an assembler trampoline and the
C it calls).  Fails (exit 1), naming the objects and symbols, when an
object uses one of a higher layer, when objects form a cycle, or when an
object belongs to no layer.  Exit 2 on a usage error."""
import fnmatch
import os
import subprocess
import sys


def read_layers(path):
    layers, pairs = [], set()
    with open(path) as f:
        for line in f:
            text = line.strip()
            if text.startswith("# pair:"):
                objs = text[len("# pair:"):].split()
                if len(objs) != 2:
                    sys.exit(f"check-layers: {path}: a pair names two objects: {text}")
                pairs.add(frozenset(objs))
            elif text and not text.startswith("#"):
                layers.append(text.split())
    return layers, pairs


def nm(args, path):
    r = subprocess.run(["nm", *args, path], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"check-layers: nm {path}: {r.stderr.strip()}")
    return {line.split()[-1] for line in r.stdout.splitlines() if line.split()}


def uses(top):
    objs = {}
    for d, _, files in os.walk(top):
        for f in files:
            if f.endswith(".o"):
                p = os.path.join(d, f)
                objs[os.path.relpath(p, top)] = p
    owner = {}
    for name, p in objs.items():
        for sym in nm(["--defined-only", "-g"], p):
            owner.setdefault(sym, name)
    edges = {name: {} for name in objs}
    for name, p in objs.items():
        for sym in nm(["-u"], p):
            dst = owner.get(sym)
            if dst and dst != name:
                edges[name].setdefault(dst, []).append(sym)
    return edges


def cycles(edges):
    """Strongly connected components of more than one object (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    top, layers_file = argv[1], argv[2]
    if not os.path.isdir(top):
        print(f"check-layers: {top}: no such build folder (run make first)", file=sys.stderr)
        return 2
    layers, pairs = read_layers(layers_file)
    edges = uses(top)
    level, problems = {}, []
    for name in edges:
        for i, pats in enumerate(layers):
            if any(fnmatch.fnmatch(name, p) for p in pats):
                level[name] = i
                break
        else:
            problems.append(f"{name} belongs to no layer of {layers_file}")
    for src in sorted(edges):
        for dst, syms in sorted(edges[src].items()):
            if src in level and dst in level and level[dst] > level[src]:
                problems.append(f"{src} uses {dst}, a higher layer: {', '.join(sorted(syms)[:4])}")
    for comp in cycles(edges):
        if len(comp) == 2 and frozenset(comp) in pairs:
            continue
        detail = "; ".join(f"{a} -> {b}: {', '.join(sorted(edges[a][b])[:3])}"
                           for a in comp for b in comp if b in edges[a])
        problems.append(f"cycle of {len(comp)} objects: {detail}")
    for p in problems:
        print(f"check-layers: {top}: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"check-layers: {top}: {len(edges)} objects in {len(layers)} layers, "
          f"no reference up, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
