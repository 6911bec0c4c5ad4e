# SPDX-License-Identifier: MIT
# The function-graph tracer's benchmark, included by
# bench/bench.mk: bench/fib.c built every way bench/trace_bench.py
# compares, all -O2 whatever CFLAGS says.
#
#   fib-gcc     untraced, gcc            (the base of ours and uftrace's)
#   fib-clang   untraced, clang          (the base of XRay's)
#   fib-traced  our flags + libxprobes_trace.a + -lxprobes, gcc: run
#               with tracing off, and on through `xprobes PID trace start`
#   fib-pg      gcc -pg, for `uftrace record`
#   fib-xray    clang XRay, run in FDR mode
#
# make bench-trace TRACE_BENCH_ARGS="--rounds 15" for more rounds;
# bench/trace_bench.py --help lists its options.
#
# The XRay build may fail (no compiler-rt): the driver then skips XRay
# and says why, rather than `make bench` stopping here.

FIB_CFLAGS := $(XCFLAGS) -O2 -g
FIB_DIR    := $(B)/bench
FIB_BINS   := $(FIB_DIR)/fib-gcc $(FIB_DIR)/fib-clang $(FIB_DIR)/fib-traced $(FIB_DIR)/fib-pg

$(FIB_DIR)/fib-gcc: bench/fib.c
	@mkdir -p $(dir $@)
	gcc $(FIB_CFLAGS) -o $@ $<

$(FIB_DIR)/fib-clang: bench/fib.c
	@mkdir -p $(dir $@)
	clang $(FIB_CFLAGS) -o $@ $<

$(FIB_DIR)/fib-traced: bench/fib.c $(B)/libxprobes_trace.a | $(LIBSO)
	@mkdir -p $(dir $@)
	gcc $(FIB_CFLAGS) $(TRACE_CFLAGS) -o $@ $< $(TRACE_LIBS) -L$(B) \
	    -Wl,-rpath,'$$ORIGIN/..' -Wl,--push-state,--no-as-needed -lxprobes \
	    -Wl,--pop-state

# -pg is what uftrace 0.13 records without any option.
$(FIB_DIR)/fib-pg: bench/fib.c
	@mkdir -p $(dir $@)
	gcc $(FIB_CFLAGS) -pg -o $@ $<

# A stamp, so that a failed XRay link is not retried by every make.
$(FIB_DIR)/fib-xray.stamp: bench/fib.c
	@mkdir -p $(dir $@)
	rm -f $(FIB_DIR)/fib-xray
	clang $(FIB_CFLAGS) -fxray-instrument -fxray-instruction-threshold=1 \
	    -DFIB_XRAY_LOG -o $(FIB_DIR)/fib-xray $< \
	    || echo "bench: XRay build failed (libclang-rt-14-dev?): XRay will be skipped"
	touch $@

# How a recording client gets the records: process_vm_readv against a
# shared mapping (docs/design.md, "Draining").
$(FIB_DIR)/drain_copy: bench/drain_copy.c
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) -O2 -o $@ $<

# A library call (bench/libcall_bench.py): strlen through the PLT,
# untraced, with our trace flags, and -pg for uftrace.
LIBCALL_CFLAGS := $(FIB_CFLAGS) -fno-builtin
LIBCALL_BINS := $(FIB_DIR)/libcall-gcc $(FIB_DIR)/libcall-traced $(FIB_DIR)/libcall-pg
$(FIB_DIR)/libcall-gcc: bench/libcall.c
	@mkdir -p $(dir $@)
	gcc $(LIBCALL_CFLAGS) -o $@ $<
$(FIB_DIR)/libcall-traced: bench/libcall.c $(B)/libxprobes_trace.a | $(LIBSO)
	@mkdir -p $(dir $@)
	gcc $(LIBCALL_CFLAGS) $(TRACE_CFLAGS) -o $@ $< $(TRACE_LIBS) -L$(B) \
	    -Wl,-rpath,'$$ORIGIN/..' -Wl,--push-state,--no-as-needed -lxprobes \
	    -Wl,--pop-state
$(FIB_DIR)/libcall-pg: bench/libcall.c
	@mkdir -p $(dir $@)
	gcc $(LIBCALL_CFLAGS) -pg -o $@ $<

bench-trace: $(FIB_BINS) $(FIB_DIR)/fib-xray.stamp $(B)/xprobes $(FIB_DIR)/drain_copy $(LIBCALL_BINS)
	$(PYTHON) bench/trace_bench.py --build $(B) $(TRACE_BENCH_ARGS)
	$(PYTHON) bench/libcall_bench.py --build $(B)
	$(FIB_DIR)/drain_copy
	$(PYTHON) bench/trace_memcached.py --build $(B)

bench: bench-trace
.PHONY: bench-trace

# Starting and stopping the tracer in a big program (bench/trace_big.py):
# TRACE_BIG_N functions, one a page, from tests/trace/gen_bigprog.py, built
# by gcc and by clang with the xprobes-trace flags.  Not part of
# bench-trace (the builds take a minute each); part of `make bench`.
TRACE_BIG_N ?= 20000
TRACE_BIG_BINS := $(FIB_DIR)/big$(TRACE_BIG_N)-gcc $(FIB_DIR)/big$(TRACE_BIG_N)-clang

$(FIB_DIR)/big$(TRACE_BIG_N).c: tests/trace/gen_bigprog.py
	@mkdir -p $(dir $@)
	$(PYTHON) $< $(TRACE_BIG_N) > $@.tmp && mv $@.tmp $@

$(FIB_DIR)/big$(TRACE_BIG_N)-%: $(FIB_DIR)/big$(TRACE_BIG_N).c $(B)/libxprobes_trace.a | $(LIBSO)
	$* $(XCFLAGS) -O1 $(TRACE_CFLAGS) -o $@ $< $(TRACE_LIBS) -L$(B) \
	    -Wl,-rpath,'$$ORIGIN/..' -Wl,--push-state,--no-as-needed -lxprobes \
	    -Wl,--pop-state

bench-trace-big: $(TRACE_BIG_BINS) $(B)/xprobes
	$(PYTHON) bench/trace_big.py --build $(B) --n $(TRACE_BIG_N) $(TRACE_BIG_ARGS)

bench: bench-trace-big
.PHONY: bench-trace-big
