# SPDX-License-Identifier: MIT
# mcsnoop: tools/mcsnoop/*.c, linked with the tools' shared
# pieces that talk to an agent (tools/common/: session, socket discovery
# and trust, injection).  Its probe
# module is modules/mcsnoop.mk's.  Included by the top-level Makefile
# after tests/tests.mk (it adds to their PYTEST_DIRS and integration).

MCSNOOP_SRCS := $(sort $(wildcard tools/mcsnoop/*.c))
MCSNOOP_OBJS := $(MCSNOOP_SRCS:%.c=$(B)/%.o)
MCSNOOP_LINK := $(COMMON_LIB) $(B)/lib/base/wire.o

$(B)/mcsnoop: $(MCSNOOP_OBJS) $(MCSNOOP_LINK)
	$(CC) $(CFLAGS) -o $@ $^ -lelf -lm

PROGS += $(B)/mcsnoop
all: $(B)/mcsnoop
integration: $(B)/mcsnoop $(B)/modules/mcsnoop.so $(B)/mcload
PYTEST_DIRS += tests/mcsnoop

-include $(MCSNOOP_OBJS:.o=.d)
