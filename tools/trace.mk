# The function-graph tracer's side of the tool (issue 11).
# tools/xprobes/trace_*.c are in xprobes through the top-level wildcard;
# the unit test compiles tools/xprobes/trace_format.c in (unit tests link
# only the agent's objects), so it is rebuilt when the printer changes.
$(B)/tests/unit/test_trace_format: tools/xprobes/trace_format.c tools/xprobes/xprobes.h \
				   tools/common/common.h lib/trace/trace.h
