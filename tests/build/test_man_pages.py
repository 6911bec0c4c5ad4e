# SPDX-License-Identifier: MIT
"""The man pages' footers are the release: every .TH line carries the
version and year of include/xprobes/version.h (scripts/man-version.sh
writes them), and no page lists an option twice."""
import glob
import os
import re
import shlex

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PAGES = sorted(glob.glob(os.path.join(ROOT, "docs", "man", "*.[1-9]")))


def release():
    with open(os.path.join(ROOT, "include", "xprobes", "version.h")) as f:
        text = f.read()
    return (re.search(r'^#define XPROBES_VERSION "(.*)"$', text, re.M).group(1),
            re.search(r'^#define XPROBES_YEAR "(.*)"$', text, re.M).group(1))


def test_every_footer_is_the_release():
    version, year = release()
    assert PAGES
    for page in PAGES:
        with open(page) as f:
            th = shlex.split(f.readline())
        assert th[0] == ".TH" and len(th) == 6, (page, th)
        assert th[3:5] == [year, "XProbes " + version], \
            "%s: %s (run sh scripts/man-version.sh)" % (page, th)


def test_no_option_listed_twice():
    for page in PAGES:
        with open(page) as f:
            lines = f.read().splitlines()
        # An option's entry: .TP, then the line naming it (.B/.BR/.BI).
        heads = [lines[i + 1] for i, line in enumerate(lines[:-1])
                 if line == ".TP" and re.match(r"\.B[RI]? \\-", lines[i + 1])]
        twice = {h for h in heads if heads.count(h) > 1}
        assert not twice, (page, twice)
