# SPDX-License-Identifier: MIT
# mcsnoop's probe module: modules/mcsnoop.c, built by the
# top-level pattern rule, with its event record and per-thread ring
# (modules/mcsnoop/*.h), which tests/unit/test_mcsnoop_ring.c and
# tests/concurrency/mcsnoop_ring.c test (found by tests/tests.mk's
# wildcards).  The CLI and its tests are in tools/mcsnoop.mk.

MCSNOOP_MODULE := $(B)/modules/mcsnoop.so
MCSNOOP_HDRS := $(wildcard modules/mcsnoop/*.h) modules/thread_slot.h modules/memcached_probes.h

$(MCSNOOP_MODULE): $(MCSNOOP_HDRS)
$(B)/tests/unit/test_mcsnoop_ring $(B)/tests/concurrency/mcsnoop_ring: $(MCSNOOP_HDRS)

all: $(MCSNOOP_MODULE)

# Installed where mcsnoop looks for it from PREFIX/bin.
install: install-mcsnoop-module
install-mcsnoop-module: $(MCSNOOP_MODULE)
	install -d $(DESTDIR)$(PREFIX)/lib/xprobes/modules
	install -m 644 $(MCSNOOP_MODULE) $(DESTDIR)$(PREFIX)/lib/xprobes/modules/
.PHONY: install-mcsnoop-module
