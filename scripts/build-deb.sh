#!/bin/sh
# SPDX-License-Identifier: MIT
# Build XProbes' Debian packages (debian/) with dpkg-buildpackage and check
# them with lintian.  Usage: scripts/build-deb.sh [OUTDIR]   (default build/deb)
#
# The build runs in a copy of the tree, OUTDIR/xprobes-VERSION, so that
# nothing it makes lands in the source tree (dpkg-buildpackage writes into
# debian/ and puts the .deb files next to the directory it builds).  The
# copy gets a debian/changelog written here from include/xprobes/version.h,
# so the packages' version has one source.  Fails if lintian finds errors.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build/deb}

version=$(sed -n 's/^#define XPROBES_VERSION "\(.*\)"/\1/p' "$root/include/xprobes/version.h")
if [ -z "$version" ]; then
    echo "build-deb: no XPROBES_VERSION in include/xprobes/version.h" >&2
    exit 1
fi
maintainer=$(sed -n 's/^Maintainer: //p' "$root/debian/control")

mkdir -p "$out"
out=$(cd "$out" && pwd)
src="$out/xprobes-$version"
rm -rf "$src"
rm -f "$out"/*.deb "$out"/*.ddeb "$out"/*.changes "$out"/*.buildinfo
mkdir "$src"

# The tree's own files: what git tracks or would (not build output, which
# .gitignore names); without git, everything but the build directories.
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$root" && git ls-files -z --cached --others --exclude-standard |
        tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$src"
else
    (cd "$root" && tar --exclude=./build --exclude='./build-*' --exclude=__pycache__ -cf - .) |
        tar -xf - -C "$src"
fi

# The changelog's date: the last commit's, so two builds of one commit
# make the same packages.
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}
cat > "$src/debian/changelog" <<END
xprobes ($version) unstable; urgency=medium

  * XProbes $version (include/xprobes/version.h).

 -- $maintainer  $(date -R -u -d "@$epoch")
END

# Run from make (`make deb B=...`), the environment carries the outer
# make's flags and variables (B, CC, ...), which would reach the package's
# own make and build it somewhere else or otherwise: drop them.
jobs=$(nproc 2>/dev/null || echo 1)
(cd "$src" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES \
    DEB_BUILD_OPTIONS="parallel=$jobs ${DEB_BUILD_OPTIONS:-}" dpkg-buildpackage -b --no-sign)
rm -rf "$src"

changes="$out/xprobes_${version}_$(dpkg --print-architecture).changes"
lintian --fail-on error "$changes"
echo "build-deb: packages in $out:"
ls "$out"/*.deb
