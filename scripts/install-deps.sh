#!/bin/sh
# SPDX-License-Identifier: MIT
# Install the Debian packages XProbes needs to build, test and benchmark.
# Idempotent: asks apt only for what is missing, and runs `apt-get update`
# only when something is. Only Debian's own archive is used.
set -eu

PKGS="build-essential gcc clang libclang-rt-14-dev make pkg-config
 libedit-dev libelf-dev libdw-dev libcmocka-dev
 python3 python3-pytest
 systemtap-sdt-dev bpftrace libbpf-dev bpftool zlib1g-dev
 memcached libmemcached-tools libevent-dev dpkg-dev
 strace valgrind uftrace
 libncurses-dev tmux prometheus
 autoconf debhelper lintian"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages:$missing" >&2
    echo "install-deps: run as root (or install them yourself)" >&2
    exit 1
fi

echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
