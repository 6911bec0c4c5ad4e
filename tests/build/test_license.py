# SPDX-License-Identifier: MIT
"""The license: LICENSE is MIT's text for The XProbes authors, every
source file carries its SPDX line (scripts/spdx.py --check: the script
that adds them), debian/copyright is machine-readable (DEP-5) and names
the same license, and the built BPF object declares "Dual MIT/GPL", which
the kernel counts as GPL-compatible for its GPL-only helpers."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XPROBES_BUILD", os.path.join(ROOT, "build"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import spdx  # noqa: E402  (scripts/spdx.py)


def test_license_file_is_mit():
    with open(os.path.join(ROOT, "LICENSE")) as f:
        text = f.read()
    assert text.startswith("MIT License\n\nCopyright (c) 2026 The XProbes authors\n"), text[:80]
    assert "Permission is hereby granted, free of charge" in text


def test_every_source_file_has_the_spdx_line():
    files = dict(spdx.sources())
    # The selection is the tree's sources, not an empty list that passes.
    for path in ("Makefile", "lib/agent/agent.c", "include/xprobes/site.h", "debian/rules",
                 "scripts/demo.sh", "tests/tests.mk", "bench/mclat_stages.bt"):
        assert path in files, path
    assert "docs/man/xprobes.1" not in files and "LICENSE" not in files
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "spdx.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, "run python3 scripts/spdx.py:\n" + r.stdout
    for path in files:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            head = [f.readline() for _ in range(2)]
        line = head[1] if head[0].startswith("#!") else head[0]
        allowed = ["MIT", "MIT OR GPL-2.0-only"] if path.endswith(".bpf.c") else ["MIT"]
        assert line.strip() in [files[path].strip().replace(" MIT", " " + a) for a in allowed], \
            (path, line)


def test_debian_copyright_is_dep5_and_mit():
    with open(os.path.join(ROOT, "debian", "copyright")) as f:
        text = f.read()
    stanzas = [s for s in text.split("\n\n") if s.strip()]
    assert stanzas[0].startswith(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n")
    files = [s for s in stanzas if s.startswith("Files: ")]
    assert files[0].splitlines()[:3] == ["Files: *", "Copyright: 2026 The XProbes authors",
                                         "License: Expat"], files[0]
    licenses = {s.splitlines()[0] for s in stanzas if s.startswith("License: ")}
    assert {"License: Expat", "License: GPL-2"} <= licenses
    for s in stanzas:  # every field line "Name: value" or a continuation
        for line in s.splitlines():
            assert line.startswith(" ") or ":" in line.split(" ")[0], line


def test_bpf_object_declares_dual_mit_gpl():
    obj = os.path.join(BUILD, "bpf", "mclat.bpf.o")
    if not os.path.exists(obj):
        pytest.skip("no BPF object in this build")
    r = subprocess.run(["readelf", "-p", "license", obj], capture_output=True, text=True,
                       check=True)
    assert "Dual MIT/GPL" in r.stdout, r.stdout
