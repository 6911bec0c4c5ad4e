# SPDX-License-Identifier: MIT
# mctop's probe module: modules/mctop.c, built by the top-level
# pattern rule, and its Space-Saving table, modules/mctop/spacesaving.h,
# shared with the unit test tests/unit/test_spacesaving.c (found by
# tests/tests.mk's wildcard).  Included by the top-level Makefile after
# tests/tests.mk and tools/mcload.mk (it adds to their PYTEST_DIRS and
# integration).

MCTOP_MODULE := $(B)/modules/mctop.so

$(MCTOP_MODULE): modules/mctop/spacesaving.h modules/mctop/feed.h modules/thread_slot.h \
		  modules/memcached_probes.h
$(B)/tests/unit/test_spacesaving: modules/mctop/spacesaving.h
$(B)/tests/unit/test_mctop_feed $(B)/tests/concurrency/mctop_feed: modules/mctop/feed.h

all: $(MCTOP_MODULE)
integration: $(MCTOP_MODULE) $(B)/mcload
PYTEST_DIRS += tests/mctop

# Where an installed mctop looks for its module (tools/mctop/attach.c).
install: install-mctop-module
install-mctop-module: $(MCTOP_MODULE)
	install -d $(DESTDIR)$(PREFIX)/lib/xprobes/modules
	install -m 644 $(MCTOP_MODULE) $(DESTDIR)$(PREFIX)/lib/xprobes/modules/
.PHONY: install-mctop-module
