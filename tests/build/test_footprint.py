# SPDX-License-Identifier: MIT
"""What a detached site costs the function around it, read off the machine
code: a site must not add callee-saved register saves to its function's
prologue (tests/build/footprint.c says why).  Fails if the dispatch keeps
its list, arguments or reader in registers across a handler call, as it
once did (4 extra pushes and pops per call of memcached's conn_set_state)."""
import os
import re
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SRC = os.path.join(HERE, "footprint.c")


def pushes(cc, opt, variant, tmp_path):
    obj = str(tmp_path / ("%s%s%s.o" % (cc, opt, variant)))
    flags = ["-std=gnu11", "-Wall", "-Wextra", "-Werror", opt, "-fPIC", "-c",
             "-I" + os.path.join(ROOT, "include")]
    if variant:
        flags.append("-D" + variant)
    subprocess.run([cc, *flags, "-o", obj, SRC], check=True)
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj], check=True,
                         capture_output=True, text=True).stdout
    body = dis.split("<set_state>:", 1)[1]
    return len(re.findall(r"\tpush\s", body))


@pytest.mark.parametrize("cc", ["gcc", "clang"])
@pytest.mark.parametrize("opt", ["-O1", "-O2", "-O3", "-Os"])
def test_site_adds_no_register_saves(cc, opt, tmp_path):
    without = pushes(cc, opt, "", tmp_path)
    with_site = pushes(cc, opt, "WITH_SITE", tmp_path)
    with_sdt = pushes(cc, opt, "WITH_SDT", tmp_path)
    assert with_site <= max(without, with_sdt), (
        "%s %s: set_state() pushes %d registers with a site, %d without a probe, "
        "%d with a sys/sdt.h probe" % (cc, opt, with_site, without, with_sdt))
