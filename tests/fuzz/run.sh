#!/bin/sh
# SPDX-License-Identifier: MIT
# Run one libFuzzer harness for a fixed time and say what happened.
#   run.sh NAME BINARY WORKDIR SECONDS
# Seeds come from tests/fuzz/corpus/NAME (read only); new inputs go to
# WORKDIR/corpus, a crashing input to WORKDIR/crash-*, the log to
# WORKDIR/log.  Fails on a crash, a hang, a leak or any sanitizer report.
set -u
name=$1 bin=$2 work=$3 secs=$4
seeds=tests/fuzz/corpus/$name
dict=tests/fuzz/$name.dict

mkdir -p "$work/corpus"
set -- -max_total_time="$secs" -timeout=10 -print_final_stats=1 -artifact_prefix="$work/"
[ -f "$dict" ] && set -- "$@" -dict="$dict"
# The command harness refuses to run with a live agent (see fuzz_commands.c).
XPROBES_AGENT=off "$bin" "$@" "$work/corpus" "$seeds" >"$work/log" 2>&1
rc=$?
if [ $rc -ne 0 ] || grep -q -e '^==[0-9]*==ERROR:' -e 'runtime error:' "$work/log"; then
	tail -n 40 "$work/log"
	echo "fuzz $name: FAILED (exit $rc); log: $work/log, input: $(ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* 2>/dev/null | tail -n 1)"
	exit 1
fi
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
echo "fuzz $name: ${runs:-?} executions in ${secs}s, 0 crashes ($(ls "$work/corpus" | wc -l) inputs in $work/corpus)"
