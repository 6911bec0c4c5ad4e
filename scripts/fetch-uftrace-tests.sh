#!/bin/sh
# SPDX-License-Identifier: MIT
# Fetch Debian's source of the installed uftrace, unmodified, outside the
# repository, for its test programs (tests/s-*.c, GPL: never copied into
# this tree).  tests/trace/test_uftrace_programs.py builds and records them.
#
#   scripts/fetch-uftrace-tests.sh
#
# Prints the source tree's tests/ directory on stdout.  Cached under
# $XPROBES_CACHE (default /var/cache/xprobes) as uftrace-src-VERSION: a
# second run costs nothing.  The version is the installed package's
# (dpkg), so the programs are the ones that uftrace's own tests ran.
# Only Debian's archive is used: the deb-src entry is a copy of the
# machine's own Debian entry, as build-memcached.sh makes it.
#
# Exit status: 0 fetched (or cached); 1 this machine cannot fetch it (not
# root, no apt-get, uftrace not installed from a Debian package); 3 the
# archive answered that it does not have the files (404), so the fetch
# is impossible from here whatever the machine does.
set -eu

CACHE=${XPROBES_CACHE:-/var/cache/xprobes}
me=fetch-uftrace-tests

version=$(dpkg-query -W -f='${source:Version}' uftrace 2>/dev/null || true)
if [ -z "$version" ]; then
    echo "$me: uftrace is not installed from a Debian package (dpkg-query knows no uftrace)" >&2
    exit 1
fi
out="$CACHE/uftrace-src-$version"
if [ -f "$out/.fetched" ]; then
    ls -d "$out"/uftrace-*/tests
    exit 0
fi
if ! apt-get source --help >/dev/null 2>&1 || [ "$(id -u)" -ne 0 ]; then
    echo "$me: need root and apt-get to fetch Debian's uftrace $version source" >&2
    exit 1
fi
mkdir -p "$CACHE"
log="$CACHE/$me.log"
src=/etc/apt/sources.list.d/xprobes-deb-src.sources
if [ ! -f "$src" ] && [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$src"
    apt-get update -qq >>"$log" 2>&1
elif [ ! -f "$src" ] && [ ! -f "${src%.sources}.list" ] && [ -f /etc/apt/sources.list ]; then
    grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' >"${src%.sources}.list"
    apt-get update -qq >>"$log" 2>&1
fi
if ! apt-cache showsrc uftrace 2>/dev/null | grep -qx "Version: $version"; then
    apt-get update -qq >>"$log" 2>&1 || true
fi
fetch=$(mktemp -d "$CACHE/uftrace-src.tmp.XXXXXX")
if ! (cd "$fetch" && apt-get source -qq "uftrace=$version" >"$fetch.out" 2>&1); then
    cat "$fetch.out" >>"$log"
    if grep -q ' 404 ' "$fetch.out"; then
        echo "$me: Debian's archive, as this machine reaches it, does not serve uftrace $version's source (404); see $log" >&2
        rc=3
    else
        echo "$me: apt-get source uftrace=$version failed; see $log" >&2
        rc=1
    fi
    rm -rf "$fetch" "$fetch.out"
    exit $rc
fi
rm -f "$fetch.out"
if ! ls -d "$fetch"/uftrace-*/tests >/dev/null 2>&1; then
    rm -rf "$fetch"
    echo "$me: Debian's uftrace $version source has no tests/ directory" >&2
    exit 1
fi
touch "$fetch/.fetched"
# Another run may have fetched it meanwhile: keep the first.
mv -T "$fetch" "$out" 2>/dev/null || rm -rf "$fetch"
ls -d "$out"/uftrace-*/tests
