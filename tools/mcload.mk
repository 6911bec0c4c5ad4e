# mcload, the memcached load generator (issue 10): tools/mcload/*.c, kept
# out of tools/*.c so its objects stay out of xprobes.  Included by the
# top-level Makefile after tests/tests.mk.

MCLOAD_SRCS := $(sort $(wildcard tools/mcload/*.c))
MCLOAD_OBJS := $(MCLOAD_SRCS:%.c=$(B)/%.o)

$(B)/mcload: $(MCLOAD_OBJS)
	$(CC) $(CFLAGS) -o $@ $^ -lpthread -lm

PROGS += $(B)/mcload
all: $(B)/mcload
integration: $(B)/mcload
PYTEST_DIRS += tests/mcload

-include $(MCLOAD_OBJS:.o=.d)
