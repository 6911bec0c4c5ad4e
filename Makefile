# SPDX-License-Identifier: MIT
# XProbes build.  `make demo` and `make check` are the two commands a
# newcomer needs; both install missing Debian packages first.

ifeq ($(origin CC),default)
CC := gcc
endif
B        ?= build
PREFIX   ?= /usr/local
# The library, its archive and the pkg-config files; Debian's package puts
# them in the multiarch directory (debian/rules).  Modules stay in
# PREFIX/lib/xprobes/modules, where the tools look for them from PREFIX/bin.
LIBDIR   ?= $(PREFIX)/lib
DESTDIR  ?=
PYTHON   ?= /usr/bin/python3

SOVERSION := 0
# The release is defined once, in include/xprobes/version.h.
VERSION   := $(shell sed -n 's/^\#define XPROBES_VERSION "\(.*\)"/\1/p' include/xprobes/version.h)

WARN     := -Wall -Wextra -Werror
CFLAGS   ?= -O2 -g
XCFLAGS  := -std=gnu11 $(WARN) -Iinclude

# The agent, in layers (lib/LAYERS); lib/static/ goes into libxprobes_trace.a.
LIB_SRCS := $(sort $(filter-out lib/static/%,$(wildcard lib/*/*.c)))
LIB_ASMS := $(sort $(wildcard lib/*/*.S))
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/%.o) $(LIB_ASMS:%.S=$(B)/%.o)
# What the tools share (tools/common/, its one header common.h) is an
# archive: each tool links the pieces it uses and no more (mcload: cli.o).
COMMON_SRCS := $(sort $(wildcard tools/common/*.c))
COMMON_ASMS := $(sort $(wildcard tools/common/*.S))
COMMON_OBJS := $(COMMON_SRCS:%.c=$(B)/%.o) $(COMMON_ASMS:%.S=$(B)/%.o)
COMMON_LIB  := $(B)/tools/libcommon.a
# The xprobes command's own files (tools/xprobes/).
TOOL_SRCS := $(sort $(wildcard tools/xprobes/*.c))
TOOL_OBJS := $(TOOL_SRCS:%.c=$(B)/%.o) $(B)/lib/base/wire.o $(B)/lib/base/signature.o

LIBSO    := $(B)/libxprobes.so
PROGS    := $(B)/xprobes $(if $(wildcard tools/dtrace/*.c),$(B)/xprobes-dtrace)
EXAMPLES := $(B)/examples/server $(B)/examples/client
MODULES  := $(B)/modules/conn_stats.so $(B)/modules/mc_count.so

.PHONY: all deps demo check test unit integration clang bench install uninstall deb clean
all: $(LIBSO) $(PROGS) $(EXAMPLES) $(MODULES) $(B)/xprobes.pc

deps:
	@sh scripts/install-deps.sh

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

# The agent's objects: everything hidden but what lib/libxprobes.map exports.
$(B)/lib/%.o: XCFLAGS += -fvisibility=hidden

# Assembler (the injector's machine code): through cpp, for the SYS_* names.
$(B)/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIBSO).$(SOVERSION): $(LIB_OBJS) lib/libxprobes.map
	$(CC) $(CFLAGS) -shared -o $@ $(LIB_OBJS) -Wl,-soname,libxprobes.so.$(SOVERSION) \
	    -Wl,--version-script,lib/libxprobes.map -Wl,-Bsymbolic \
	    -Wl,-z,nodelete -Wl,--no-undefined -lpthread -ldl
$(LIBSO): $(LIBSO).$(SOVERSION)
	ln -sf libxprobes.so.$(SOVERSION) $@

$(COMMON_LIB): $(COMMON_OBJS)
	rm -f $@
	ar rcs $@ $^

$(B)/xprobes: $(TOOL_OBJS) $(COMMON_LIB)
	$(CC) $(CFLAGS) -o $@ $^ -ledit -ldw -lelf

# xprobes-dtrace: the drop-in for systemtap's dtrace stub.
DTRACE_SRCS := $(wildcard tools/dtrace/*.c)
DTRACE_OBJS := $(DTRACE_SRCS:%.c=$(B)/%.o)
$(B)/xprobes-dtrace: $(DTRACE_OBJS) $(COMMON_LIB)
	$(CC) $(CFLAGS) -o $@ $^

$(B)/examples/%: examples/%.c examples/server.h include/xprobes/site.h | $(LIBSO)
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -o $@ $< -L$(B) -Wl,-rpath,'$$ORIGIN/..' \
	    -Wl,--push-state,--no-as-needed -lxprobes -Wl,--pop-state -lpthread

$(B)/modules/%.so: modules/%.c include/xprobes/probe.h include/xprobes/site.h
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -shared -fPIC -o $@ $<

PC_SUBST = sed -e 's,@PREFIX@,$(PREFIX),g' -e 's,@LIBDIR@,$(LIBDIR),g' -e 's,@VERSION@,$(VERSION),g'
$(B)/xprobes.pc: xprobes.pc.in
	$(PC_SUBST) $< > $@

# The build tree before `make install`: with PKG_CONFIG_PATH=$(B),
# pkg-config takes NAME-uninstalled.pc over NAME.pc, so `pkg-config
# --cflags --libs xprobes` gives this tree's headers and library (with an
# rpath to it, so the program runs in place).
PC_UNINSTALLED := $(B)/xprobes-uninstalled.pc $(B)/xprobes-trace-uninstalled.pc
PC_TREE_SUBST = sed -e 's|@PREFIX@|$(CURDIR)|g' -e 's|@LIBDIR@|$(abspath $(B))|g' \
	-e 's|@VERSION@|$(VERSION)|g' -e 's|^Libs: -L$${libdir}|& -Wl,-rpath,$${libdir}|'
$(B)/%-uninstalled.pc: %.pc.in Makefile
	@mkdir -p $(dir $@)
	$(PC_TREE_SUBST) $< > $@
all: $(PC_UNINSTALLED)

demo: deps all
	@sh scripts/demo.sh $(B)

include tests/tests.mk
include tests/fuzz.mk
include bench/bench.mk
include tools/mcload.mk
include modules/mctop.mk
-include tools/mctop.mk
-include tools/mcsnoop.mk
-include modules/mcsnoop.mk
-include lib/trace.mk
-include tools/trace.mk
-include tools/trace_dwarf.mk
-include tools/mclat.mk

# Every module in modules/ (mctop.so, mcsnoop.so, mclat.so are the tools'
# own; conn_stats.so and mc_count.so the examples').
BUNDLED_MODULES := $(patsubst modules/%.c,%.so,$(wildcard modules/*.c))
MODDIR := $(PREFIX)/lib/xprobes/modules

install: all
	install -d $(DESTDIR)$(PREFIX)/include/xprobes $(DESTDIR)$(LIBDIR) \
	    $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(MODDIR) \
	    $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man3
	install -m 644 include/xprobes/*.h $(DESTDIR)$(PREFIX)/include/xprobes/
	install -m 644 $(LIBSO).$(SOVERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libxprobes.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libxprobes.so
	install -m 755 $(PROGS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(addprefix $(B)/modules/,$(BUNDLED_MODULES)) $(DESTDIR)$(MODDIR)/
	$(PC_SUBST) xprobes.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/xprobes.pc
	install -m 644 $(B)/libxprobes_trace.a $(DESTDIR)$(LIBDIR)/
	$(PC_SUBST) xprobes-trace.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/xprobes-trace.pc
	install -m 644 docs/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 docs/man/*.3 $(DESTDIR)$(PREFIX)/share/man/man3/
	@$(LDCONFIG_STEP)

# The dynamic linker finds a library new in a system directory only once
# ldconfig has rebuilt its cache: until then a program linked with
# `pkg-config --libs xprobes` does not start, nor does configure's "can run
# C programs" check.  Run as root into the real root, install runs it (and
# says when LIBDIR is not a directory the linker searches); otherwise it
# says it must be run.  With DESTDIR the package's own trigger runs it.
LDCONFIG_STEP = \
	if [ -n "$(DESTDIR)" ]; then :; \
	elif [ "$$(id -u)" -ne 0 ]; then \
	    echo "make install: run ldconfig as root, so that programs find libxprobes.so.$(SOVERSION) in $(LIBDIR)"; \
	else \
	    ldconfig; \
	    if ! ldconfig -p | grep -q "=> $(LIBDIR)/libxprobes.so.$(SOVERSION)$$"; then \
	        echo "make install: $(LIBDIR) is not a directory the dynamic linker searches;" \
	            "link with -Wl,-rpath,$(LIBDIR) or add it to /etc/ld.so.conf.d"; \
	    fi; \
	fi

# Removes what install put there (the files by name, then the directories
# that only XProbes uses, if empty), and the linker cache's entry.
uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/include/xprobes/,$(notdir $(wildcard include/xprobes/*.h))) \
	    $(addprefix $(DESTDIR)$(LIBDIR)/,libxprobes.so.$(SOVERSION) libxprobes.so libxprobes_trace.a \
	        pkgconfig/xprobes.pc pkgconfig/xprobes-trace.pc) \
	    $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(notdir $(PROGS))) \
	    $(addprefix $(DESTDIR)$(MODDIR)/,$(BUNDLED_MODULES)) \
	    $(addprefix $(DESTDIR)$(PREFIX)/share/man/man1/,$(notdir $(wildcard docs/man/*.1))) \
	    $(addprefix $(DESTDIR)$(PREFIX)/share/man/man3/,$(notdir $(wildcard docs/man/*.3)))
	for d in $(DESTDIR)$(PREFIX)/include/xprobes $(DESTDIR)$(MODDIR) $(DESTDIR)$(PREFIX)/lib/xprobes; do \
	    if [ -d $$d ]; then rmdir --ignore-fail-on-non-empty $$d; fi; done
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ]; then ldconfig; fi

# The Debian packages (debian/), built with dpkg-buildpackage from a copy
# of the tree in $(B)/deb, where the .deb files end up.
deb:
	sh scripts/build-deb.sh $(B)/deb

clean:
	rm -rf build build-*

-include $(LIB_OBJS:.o=.d) $(COMMON_OBJS:.o=.d) $(TOOL_OBJS:.o=.d) $(DTRACE_OBJS:.o=.d)
