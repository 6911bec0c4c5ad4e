# SPDX-License-Identifier: MIT
# The function-graph tracer's build pieces, included by the
# top-level Makefile.
#
#   $(B)/libxprobes_trace.a   linked into every traced object (the note
#                             and the constructor, lib/static/)
#   $(B)/xprobes-trace.pc     pkg-config --cflags --libs xprobes-trace
#   tests/trace/ fixtures     traced programs and a traced library, gcc
#                             and clang (the same flags the .pc gives)

# What the .pc file gives, for objects built in this tree.
TRACE_CFLAGS := -fpatchable-function-entry=5
TRACE_LIBS    = -Wl,-u,__xprobes_trace_anchor $(B)/libxprobes_trace.a

# Never instrumented itself: it runs before anything could patch it.
$(B)/lib/static/trace_note.o: lib/static/trace_note.c
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(B)/libxprobes_trace.a: $(B)/lib/static/trace_note.o
	rm -f $@
	ar rcs $@ $^

$(B)/xprobes-trace.pc: xprobes-trace.pc.in lib/trace.mk
	$(PC_SUBST) $< > $@

all: $(B)/libxprobes_trace.a $(B)/xprobes-trace.pc

# The unit test of patching holds instrumented functions of its own.
$(B)/tests/unit/test_trace_patch: tests/unit/test_trace_patch.c $(LIB_OBJS) tests/unit/unit.h \
				  $(B)/libxprobes_trace.a
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) $(TRACE_CFLAGS) -Ilib -o $@ $< $(LIB_OBJS) $(TRACE_LIBS) \
	    -lcmocka -lpthread -ldl

# So does the unit test of library calls, linked -z now: a read-only GOT.
$(B)/tests/unit/test_trace_plt: tests/unit/test_trace_plt.c $(LIB_OBJS) tests/unit/unit.h \
				$(B)/libxprobes_trace.a
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) $(TRACE_CFLAGS) -Ilib -o $@ $< $(LIB_OBJS) $(TRACE_LIBS) \
	    -Wl,-z,now,-z,relro -lcmocka -lpthread -ldl

# Fixtures: tests/trace/prog_*.c -> a traced program, one per compiler;
# tests/trace/lib*.c -> a traced library it dlopen()s.
TRACE_FIX_SRCS := $(wildcard tests/trace/*.c)
TRACE_FIX_PROGS := $(foreach c,gcc clang,$(patsubst tests/trace/%.c,$(B)/tests/trace/%-$(c),\
		     $(filter tests/trace/prog_%.c,$(TRACE_FIX_SRCS))))
TRACE_FIX_LIBS := $(foreach c,gcc clang,$(patsubst tests/trace/%.c,$(B)/tests/trace/%-$(c).so,\
		     $(filter tests/trace/lib%.c,$(TRACE_FIX_SRCS))))
TRACE_FIXTURES := $(TRACE_FIX_PROGS) $(TRACE_FIX_LIBS)

$(B)/tests/trace/%-gcc: tests/trace/%.c $(B)/libxprobes_trace.a $(LIBSO) include/xprobes/trace.h
	@mkdir -p $(dir $@)
	gcc $(XCFLAGS) $(CFLAGS) $(TRACE_CFLAGS) -o $@ $< $(TRACE_LIBS) $(LINK_AGENT) -lpthread -ldl
$(B)/tests/trace/%-clang: tests/trace/%.c $(B)/libxprobes_trace.a $(LIBSO) include/xprobes/trace.h
	@mkdir -p $(dir $@)
	clang $(XCFLAGS) $(CFLAGS) $(TRACE_CFLAGS) -o $@ $< $(TRACE_LIBS) $(LINK_AGENT) -lpthread -ldl
$(B)/tests/trace/lib%-gcc.so: tests/trace/lib%.c $(B)/libxprobes_trace.a include/xprobes/trace.h
	@mkdir -p $(dir $@)
	gcc $(XCFLAGS) $(CFLAGS) $(TRACE_CFLAGS) -shared -fPIC -o $@ $< $(TRACE_LIBS)
$(B)/tests/trace/lib%-clang.so: tests/trace/lib%.c $(B)/libxprobes_trace.a include/xprobes/trace.h
	@mkdir -p $(dir $@)
	clang $(XCFLAGS) $(CFLAGS) $(TRACE_CFLAGS) -shared -fPIC -o $@ $< $(TRACE_LIBS)

# A traced library (gcc) that needs one whose constructor can be made to
# wait: its entries are still 1-byte NOPs meanwhile (test_trace_late.py).
$(B)/tests/trace/libslowdep.so: tests/trace/slowdep.c tests/fixtures/hold.h
	@mkdir -p $(dir $@)
	gcc $(XCFLAGS) $(CFLAGS) -shared -fPIC -o $@ $<
$(B)/tests/trace/libtracee_dep-gcc.so: tests/trace/libtracee.c $(B)/tests/trace/libslowdep.so \
				       $(B)/libxprobes_trace.a include/xprobes/trace.h
	gcc $(XCFLAGS) $(CFLAGS) $(TRACE_CFLAGS) -shared -fPIC -o $@ $< $(TRACE_LIBS) \
	    -L$(B)/tests/trace -Wl,--no-as-needed -lslowdep -Wl,-rpath,'$$ORIGIN'
TRACE_FIXTURES += $(B)/tests/trace/libslowdep.so $(B)/tests/trace/libtracee_dep-gcc.so

# Library calls (test_trace_libcall.py): prog_libcall as the trace flags
# build it (lazy binding, the default) and also with -fno-plt and with
# -z now (full RELRO); and with -pg, for uftrace, lazy and -z now.
LIBCALL_VARIANTS := noplt:-fno-plt now:-Wl,-z,now,-z,relro
$(foreach v,$(LIBCALL_VARIANTS),$(eval $(B)/tests/trace/prog_libcall-$(word 1,$(subst :, ,$(v))): \
	LIBCALL_FLAGS := $(word 2,$(subst :, ,$(v)))))
$(B)/tests/trace/prog_libcall-noplt $(B)/tests/trace/prog_libcall-now: tests/trace/prog_libcall.c \
		$(B)/libxprobes_trace.a $(LIBSO)
	@mkdir -p $(dir $@)
	gcc $(XCFLAGS) $(CFLAGS) $(TRACE_CFLAGS) $(LIBCALL_FLAGS) -o $@ $< $(TRACE_LIBS) $(LINK_AGENT) \
	    -lpthread
$(B)/tests/trace/prog_libcall-pg: tests/trace/prog_libcall.c
	@mkdir -p $(dir $@)
	gcc $(XCFLAGS) $(CFLAGS) -pg -o $@ $< -lpthread
$(B)/tests/trace/prog_libcall-pg-now: tests/trace/prog_libcall.c
	@mkdir -p $(dir $@)
	gcc $(XCFLAGS) $(CFLAGS) -pg -Wl,-z,now,-z,relro -o $@ $< -lpthread
TRACE_FIXTURES += $(addprefix $(B)/tests/trace/prog_libcall-,noplt now pg pg-now)

# Arguments (test_trace_args.py): prog_args with -pg too, for uftrace.
$(B)/tests/trace/prog_args-pg: tests/trace/prog_args.c tests/trace/keep.h
	@mkdir -p $(dir $@)
	gcc $(XCFLAGS) $(CFLAGS) -pg -o $@ $<
TRACE_FIXTURES += $(B)/tests/trace/prog_args-pg

fixtures: $(TRACE_FIXTURES)

# It dlopen()s the traced library of each compiler.
$(B)/tests/unit/test_trace_patch: | $(TRACE_FIX_LIBS)

