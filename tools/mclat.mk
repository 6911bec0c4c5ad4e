# SPDX-License-Identifier: MIT
# mclat: per-stage latency of memcached requests.  Included by
# the top-level Makefile after tests/tests.mk and bench/bench.mk (it adds
# to PYTEST_DIRS, integration and bench).
#
#   bpf/mclat.bpf.c    kernel stages: tracepoint programs, compiled by
#                      clang against a vmlinux.h dumped from this kernel's
#                      BTF at build time (CO-RE: the program runs on any
#                      kernel with BTF), made into a skeleton header that
#                      tools/mclat/kernel.c includes (libbpf, bpftool)
#   modules/mclat.c    the user-space stage, built by the top-level rule
#   tools/mclat/*.c    the tool
#
# Everything generated stays in $(B)/bpf.

BPFTOOL ?= bpftool
BPF_CLANG ?= clang
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux

MCLAT_SRCS := $(sort $(wildcard tools/mclat/*.c))
MCLAT_OBJS := $(MCLAT_SRCS:%.c=$(B)/%.o)
MCLAT_LINK := $(COMMON_LIB) $(B)/lib/base/wire.o

$(B)/bpf/vmlinux.h:
	@mkdir -p $(dir $@)
	$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@.tmp && mv $@.tmp $@

# -Wno-unused-parameter: BPF_PROG() passes ctx to every program.
$(B)/bpf/mclat.bpf.o: bpf/mclat.bpf.c bpf/mclat.h $(B)/bpf/vmlinux.h
	$(BPF_CLANG) -O2 -g -target bpf -D__TARGET_ARCH_x86 -I$(B)/bpf -Ibpf \
	    -Wall -Wextra -Wno-unused-parameter -Werror -c $< -o $@.full
	$(BPFTOOL) gen object $@ $@.full

$(B)/bpf/mclat.skel.h: $(B)/bpf/mclat.bpf.o
	$(BPFTOOL) gen skeleton $< name mclat_bpf > $@.tmp && mv $@.tmp $@

$(MCLAT_OBJS): XCFLAGS += -I$(B)/bpf
$(B)/tools/mclat/kernel.o: $(B)/bpf/mclat.skel.h

# tests/unit/test_mclat_X.c tests tools/mclat/X.c alone (the reply parser,
# the percentiles): a rule of its own, because tests/tests.mk's pattern
# rule links a test with the agent's objects only.
$(B)/tests/unit/test_mclat_%: tests/unit/test_mclat_%.c tests/unit/unit.h $(B)/tools/mclat/%.o
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) $(LDFLAGS) -I$(B)/bpf -Itools/mclat -o $@ $< \
	    $(B)/tools/mclat/$*.o -lcmocka

$(B)/mclat: $(MCLAT_OBJS) $(MCLAT_LINK)
	$(CC) $(CFLAGS) -o $@ $^ -lbpf -lelf -lz -lm

$(B)/modules/mclat.so: modules/thread_slot.h modules/memcached_probes.h tools/common/keytext_rule.h

# The fixture that delays memcached's commands (tests/mclat).
$(B)/tests/mclat/mod_delay.so: tests/mclat/mod_delay.c modules/memcached_probes.h \
		include/xprobes/probe.h
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) -Imodules $(CFLAGS) -shared -fPIC -o $@ $<

# The fixture that makes chosen keys' gets slow (tests/mclat, --slow).
$(B)/tests/mclat/mod_slowkeys.so: tests/mclat/mod_slowkeys.c modules/memcached_probes.h \
		include/xprobes/probe.h
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) -Imodules $(CFLAGS) -shared -fPIC -o $@ $<

MCLAT_ALL := $(B)/mclat $(B)/modules/mclat.so $(B)/tests/mclat/mod_delay.so \
	     $(B)/tests/mclat/mod_slowkeys.so
PROGS += $(B)/mclat
all: $(MCLAT_ALL)
integration: $(MCLAT_ALL) $(B)/mcload
PYTEST_DIRS += tests/mclat

install: install-mclat-module
install-mclat-module: $(B)/modules/mclat.so
	install -d $(DESTDIR)$(PREFIX)/lib/xprobes/modules
	install -m 644 $< $(DESTDIR)$(PREFIX)/lib/xprobes/modules/
.PHONY: install-mclat-module

# The floor: programs that do nothing on mclat's hooks (bench/bpf_floor.bpf.c).
$(B)/bench/bpf_floor.bpf.o: bench/bpf_floor.bpf.c $(B)/bpf/vmlinux.h
	@mkdir -p $(dir $@)
	$(BPF_CLANG) -O2 -g -target bpf -I$(B)/bpf -Wall -Wextra -Werror -c $< -o $@
$(B)/bench/bpf_floor: bench/bpf_floor.c
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -o $@ $< -lbpf -lelf -lz

# memcached's throughput with mclat attached and without (interleaved
# windows in one process), sampled (the default) and --all, the cost per
# request, the floor's and bpftrace's (bench/mclat_stages.bt, the same
# stages) against the same baseline; then sampled against --all, each
# stage's p50 and p99 under a steady mcload.
bench-mclat: $(MCLAT_ALL) $(B)/xprobes $(B)/xprobes-dtrace $(LIBSO) $(B)/mcload \
	     $(B)/bench/bpf_floor $(B)/bench/bpf_floor.bpf.o
	$(PYTHON) bench/mclat_bench.py --build $(B) $(MCLAT_BENCH_ARGS)
bench: bench-mclat
.PHONY: bench-mclat

-include $(MCLAT_OBJS:.o=.d)

# mclat --slow with nothing slow at saturation, beside trace record
# (windows in one memcached, ABBA order): bench/slow_memcached.py.
bench-mclat-slow: $(MCLAT_ALL) $(B)/xprobes $(B)/xprobes-dtrace $(LIBSO) $(B)/mcload \
		  $(B)/libxprobes_trace.a
	$(PYTHON) bench/slow_memcached.py --build $(B) $(MCLAT_SLOW_BENCH_ARGS)
.PHONY: bench-mclat-slow
