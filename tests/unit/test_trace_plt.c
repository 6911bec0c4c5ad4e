/* SPDX-License-Identifier: MIT */
/* Hooking library calls (lib/trace/trace_plt.c) in this very process.
 * This file is built with the xprobes-trace flags and -z now (lib/trace.mk),
 * so it is a traced object whose GOT is read-only after loading (full
 * RELRO): every slot write goes through the mprotect path.  Recording is
 * off throughout, so the stubs call through without recording. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "base/base.h"
#include "trace/trace.h"

struct slots {
	uintptr_t addr[512];
	uintptr_t value[512];
	size_t n;
};

/* This program's JUMP_SLOT slots and their values now. */
static int own_slots(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct slots *s = arg;
	if (info->dlpi_name[0])
		return 0; /* the program is the first, with no name */
	uintptr_t jmprel = 0;
	size_t sz = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
			continue;
		for (const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr +
								info->dlpi_phdr[i].p_vaddr);
		     d->d_tag != DT_NULL; d++) {
			if (d->d_tag == DT_JMPREL)
				jmprel = d->d_un.d_ptr < info->dlpi_addr ? d->d_un.d_ptr + info->dlpi_addr
									  : d->d_un.d_ptr;
			if (d->d_tag == DT_PLTRELSZ)
				sz = d->d_un.d_val;
		}
	}
	for (size_t i = 0; jmprel && i < sz / sizeof(ElfW(Rela)) && s->n < 512; i++) {
		const ElfW(Rela) *r = (const ElfW(Rela) *)jmprel + i;
		s->addr[s->n] = info->dlpi_addr + r->r_offset;
		s->value[s->n] = *(const uintptr_t *)s->addr[s->n];
		s->n++;
	}
	return 1;
}

static void snapshot(struct slots *s)
{
	s->n = 0;
	dl_iterate_phdr(own_slots, s);
	assert_true(s->n > 3);
}

static int same(const struct slots *a)
{
	struct slots b;
	snapshot(&b);
	return b.n == a->n && memcmp(a->value, b.value, a->n * sizeof(*a->value)) == 0;
}

/* Library calls through the PLT, with known results. */
__attribute__((noinline)) static long calls(void)
{
	char *p = strdup("library");
	long n = p ? (long)strlen(p) : -1;
	free(p);
	return n + (getpid() > 0);
}

static void test_on_off(void **state)
{
	(void)state;
	assert_int_equal(xp_trace_objects_refresh(), 0);
	assert_int_equal(calls(), 8);
	struct slots before;
	snapshot(&before);
	assert_int_equal(xp_trace_plt_on(NULL, 0), 0);
	assert_true(xp_trace_plt_hooked() > 3);
	assert_false(same(&before));
	assert_int_equal(calls(), 8); /* through the stubs */
	assert_int_equal(xp_trace_plt_on(NULL, 0), 0); /* again: nothing more */
	assert_int_equal(xp_trace_plt_off(), 0);
	assert_int_equal(xp_trace_plt_hooked(), 0);
	assert_true(same(&before));
	assert_int_equal(calls(), 8);
}

/* Every fault point of hooking and of putting back in turn: a failed
 * start leaves every slot as it was; a failed stop leaves the slots not
 * put back hooked, and the next stop puts them back. */
static void test_faults(void **state)
{
	(void)state;
	assert_int_equal(xp_trace_objects_refresh(), 0);
	struct slots before;
	snapshot(&before);
	int on_failures = 0, off_failures = 0;
	for (long k = 0; k < 100000; k++) {
		xp_fault_countdown = k;
		int rc = xp_trace_plt_on(NULL, 0);
		int fired = xp_fault_countdown < 0;
		xp_fault_countdown = -1;
		if (rc == 0) {
			assert_false(fired);
			break;
		}
		assert_true(fired);
		assert_true(same(&before));
		assert_int_equal(calls(), 8);
		on_failures++;
	}
	assert_true(on_failures >= 3); /* maps, stub pages, mprotect of a GOT page */
	for (long k = 0; k < 100000; k++) {
		xp_fault_countdown = k;
		int rc = xp_trace_plt_off();
		int fired = xp_fault_countdown < 0;
		xp_fault_countdown = -1;
		assert_int_equal(calls(), 8);
		if (rc == 0) {
			assert_false(fired);
			break;
		}
		assert_true(fired);
		off_failures++;
	}
	assert_true(off_failures >= 2);
	assert_true(same(&before));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_on_off),
		cmocka_unit_test(test_faults),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
