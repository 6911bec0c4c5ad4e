# mcsnoop (issue 10): tools/mcsnoop/*.c, kept out of tools/*.c so its
# objects stay out of xprobes, linked with the pieces of xprobes that talk
# to an agent (session, socket discovery and trust, injection).  Its probe
# module is modules/mcsnoop.mk's.  Included by the top-level Makefile
# after tests/tests.mk (it adds to their PYTEST_DIRS and integration).

MCSNOOP_SRCS := $(sort $(wildcard tools/mcsnoop/*.c))
MCSNOOP_OBJS := $(MCSNOOP_SRCS:%.c=$(B)/%.o)
MCSNOOP_LINK := $(addprefix $(B)/tools/,attach.o session.o sockfind.o socktrust.o sanitize.o inject.o \
		  inject_code.o exedir.o proc_status.o cli.o) $(B)/lib/base/wire.o

$(B)/mcsnoop: $(MCSNOOP_OBJS) $(MCSNOOP_LINK)
	$(CC) $(CFLAGS) -o $@ $^ -lelf -lm

PROGS += $(B)/mcsnoop
all: $(B)/mcsnoop
integration: $(B)/mcsnoop $(B)/modules/mcsnoop.so $(B)/mcload
PYTEST_DIRS += tests/mcsnoop

-include $(MCSNOOP_OBJS:.o=.d)
