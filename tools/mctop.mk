# SPDX-License-Identifier: MIT
# mctop, the live hot-key table of memcached: tools/mctop/*.c,
# linked with the tools' shared pieces (tools/common/: attaching, session,
# socket checks, injection, the --metrics exporter).
# Included by the top-level Makefile after tests/tests.mk, tools/mcload.mk
# and modules/mctop.mk (which already runs tests/mctop in integration).
#
# ui.c and metrics.c are optional at link time (main.c declares their
# functions weak): a tree without them builds an mctop without them.
# metrics.c renders mctop's families; tools/common/exporter.c serves them.

MCTOP_SRCS := $(sort $(wildcard tools/mctop/*.c))
MCTOP_OBJS := $(MCTOP_SRCS:%.c=$(B)/%.o)
MCTOP_TOOL_OBJS := $(COMMON_LIB) $(B)/lib/base/wire.o
MCTOP_CURSES := $(or $(shell pkg-config --libs ncursesw 2>/dev/null),-lncursesw)

$(B)/mctop: $(MCTOP_OBJS) $(MCTOP_TOOL_OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(MCTOP_CURSES) -lelf -lpthread -lm

# The raw-format parser and --prefix grouping, unit-tested on canned text:
# an explicit rule, because tests/tests.mk's pattern rule links a test
# with the agent's objects only.
$(B)/tests/unit/test_mctop_raw: tests/unit/test_mctop_raw.c tests/unit/unit.h \
    $(B)/tools/mctop/raw.o $(B)/tools/mctop/prefix.o
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) $(LDFLAGS) -Itools/mctop -o $@ $< \
	    $(B)/tools/mctop/raw.o $(B)/tools/mctop/prefix.o -lcmocka

# The --metrics families, rendered on a made-up frame: linked with the
# shared exporter (the pattern rule links the agent's objects only).
$(B)/tests/unit/test_mctop_metrics: tests/unit/test_mctop_metrics.c tests/unit/unit.h \
    tools/mctop/metrics.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(COMMON_LIB) -lcmocka -lpthread

PROGS += $(B)/mctop
all: $(B)/mctop
integration: $(B)/mctop

-include $(MCTOP_OBJS:.o=.d)
