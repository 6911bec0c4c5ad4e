# SPDX-License-Identifier: MIT
# mcload, the memcached load generator: tools/mcload/*.c, and
# of the tools' shared pieces only cli.o.  Included by the
# top-level Makefile after tests/tests.mk and bench/bench.mk (it adds to
# their PYTEST_DIRS, integration and bench).

MCLOAD_SRCS := $(sort $(wildcard tools/mcload/*.c))
MCLOAD_OBJS := $(MCLOAD_SRCS:%.c=$(B)/%.o)

$(B)/mcload: $(MCLOAD_OBJS) $(COMMON_LIB)
	$(CC) $(CFLAGS) -o $@ $^ -lpthread -lm

PROGS += $(B)/mcload
all: $(B)/mcload
integration: $(B)/mcload
PYTEST_DIRS += tests/mcload

# mcload against memaslap, requests/s and requests per client CPU second
# (goal: at least memaslap's per core).
bench-mcload: $(B)/mcload
	$(PYTHON) bench/mcload_vs_memaslap.py --build $(B)
bench: bench-mcload
.PHONY: bench-mcload

-include $(MCLOAD_OBJS:.o=.d)
