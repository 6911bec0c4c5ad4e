#!/bin/sh
# SPDX-License-Identifier: MIT
# Writes the release and its year from include/xprobes/version.h into the
# .TH line of every man page in docs/man (the footer man shows), so that
# they are one: `sh scripts/man-version.sh` after changing the release;
# tests/build/test_man_pages.py fails until it has run.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
h="$root/include/xprobes/version.h"
version=$(sed -n 's/^#define XPROBES_VERSION "\(.*\)"/\1/p' "$h")
year=$(sed -n 's/^#define XPROBES_YEAR "\(.*\)"/\1/p' "$h")
if [ -z "$version" ] || [ -z "$year" ]; then
    echo "man-version: no XPROBES_VERSION or XPROBES_YEAR in $h" >&2
    exit 1
fi
for page in "$root"/docs/man/*.[1-9]; do
    # .TH NAME SECTION "DATE" "SOURCE" "MANUAL": DATE and SOURCE replaced.
    sed -i -E "1s/^(\\.TH [^ ]+ [0-9]) \"[^\"]*\" \"[^\"]*\"/\\1 \"$year\" \"XProbes $version\"/" "$page"
done
