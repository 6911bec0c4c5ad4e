#!/bin/sh
# SPDX-License-Identifier: MIT
# make demo: the hottest keys of a live memcached, found with mctop.
#
#   sh scripts/demo.sh [BUILD_DIR]
#
# Builds Debian's memcached with xprobes-dtrace (cached), starts it on
# loopback WITHOUT the agent, drives it with mcload's Zipf load, and opens
# mctop on it: mctop injects the agent and loads its module into the
# running server.  Full-screen when stdin and stdout are a terminal (Q
# quits), else DEMO_COUNT (default 5) -C blocks, so a log ends by itself.
# However it ends (Q, Ctrl-C, the count, an error), everything it started
# is stopped.  DEMO_PORT picks the first port to try (default 11311).
set -eu

B=${1:-build}
PORT=${DEMO_PORT:-11311}
COUNT=${DEMO_COUNT:-5}
RATE=${DEMO_RATE:-50000}   # open loop: a busy server, not a melted machine

tmp=$(mktemp -d "${TMPDIR:-/tmp}/xprobes-demo.XXXXXX")
mc='' load=''

stop_all() {
	for p in $load $mc; do
		kill "$p" 2>/dev/null || true
	done
	# Our own children only: returns once they have exited.
	for p in $load $mc; do
		wait "$p" 2>/dev/null || true
	done
	load='' mc=''
}
trap 'stop_all; rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() { printf '\n==> %s\n' "$*"; }
show() { printf '$ %s\n' "$*"; }

# Running, not a zombie (a child that exited stays in /proc until waited).
alive() {
	[ -r "/proc/$1/stat" ] || return 1
	read -r _ _ state _ <"/proc/$1/stat" || return 1
	[ "$state" != Z ]
}

# start_memcached [LD_PRELOAD value]: memcached on the first free port from
# $PORT, in the foreground as our child.  Ready when its pidfile exists:
# memcached writes it after its socket listens.  A port in use makes it
# exit at once, and the next port is tried.
start_memcached() {
	tries=0
	while :; do
		pidfile="$tmp/memcached-$PORT.pid"
		show "$MEMCACHED -u root -l 127.0.0.1 -p $PORT -U 0 -t 2 -P $pidfile &"
		LD_PRELOAD=${1:-} "$MEMCACHED" -u root -l 127.0.0.1 -p "$PORT" -U 0 -t 2 \
			-P "$pidfile" 2>"$tmp/memcached.err" &
		mc=$!
		while [ ! -s "$pidfile" ] && alive "$mc"; do
			sleep 0.01 # polling for the pidfile
		done
		[ -s "$pidfile" ] && return 0
		wait "$mc" 2>/dev/null || true
		mc=
		tries=$((tries + 1))
		if [ "$tries" -ge 20 ] || ! grep -q "in use" "$tmp/memcached.err"; then
			cat "$tmp/memcached.err" >&2
			echo "demo: memcached did not start" >&2
			exit 1
		fi
		echo "(port $PORT is taken; trying $((PORT + 1)))"
		PORT=$((PORT + 1))
	done
}

start_load() {
	show "$B/mcload -s 127.0.0.1:$PORT -z 0.99 -k 1000000 -R $RATE -c 8 -d 86400 &"
	"$B/mcload" -s "127.0.0.1:$PORT" -z 0.99 -k 1000000 -R "$RATE" -c 8 -d 86400 \
		>"$tmp/mcload.out" 2>&1 </dev/null &
	load=$!
}

step "Build memcached from Debian's source with xprobes-dtrace (cached after the first time)"
show "scripts/build-memcached.sh xprobes $B/xprobes-dtrace"
MEMCACHED=$(scripts/build-memcached.sh xprobes "$B/xprobes-dtrace")
echo "$MEMCACHED"

step "Start it on loopback, as an ordinary server: no XProbes agent in it"
start_memcached
echo "memcached is pid $mc, listening on 127.0.0.1:$PORT"

step "Load it: Zipf(0.99) popularity over a million keys, 9 gets to 1 set, $RATE requests/s"
start_load

if [ -t 0 ] && [ -t 1 ]; then
	mode=
	step "Attach mctop to the running memcached (Q quits; C/S/R/B/N/L sort, H histogram, I inspect)"
else
	mode="-C -r 10 1 $COUNT"
	step "Attach mctop to the running memcached ($COUNT one-second blocks: no terminal here)"
fi
run_mctop() {
	show "$B/mctop -p $mc $mode"
	status=0
	# shellcheck disable=SC2086 # $mode is words
	"$B/mctop" -p "$mc" $mode || status=$?
}
run_mctop

# mctop injects the agent with ptrace.  Where that is not allowed (Yama
# ptrace_scope, no CAP_SYS_PTRACE) start memcached again with the agent
# preloaded, and say so.
if [ "$status" -ne 0 ] && alive "$mc" && ! grep -q libxprobes "/proc/$mc/maps"; then
	step "Injection was refused here; starting memcached again with the agent preloaded"
	stop_all
	start_memcached "$(realpath "$B/libxprobes.so")"
	start_load
	run_mctop
fi
[ "$status" -eq 0 ] || exit "$status"

stop_all
step "Done: mcload and memcached are stopped"
echo "Try next, on a memcached of yours: $B/mcsnoop -p PID (every command, live), $B/mctop -p PID"
echo "--json 1 (a JSON line a second), $B/mctop -p PID --no-ui --metrics 127.0.0.1:9150 (Prometheus)."
