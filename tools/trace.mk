# SPDX-License-Identifier: MIT
# The function-graph tracer's side of the tool.
# tools/xprobes/trace_*.c are in xprobes through the top-level wildcard;
# the unit test compiles tools/xprobes/trace_format.c in (unit tests link
# only the agent's objects), so it is rebuilt when the printer changes.
# It takes the argument specs' files in too, and the bounds' (which read
# ELF files: -lelf).
$(B)/tests/unit/test_trace_format: tests/unit/test_trace_format.c tools/xprobes/trace_format.c \
				   tools/xprobes/xprobes.h tools/xprobes/trace_argspec.c \
				   tools/xprobes/trace_argfmt.c tools/xprobes/trace_bounds.c \
				   tools/common/common.h lib/trace/trace.h $(LIB_OBJS) tests/unit/unit.h
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -Ilib -o $@ $< $(LIB_OBJS) -lcmocka -lelf -lpthread -ldl

# uftrace data directories: the unit test compiles the writer
# and reader in, like the printer; tests/trace/uft_write drives them for
# tests/trace/test_uftrace_format.py.
$(B)/tests/unit/test_trace_uftrace: tests/unit/test_trace_uftrace.c tools/xprobes/trace_uftrace.c \
				    tools/xprobes/trace_format.c tools/xprobes/trace_bounds.c \
				    tools/xprobes/trace_libcall.c tools/xprobes/trace_argspec.c \
				    tools/xprobes/trace_argfmt.c tools/xprobes/trace_labels.c \
				    tools/xprobes/xprobes.h $(LIB_OBJS) tests/unit/unit.h
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -Ilib -o $@ $< $(LIB_OBJS) -lcmocka -lelf -lpthread -ldl
$(B)/tests/trace/uft_write: tests/trace/uft_write.c tools/xprobes/trace_uftrace.c \
			    tools/xprobes/trace_format.c tools/xprobes/trace_bounds.c \
			    tools/xprobes/trace_libcall.c tools/xprobes/trace_argspec.c \
			    tools/xprobes/trace_argfmt.c tools/xprobes/trace_labels.c tools/xprobes/xprobes.h
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -o $@ $< tools/xprobes/trace_uftrace.c tools/xprobes/trace_format.c \
	    tools/xprobes/trace_bounds.c tools/xprobes/trace_libcall.c tools/xprobes/trace_argspec.c \
	    tools/xprobes/trace_argfmt.c tools/xprobes/trace_labels.c -lelf
fixtures: $(B)/tests/trace/uft_write

# bench/fib.c's traced build: test_trace_stream.py records fib(27) whole,
# and compares with uftrace's recording of its -pg build.
fixtures: $(B)/bench/fib-traced $(B)/bench/fib-pg

# Argument specs and values: the unit test compiles them in, with the
# bounds' index (whose file reads ELF: -lelf).
$(B)/tests/unit/test_trace_argspec: tests/unit/test_trace_argspec.c tools/xprobes/trace_argspec.c \
				    tools/xprobes/trace_argfmt.c tools/xprobes/trace_bounds.c \
				    tools/xprobes/xprobes.h $(LIB_OBJS) tests/unit/unit.h
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -Ilib -o $@ $< $(LIB_OBJS) -lcmocka -lelf -lpthread -ldl
