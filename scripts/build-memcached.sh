#!/bin/sh
# Build Debian's memcached source, unmodified, outside the repository.
#
#   scripts/build-memcached.sh VARIANT [DTRACE]
#
# VARIANT: xprobes  ./configure --enable-dtrace DTRACE=<xprobes-dtrace>
#          stap     ./configure --enable-dtrace DTRACE=/usr/bin/dtrace (systemtap stub)
#          plain    ./configure (no dtrace)
# Prints the path of the built memcached binary on stdout.  Builds are cached
# under $XPROBES_CACHE (default /var/cache/xprobes), keyed by the inputs, so
# a second run costs nothing.  Only Debian's archive is used: the deb-src
# entry is a copy of the machine's own Debian entry.
set -eu

variant=${1:?usage: build-memcached.sh xprobes|stap|plain [DTRACE]}
CACHE=${XPROBES_CACHE:-/var/cache/xprobes}
mkdir -p "$CACHE"
log="$CACHE/build-memcached.log"

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
    mkdir -p "$CACHE/src"
    (cd "$CACHE/src" && apt-get source -qq memcached >>"$log" 2>&1)
}

need_source
srcdir=$(ls -d "$CACHE"/src/memcached-*/ | head -n 1)
srcdir=${srcdir%/}

case "$variant" in
xprobes)
    dtrace=${2:?xprobes variant needs the path of xprobes-dtrace}
    dtrace=$(realpath "$dtrace")
    root=$(cd "$(dirname "$0")/.." && pwd)
    key=$(cat "$dtrace" "$root"/include/xprobes/*.h | sha256sum | cut -c1-16)
    conf="--enable-dtrace DTRACE=$dtrace"
    # The generated header includes <xprobes/site.h>.
    cppflags="-I$root/include"
    ;;
stap)
    key=stap
    conf="--enable-dtrace DTRACE=/usr/bin/dtrace"
    cppflags=""
    ;;
plain)
    key=plain
    conf=""
    cppflags=""
    ;;
*)
    echo "build-memcached: unknown variant '$variant' (xprobes, stap or plain)" >&2
    exit 2
    ;;
esac

out="$CACHE/memcached-$variant-$key"
if [ ! -x "$out/memcached" ]; then
    rm -rf "$out.tmp"
    cp -a "$srcdir" "$out.tmp"
    (
        cd "$out.tmp"
        # shellcheck disable=SC2086
        ./configure CPPFLAGS="$cppflags" $conf >>"$log" 2>&1
        make -j"$(nproc)" >>"$log" 2>&1
    ) || { echo "build-memcached: $variant build failed; see $log" >&2; exit 1; }
    rm -rf "$out"
    mv "$out.tmp" "$out"
fi
echo "$out/memcached"
