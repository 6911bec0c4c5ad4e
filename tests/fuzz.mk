# SPDX-License-Identifier: MIT
# Coverage-guided fuzzing with libFuzzer.  Included by the top-level Makefile.
#
#   make fuzz-check        each harness for FUZZ_CHECK_SECONDS (part of `make check`)
#   make fuzz              each harness for FUZZ_SECONDS
#   make fuzz-check-NAME   one harness (fuzz-NAME: the long run)
#
# Harnesses are tests/fuzz/fuzz_NAME.c; their seeds tests/fuzz/corpus/NAME/
# (never written to).  What a run learns goes to $(B)/fuzz/NAME/corpus and
# is reused by the next run; a crashing input is saved in $(B)/fuzz/NAME/.
# The agent's objects are compiled again for fuzzing under $(B)/fuzz/lib/
# with clang (libFuzzer needs it: Debian's libclang-rt-14-dev), and so
# are the tool's readers of target data under $(B)/fuzz/tools/.

FUZZ_CC            ?= clang
FUZZ_SECONDS       ?= 300
FUZZ_CHECK_SECONDS ?= 20
FUZZ_CFLAGS  := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
                -fno-sanitize-recover=all
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS    := $(FUZZ_NAMES:%=$(B)/fuzz/fuzz_%)
FUZZ_LIB_OBJS := $(LIB_SRCS:%.c=$(B)/fuzz/%.o) $(LIB_ASMS:%.S=$(B)/fuzz/%.o)
# The tool's readers of target data, compiled again the same way.
FUZZ_TOOL_OBJS := $(B)/fuzz/tools/xprobes/trace_parse.o $(B)/fuzz/tools/xprobes/trace_format.o \
                  $(addprefix $(B)/fuzz/tools/xprobes/,trace_argfmt.o trace_argspec.o trace_bounds.o) \
                  $(B)/fuzz/tools/common/sanitize.o $(B)/fuzz/tools/common/keytext.o
# The watch harness: memcached's watch stream as mcsnoop and mctop read it.
FUZZ_WATCH_OBJS := $(B)/fuzz/tools/common/mcwatch.o $(B)/fuzz/tools/common/mcwatch_line.o \
                   $(B)/fuzz/tools/common/procnet.o $(B)/fuzz/tools/common/sanitize.o \
                   $(B)/fuzz/tools/common/keytext.o
# The recorder's: the stream, the -t filter and the writer, with what they
# call (the harness stands in for the session and the target's memory).
FUZZ_RECORDER_OBJS := $(addprefix $(B)/fuzz/tools/xprobes/,trace_stream.o trace_read.o \
                      trace_names.o trace_bounds.o trace_minfilter.o trace_uftrace.o \
                      trace_parse.o trace_format.o trace_libcall.o trace_argspec.o \
                      trace_argfmt.o trace_labels.o) $(B)/fuzz/tools/common/sanitize.o
# The command harness loads these (built normally, like every fixture).
FUZZ_MODS    := $(B)/tests/fixtures/mod_count.so $(B)/tests/fixtures/mod_nocmd.so

.PHONY: fuzz fuzz-check $(FUZZ_NAMES:%=fuzz-%) $(FUZZ_NAMES:%=fuzz-check-%)

$(B)/fuzz/lib/%.o: lib/%.S
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -c $< -o $@

$(B)/fuzz/lib/%.o: lib/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(XCFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -fPIC -MMD -MP -c $< -o $@

$(B)/fuzz/tools/%.o: tools/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(XCFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

# Each harness links only what it tests: the note and frame harnesses
# then carry no agent constructor at all.
$(B)/fuzz/fuzz_notes: $(B)/fuzz/lib/base/notes.o
$(B)/fuzz/fuzz_frames: $(B)/fuzz/lib/base/wire.o
$(B)/fuzz/fuzz_commands: $(FUZZ_LIB_OBJS)
$(B)/fuzz/fuzz_tool_readers: $(FUZZ_TOOL_OBJS)
$(B)/fuzz/fuzz_tool_readers: FUZZ_LIBS := -lelf
$(B)/fuzz/fuzz_watch: $(FUZZ_WATCH_OBJS)
$(B)/fuzz/fuzz_recorder: $(FUZZ_RECORDER_OBJS)
$(B)/fuzz/fuzz_recorder: FUZZ_LIBS := -lelf
# The DWARF reader, with libdw; its seeds are -g builds of the test
# program (only its debug information and symbols: a few tens of KB),
# compiled into the run's corpus (binaries are not committed).
DWARF_SEEDS := $(addprefix $(B)/fuzz/dwarf/corpus/seed-,gcc-O0 clang-O2)
$(B)/fuzz/fuzz_dwarf: $(B)/fuzz/tools/xprobes/trace_dwarf.o
$(B)/fuzz/fuzz_dwarf: FUZZ_LIBS := -ldw -lelf
fuzz-check-dwarf fuzz-dwarf: $(DWARF_SEEDS)
$(B)/fuzz/dwarf/corpus/seed-%: tests/trace/dwarf_prog.c
	@mkdir -p $(dir $@)
	$(word 1,$(subst -, ,$*)) -g -$(word 2,$(subst -, ,$*)) -o $@.full $<
	objcopy --only-keep-debug $@.full $@ && rm -f $@.full
$(B)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(XCFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer -Ilib -MMD -MP -o $@ $< \
	    $(filter %.o,$^) $(FUZZ_LIBS) -lpthread -ldl

FUZZ_RUN = XPROBES_FUZZ_MOD_A=$(abspath $(B)/tests/fixtures/mod_count.so) \
           XPROBES_FUZZ_MOD_B=$(abspath $(B)/tests/fixtures/mod_nocmd.so) \
           sh tests/fuzz/run.sh

$(FUZZ_NAMES:%=fuzz-check-%): fuzz-check-%: $(B)/fuzz/fuzz_% $(FUZZ_MODS)
	@$(FUZZ_RUN) $* $< $(B)/fuzz/$* $(FUZZ_CHECK_SECONDS)
$(FUZZ_NAMES:%=fuzz-%): fuzz-%: $(B)/fuzz/fuzz_% $(FUZZ_MODS)
	@$(FUZZ_RUN) $* $< $(B)/fuzz/$* $(FUZZ_SECONDS)

fuzz-check: $(FUZZ_NAMES:%=fuzz-check-%)
fuzz: $(FUZZ_NAMES:%=fuzz-%)

-include $(FUZZ_LIB_OBJS:.o=.d) $(FUZZ_TOOL_OBJS:.o=.d) $(FUZZ_RECORDER_OBJS:.o=.d) $(FUZZ_BINS:=.d)
-include $(FUZZ_WATCH_OBJS:.o=.d)
