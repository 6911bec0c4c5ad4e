#!/bin/sh
# SPDX-License-Identifier: MIT
# Build Debian's memcached source, unmodified, outside the repository.
#
#   scripts/build-memcached.sh VARIANT [DTRACE]
#
# VARIANT: xprobes  ./configure --enable-dtrace DTRACE=<xprobes-dtrace>
#          stap     ./configure --enable-dtrace DTRACE=/usr/bin/dtrace (systemtap stub)
#          plain    ./configure (no dtrace)
#          traced BUILD [count]  for the tracer, BUILD being our build
#                   directory: built as `pkg-config xprobes-trace` builds a
#                   program; with count, also -finstrument-functions and
#                   tests/trace/callcount.c (the tracer's tests)
#          traced-xprobes BUILD  both: the sites of xprobes (BUILD's
#                   xprobes-dtrace) and the tracer's flags, for mclat --slow
# and no other configure argument or change.  (The header xprobes-dtrace
# generates names the site.h next to it by absolute path, so the build
# needs no -I of ours.)
#
# Prints the path of the built memcached binary on stdout.  Builds are cached
# under $XPROBES_CACHE (default /var/cache/xprobes), keyed by everything that
# goes into them: this script, the source tree's name and, for the dtrace
# variants, the dtrace program and the XProbes headers its output includes.
# A second run costs nothing; a change to any of those builds anew.  Only Debian's archive is used: the deb-src entry is a copy of the
# machine's own Debian entry.
set -eu

variant=${1:?usage: build-memcached.sh xprobes|stap|plain|traced|traced-xprobes [DTRACE|BUILD]}
CACHE=${XPROBES_CACHE:-/var/cache/xprobes}
mkdir -p "$CACHE"
log="$CACHE/build-memcached.log"
self=$(realpath "$0")

need_source() {
    if ls "$CACHE"/src/memcached-*/configure >/dev/null 2>&1; then
        return
    fi
    if ! apt-get source --help >/dev/null 2>&1 || [ "$(id -u)" -ne 0 ]; then
        echo "build-memcached: need root and apt to fetch Debian's memcached source" >&2
        exit 1
    fi
    src=/etc/apt/sources.list.d/xprobes-deb-src.sources
    if [ ! -f "$src" ] && [ -f /etc/apt/sources.list.d/debian.sources ]; then
        sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$src"
    elif [ ! -f "$src" ] && [ -f /etc/apt/sources.list ]; then
        grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' >"$src.list.tmp"
        mv "$src.list.tmp" /etc/apt/sources.list.d/xprobes-deb-src.list
    fi
    apt-get update -qq >>"$log" 2>&1
    fetch=$(mktemp -d "$CACHE/src.tmp.XXXXXX")
    (cd "$fetch" && apt-get source -qq memcached >>"$log" 2>&1) ||
        { rm -rf "$fetch"; echo "build-memcached: apt-get source failed; see $log" >&2; exit 1; }
    # Another run may have fetched it meanwhile: keep the first.
    mv -T "$fetch" "$CACHE/src" 2>/dev/null || rm -rf "$fetch"
}

need_source
srcdir=$(ls -d "$CACHE"/src/memcached-*/ | head -n 1)
srcdir=${srcdir%/}

