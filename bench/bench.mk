# SPDX-License-Identifier: MIT
# Benchmark: `make bench` measures the per-hit cost of a site (detached,
# attached to a counting module, armed by bpftrace) against a plain loop
# and a <sys/sdt.h> probe.  bench/run.py drives it and writes
# bench/results.json.  Included by the top-level Makefile.
#
# `make soak` (not part of bench or check) runs bench/soak.py: memcached
# (xprobes-dtrace build, agent preloaded) under memaslap for SOAK_SECONDS
# (default 600) while two modules are loaded, disabled, enabled and
# unloaded back to back through two xprobes sessions.  It fails on any
# command error, hits while disabled, a module left mapped after unload,
# RSS growth over 16 MiB after warm-up, or a descriptor leak.
#
# Always -O2 whatever CFLAGS says: the figures are about optimised code.

BENCH_CFLAGS := $(XCFLAGS) -O2 -g
BENCH_BIN    := $(B)/bench/hitloop
BENCH_MOD    := $(B)/bench/mod_count.so

$(BENCH_BIN): bench/hitloop.c include/xprobes/site.h | $(LIBSO)
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -L$(B) -Wl,-rpath,'$$ORIGIN/..' \
	    -Wl,--push-state,--no-as-needed -lxprobes -Wl,--pop-state -lpthread

$(BENCH_MOD): bench/mod_count.c include/xprobes/probe.h include/xprobes/site.h
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -shared -fPIC -o $@ $<

bench: deps $(BENCH_BIN) $(BENCH_MOD) $(B)/xprobes $(LIBSO)
	$(PYTHON) bench/run.py --build $(B)

# memcached throughput: plain, xprobes detached/attached, bpftrace.
$(B)/bench/mod_mc_hits.so: bench/mod_mc_hits.c include/xprobes/probe.h include/xprobes/site.h
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -shared -fPIC -o $@ $<

# Three views, because throughput here is too noisy for a 1% goal:
# fresh processes per variant (memcached.py), attached vs detached inside
# one process under one continuous load (memcached_paired.py), and
# callgrind instruction counts per request (memcached_instr.py).
bench-memcached: $(B)/xprobes $(B)/xprobes-dtrace $(LIBSO) $(B)/bench/mod_mc_hits.so
	$(PYTHON) bench/memcached.py --build $(B)
	$(PYTHON) bench/memcached_paired.py --build $(B)
	$(PYTHON) bench/memcached_instr.py --build $(B)

bench: bench-memcached
.PHONY: bench-memcached

# mctop against bpftrace: their cost on memcached at saturation
# (ABBA windows in one process) and mctop.so's top-100 recall on 10M keys
# within its default budget; about 5 minutes.  Longer or shorter runs:
# make bench-mctop MCTOP_BENCH_ARGS="--pairs 40 --bpftrace-pairs 16 --window 3"
bench-mctop: $(B)/xprobes $(B)/xprobes-dtrace $(LIBSO) $(B)/mctop $(B)/mcload $(B)/modules/mctop.so \
	     $(B)/bench/spacesaving_tlb
	$(B)/bench/spacesaving_tlb
	$(PYTHON) bench/mctop_bench.py --build $(B) $(MCTOP_BENCH_ARGS)

# Why mctop counts in a drainer thread (docs/design.md, "Why a feed").
$(B)/bench/spacesaving_tlb: bench/spacesaving_tlb.c modules/mctop/spacesaving.h
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -lm

bench: bench-mctop
.PHONY: bench-mctop

# Soak: see the comment at the top.  `make soak SOAK_SECONDS=60` for a short run.
SOAK_SECONDS ?= 600
soak: $(B)/xprobes $(B)/xprobes-dtrace $(LIBSO) $(B)/bench/mod_mc_hits.so $(B)/modules/mc_count.so
	$(PYTHON) bench/soak.py --build $(B) --seconds $(SOAK_SECONDS)
.PHONY: soak

# The function-graph tracer against uftrace and XRay on fib(30):
# `make bench-trace`, part of make bench; see bench/trace.mk.
include bench/trace.mk

# mctop's fallback on Debian's own memcached: what its watch
# stream costs memcached at saturation (ABBA windows, medians) and what it
# loses when mctop falls behind (a stall); about 2 minutes.
# make bench-mctop-watch MCTOP_WATCH_BENCH_ARGS="--pairs 16 --window 3"
bench-mctop-watch: $(B)/mctop $(B)/mcload
	$(PYTHON) bench/mctop_watch_bench.py --build $(B) $(MCTOP_WATCH_BENCH_ARGS)

bench: bench-mctop-watch
.PHONY: bench-mctop-watch
