# SPDX-License-Identifier: MIT
# uftrace's --auto-args from DWARF (tools/xprobes/trace_dwarf.c, in xprobes
# through the top-level wildcard; it needs libdw).  For
# tests/trace/test_trace_dwarf.py: a driver that prints the specs and writes
# the .dbg file, and -pg -g builds of tests/trace/dwarf_prog.c by compiler,
# optimisation, PIE and DWARF version, plus a -pg -g library and a C++
# program, for `uftrace record -a`.
DWARF_PROG_VARIANTS := gcc-O0 gcc-O2 clang-O0 clang-O2 gcc-O0-nopie gcc-O2-nopie \
		       gcc-O2-dwarf4 clang-O2-dwarf4
DWARF_FIXTURES := $(B)/tests/trace/dwarf_specs \
		  $(DWARF_PROG_VARIANTS:%=$(B)/tests/trace/dwarf_prog-%) \
		  $(B)/tests/trace/libdwarf_callee.so $(B)/tests/trace/dwarf_libmain \
		  $(B)/tests/trace/dwarf_cxx

$(B)/tests/trace/dwarf_specs: tests/trace/dwarf_specs.c tools/xprobes/trace_dwarf.c \
			      tools/xprobes/trace_dwarf.h
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -o $@ $< tools/xprobes/trace_dwarf.c -ldw -lelf

# dwarf_prog-COMPILER-OPT[-nopie][-dwarf4] (DWARF 5 is the default); not
# -Werror: the file is a test input.
$(B)/tests/trace/dwarf_prog-%: tests/trace/dwarf_prog.c
	@mkdir -p $(dir $@)
	$(word 1,$(subst -, ,$*)) -pg -g -$(word 2,$(subst -, ,$*)) \
	    $(if $(findstring nopie,$*),-no-pie) $(if $(findstring dwarf4,$*),-gdwarf-4) -o $@ $<
$(B)/tests/trace/libdwarf_callee.so: tests/trace/dwarf_callee.c
	@mkdir -p $(dir $@)
	gcc -pg -g -O0 -fPIC -shared -o $@ $<
$(B)/tests/trace/dwarf_libmain: tests/trace/dwarf_libmain.c $(B)/tests/trace/libdwarf_callee.so
	gcc -pg -g -O0 -o $@ $< -L$(B)/tests/trace -ldwarf_callee -Wl,-rpath,'$$ORIGIN'

$(B)/tests/trace/dwarf_cxx: tests/trace/dwarf_cxx.cc
	@mkdir -p $(dir $@)
	g++ -pg -g -O0 -o $@ $<

fixtures: $(DWARF_FIXTURES)

# -a (--auto-args) end to end (test_trace_autoargs.py): tests/trace/autoargs.c
# with the trace flags and -g -O0, the same without its debug information,
# and -pg -g -O0 for uftrace.
AUTOARGS_FIXTURES := $(addprefix $(B)/tests/trace/autoargs-,trace nodebug pg) \
		     $(B)/tests/trace/dwarf_prog-trace
$(B)/tests/trace/autoargs-trace: tests/trace/autoargs.c tests/trace/keep.h $(B)/libxprobes_trace.a \
				 $(LIBSO)
	@mkdir -p $(dir $@)
	gcc $(XCFLAGS) -g -O0 $(TRACE_CFLAGS) -o $@ $< $(TRACE_LIBS) $(LINK_AGENT)
$(B)/tests/trace/autoargs-nodebug: $(B)/tests/trace/autoargs-trace
	strip --strip-debug -o $@ $<
# dwarf_prog with the trace flags, to set against dwarf_prog-gcc-O0.
$(B)/tests/trace/dwarf_prog-trace: tests/trace/dwarf_prog.c $(B)/libxprobes_trace.a $(LIBSO)
	@mkdir -p $(dir $@)
	gcc -g -O0 $(TRACE_CFLAGS) -o $@ $< $(TRACE_LIBS) $(LINK_AGENT)
$(B)/tests/trace/autoargs-pg: tests/trace/autoargs.c tests/trace/keep.h
	@mkdir -p $(dir $@)
	gcc $(XCFLAGS) -pg -g -O0 -o $@ $<

fixtures: $(AUTOARGS_FIXTURES)