case "$variant" in
xprobes)
    dtrace=${2:?xprobes variant needs the path of xprobes-dtrace}
    dtrace=$(realpath "$dtrace")
    # The site.h the generated header includes: the one next to the
    # program (bin/../include), else the installed <xprobes/site.h>.
    inc=$(realpath "$(dirname "$dtrace")/../include" 2>/dev/null || true)
    key=$({ echo "$inc"; cat "$dtrace"; cat "$inc"/xprobes/*.h 2>/dev/null || true; } |
          sha256sum | cut -c1-16)
    set -- --enable-dtrace "DTRACE=$dtrace"
    ;;
stap)
    key=$(sha256sum </usr/bin/dtrace | cut -c1-16)
    set -- --enable-dtrace DTRACE=/usr/bin/dtrace
    ;;
plain)
    key=none
    set --
    ;;
traced)
    # For the tracer: memcached built as pkg-config xprobes-trace builds a
    # program (-fpatchable-function-entry=5, the static archive, -lxprobes
    # from BUILD).  With "count" (its tests) also -finstrument-functions
    # and tests/trace/callcount.c, which counts every call independently.
    build=$(realpath "${2:?traced variant needs the build directory}")
    count=${3:-}
    here=$(cd "$(dirname "$self")/.." && pwd)
    key=$({ echo "$build $count"; cat "$build/libxprobes_trace.a" "$here/tests/trace/callcount.c"; } | sha256sum | cut -c1-16)
    cflags="-O2 -g -fpatchable-function-entry=5"
    libs="-Wl,-u,__xprobes_trace_anchor $build/libxprobes_trace.a -L$build -Wl,-rpath,$build -Wl,--no-as-needed -lxprobes"
    if [ "$count" = count ]; then
        # The counter itself is neither instrumented nor traced.
        counter="$CACHE/callcount-$key.o"
        [ -f "$counter" ] || cc -O2 -c -o "$counter" "$here/tests/trace/callcount.c"
        # No inlining: an inlined copy counts its call but runs no patch site
        # (murmur3_hash.c and xxhash.h force some inline: not counted).
        cflags="$cflags -fno-inline -fno-partial-inlining -finstrument-functions -finstrument-functions-exclude-file-list=/usr/include,xxhash.h -finstrument-functions-exclude-function-list=fmix32,getblock32"
        libs="$counter $libs"
    fi
    variant=traced$count
    set -- "CFLAGS=$cflags" "LIBS=$libs"
    ;;
traced-xprobes)
    # The traced build's flags, and probe sites from BUILD's xprobes-dtrace
    # (the xprobes variant's): the function graph of a request and the
    # sites where it starts and ends.
    build=$(realpath "${2:?traced-xprobes variant needs the build directory}")
    dtrace="$build/xprobes-dtrace"
    inc=$(realpath "$(dirname "$self")/../include")
    key=$({ echo "$build"; cat "$build/libxprobes_trace.a" "$dtrace" "$inc"/xprobes/*.h; } |
          sha256sum | cut -c1-16)
    set -- --enable-dtrace "DTRACE=$dtrace" "CFLAGS=-O2 -g -fpatchable-function-entry=5" \
        "LIBS=-Wl,-u,__xprobes_trace_anchor $build/libxprobes_trace.a -L$build -Wl,-rpath,$build -Wl,--no-as-needed -lxprobes"
    ;;
*)
    echo "build-memcached: unknown variant '$variant' (xprobes, stap, plain, traced or traced-xprobes)" >&2
    exit 2
    ;;
esac
key=$({ cat "$self"; echo "$variant $key ${srcdir##*/}"; } | sha256sum | cut -c1-16)

out="$CACHE/memcached-$variant-$key"
# Built in place, where it is used: absolute paths recorded by the build
# (memcached-debug's gcov data files, for one) stay valid.  A lock keeps
# concurrent runs from building the same tree twice; .built marks a
# finished build (a killed run leaves none, and the next run starts over).
if [ ! -f "$out/.built" ]; then
    exec 9>"$out.lock"
    flock 9
    if [ ! -f "$out/.built" ]; then
        rm -rf "$out"
        cp -a "$srcdir" "$out"
        (
            cd "$out"
            ./configure "$@" >>"$log" 2>&1
            make -j"$(nproc)" >>"$log" 2>&1
        ) || { echo "build-memcached: $variant build failed; see $log" >&2; exit 1; }
        touch "$out/.built"
    fi
    exec 9>&-
fi
echo "$out/memcached"
