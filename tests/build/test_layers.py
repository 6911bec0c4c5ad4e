# SPDX-License-Identifier: MIT
"""scripts/check-layers.py, which `make check` runs over build/lib (and
build/tools): it must fail on a reference that goes up a layer, on a cycle,
and on an object in no layer, and pass a declared assembler/C pair.  Real
objects, compiled here; the check reads their symbol tables with nm."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "scripts", "check-layers.py")


def build(tmp_path, sources):
    top = tmp_path / "objs"
    for rel, code in sources.items():
        src = tmp_path / (rel.replace("/", "_") + ".c")
        src.write_text(code)
        obj = top / rel
        obj.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cc", "-c", "-o", str(obj), str(src)], check=True)
    return str(top)


def check(top, tmp_path, layers):
    f = tmp_path / "LAYERS"
    f.write_text(layers)
    return subprocess.run([sys.executable, CHECK, top, str(f)], capture_output=True, text=True)


LOW = "int low(void) { return 1; }\n"
HIGH = "int low(void);\nint high(void) { return low() + 1; }\n"


def test_references_down_pass(tmp_path):
    top = build(tmp_path, {"base/low.o": LOW, "top/high.o": HIGH})
    r = check(top, tmp_path, "base/*.o\ntop/*.o\n")
    assert r.returncode == 0, r.stderr
    assert "no reference up, no cycle" in r.stdout


def test_a_reference_up_fails(tmp_path):
    top = build(tmp_path, {"base/low.o": LOW, "top/high.o": HIGH})
    r = check(top, tmp_path, "top/*.o\nbase/*.o\n")
    assert r.returncode == 1
    assert "top/high.o uses base/low.o, a higher layer: low" in r.stderr


def test_a_cycle_fails_unless_declared_a_pair(tmp_path):
    top = build(tmp_path, {"x/a.o": "int b(void);\nint a(void) { return b(); }\n",
                           "x/b.o": "int a(void);\nint b(void) { return a(); }\n"})
    r = check(top, tmp_path, "x/*.o\n")
    assert r.returncode == 1
    assert "cycle of 2 objects: x/a.o -> x/b.o: b; x/b.o -> x/a.o: a" in r.stderr
    assert check(top, tmp_path, "x/*.o\n# pair: x/a.o x/b.o\n").returncode == 0


def test_an_object_in_no_layer_fails(tmp_path):
    top = build(tmp_path, {"base/low.o": LOW, "stray/high.o": HIGH})
    r = check(top, tmp_path, "base/*.o\n")
    assert r.returncode == 1
    assert "stray/high.o belongs to no layer" in r.stderr


def test_the_tree_keeps_to_its_layers():
    """The agent itself, as built: what `make check` runs."""
    build_dir = os.environ.get("XPROBES_BUILD") or os.path.join(ROOT, "build")
    for part in ("lib", "tools"):
        layers = os.path.join(ROOT, part, "LAYERS")
        if os.path.exists(layers):
            r = subprocess.run([sys.executable, CHECK, os.path.join(build_dir, part), layers],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
