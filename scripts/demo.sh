#!/bin/sh
# The README tour, run for you: start the example server, send it traffic,
# attach to it live, load a probe module, ask it what it saw, unload it.
set -eu

B=${1:-build}
PORT=${DEMO_PORT:-11311}
XP="$B/xprobes"
MOD="$B/modules/conn_stats.so"

fifo=$(mktemp -u)
mkfifo "$fifo"
"$B/examples/server" -p "$PORT" >"$fifo" &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$fifo"' EXIT INT TERM
# The server prints one line once it listens: wait for it, not for a timer.
read -r banner <"$fifo"
echo "$ $B/examples/server -p $PORT &"
echo "$banner"

say() { echo; echo "\$ $*"; "$@"; }

say "$B/examples/client" -p "$PORT" -c 4 -n 200
say "$XP" "$server" sites
say "$XP" "$server" load "$MOD"
say "$XP" "$server" sites
say "$B/examples/client" -p "$PORT" -c 8 -n 500 -b 3
say "$XP" "$server" command conn_stats.so requests
say "$XP" "$server" command conn_stats.so protocol
say "$XP" "$server" unload conn_stats.so
say "$XP" "$server" modules
echo
echo "The module counted only the traffic sent while it was loaded."
