# SPDX-License-Identifier: MIT
# Tests.  Included by the top-level Makefile.
#
#   make check        everything below, after installing missing packages
#   make unit         cmocka unit tests (this build)
#   make sanitize     unit tests again under ASan+UBSan (build-asan/)
#   make tsan         concurrency tests under TSan (build-tsan/)
#   make integration  pytest on real processes (tests/integration: the
#                     runtime; tests/build: compiler/linker matrix; tests/dtrace)
#   make clang        the whole tree with clang -Werror (build-clang/)
#   make fuzz-check   each libFuzzer harness for 20 s (tests/fuzz.mk; `make fuzz`: longer)
#
# Fixtures (tests/fixtures/) are built by file name:
#   lib*.c  -> shared library with sites        $(B)/tests/fixtures/lib*.so
#   mod_*.c -> probe module                     $(B)/tests/fixtures/mod_*.so
#   other   -> program linked with -lxprobes    $(B)/tests/fixtures/NAME
#   nolib_*.c -> program with sites and no agent (for LD_PRELOAD tests)

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(B)/tests/unit/%)
CONC_SRCS := $(wildcard tests/concurrency/*.c)
CONC_BINS := $(CONC_SRCS:tests/concurrency/%.c=$(B)/tests/concurrency/%)

FIX_SRCS  := $(wildcard tests/fixtures/*.c)
FIX_LIBS  := $(patsubst tests/fixtures/%.c,$(B)/tests/fixtures/%.so,$(filter tests/fixtures/lib%.c tests/fixtures/mod_%.c,$(FIX_SRCS)))
FIX_PROGS := $(patsubst tests/fixtures/%.c,$(B)/tests/fixtures/%,$(filter-out tests/fixtures/lib%.c tests/fixtures/mod_%.c,$(FIX_SRCS)))
FIXTURES  := $(FIX_LIBS) $(FIX_PROGS)

LINK_AGENT := -L$(B) -Wl,-rpath,'$$ORIGIN/../..' \
              -Wl,--push-state,--no-as-needed -lxprobes -Wl,--pop-state

.PHONY: fixtures unit sanitize tsan integration clang layers
fixtures: $(FIXTURES)

$(B)/tests/fixtures/lib%.so: tests/fixtures/lib%.c include/xprobes/site.h
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -shared -fPIC -o $@ $<
$(B)/tests/fixtures/mod_%.so: tests/fixtures/mod_%.c include/xprobes/probe.h include/xprobes/site.h
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -shared -fPIC -o $@ $<
FIX_HDRS  := $(wildcard tests/fixtures/*.h)
$(FIXTURES): $(FIX_HDRS)
$(B)/tests/fixtures/nolib_%: tests/fixtures/nolib_%.c include/xprobes/site.h $(wildcard tests/fixtures/sitehost.c)
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -o $@ $< -lpthread -ldl
$(B)/tests/fixtures/%: tests/fixtures/%.c include/xprobes/site.h $(LIBSO)
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -o $@ $< $(LINK_AGENT) -lpthread -ldl

# Unit tests link the agent's objects directly (not the .so) so they can
# reach internal functions; XPROBES_AGENT=off keeps the constructor quiet.
$(B)/tests/unit/%: tests/unit/%.c $(LIB_OBJS) tests/unit/unit.h
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -Ilib -o $@ $< $(LIB_OBJS) -lcmocka -lpthread -ldl

$(B)/tests/concurrency/%: tests/concurrency/%.c $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -Ilib -o $@ $< $(LIB_OBJS) -lpthread -ldl

unit: $(UNIT_BINS) $(FIXTURES)
	@set -e; for t in $(UNIT_BINS); do \
	    echo "== $$t"; XPROBES_AGENT=off XPROBES_TEST_BUILD=$(B) $$t; done

# die_after_fork=0: fork_busy's children start the agent's thread, which
# TSan refuses by default after a multi-threaded fork.
conc: $(CONC_BINS) $(FIXTURES)
	@set -e; for t in $(CONC_BINS); do \
	    echo "== $$t"; TSAN_OPTIONS="die_after_fork=0 $$TSAN_OPTIONS" XPROBES_TEST_BUILD=$(B) $$t; done

SAN_FLAGS  := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
TSAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=thread

sanitize:
	$(MAKE) B=build-asan CFLAGS="$(SAN_FLAGS)" LDFLAGS="$(SAN_FLAGS)" unit

tsan:
	$(MAKE) B=build-tsan CFLAGS="$(TSAN_FLAGS)" conc

PYTEST_DIRS := $(wildcard tests/integration tests/build tests/inject tests/dtrace tests/memcached tests/trace)
integration: all $(FIXTURES)
	XPROBES_BUILD=$(abspath $(B)) $(PYTHON) -m pytest -q $(PYTEST_DIRS)

clang:
	$(MAKE) B=build-clang CC=clang all $(FIXTURES:$(B)/%=build-clang/%)

# The layers of lib/ and tools/ (LAYERS in each), from the objects' symbol
# tables: no reference up a layer, no cycle.
layers: all
	$(PYTHON) scripts/check-layers.py $(B)/lib lib/LAYERS
	@if [ -f tools/LAYERS ]; then $(PYTHON) scripts/check-layers.py $(B)/tools tools/LAYERS; fi

check: deps all layers fixtures unit sanitize tsan clang fuzz-check integration
	@echo "make check: all passed"
