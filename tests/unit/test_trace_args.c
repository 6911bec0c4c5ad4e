/* SPDX-License-Identifier: MIT */
/* Argument specs and their capture (lib/trace/trace_args.c): the item
 * syntax `trace args` takes, the table, and what a capture writes for
 * registers, stack words and strings good, long, NULL and unmapped. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "unit.h"
#include "trace/trace.h"

static void test_parse(void **state)
{
	(void)state;
	uint8_t it[XP_TRACE_ARG_ITEMS];
	assert_int_equal(xp_trace_args_parse("i1,s2,f1,r", it), 0);
	assert_int_equal(xp_trace_args_parse("rf", it), 0);
	assert_int_equal(xp_trace_args_parse("rs", it), 0);
	assert_int_equal(xp_trace_args_parse("i16,f8", it), 0);
	const char *bad[] = { "", "i0", "i17", "f9", "x1", "i", "r1", "rr", "i1,,i2", "i1,",
			      "i1,i2,i3,i4,i5,i6,i7,i8,i9", "i-1", "s1x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		assert_int_equal(xp_trace_args_parse(bad[i], it), -1);
}

static void test_table(void **state)
{
	(void)state;
	uint8_t it[XP_TRACE_ARG_ITEMS];
	xp_trace_args_clear();
	assert_int_equal(xp_trace_args_parse("i1", it), 0);
	for (uintptr_t f = 1; f <= 1000; f++)
		assert_int_equal(xp_trace_args_set(f * 16, it), 0);
	assert_int_equal(xp_trace_args_set(0, it), -EINVAL);
	assert_int_equal(xp_trace_args_count(), 1000);
	assert_int_equal(xp_trace_args_set(16, it), 0); /* replaced, not added */
	assert_int_equal(xp_trace_args_count(), 1000);
	assert_non_null(xp_trace_args_find(16000));
	assert_null(xp_trace_args_find(16008));
	/* Used by a start, then given again: a new set. */
	assert_int_equal(xp_trace_args_on, 0);
	xp_trace_args_arm();
	assert_int_equal(xp_trace_args_on, 1);
	xp_trace_args_disarm();
	assert_int_equal(xp_trace_args_on, 0);
	assert_non_null(xp_trace_args_find(32)); /* late exits still find theirs */
	assert_int_equal(xp_trace_args_set(48, it), 0);
	assert_int_equal(xp_trace_args_count(), 1);
	assert_null(xp_trace_args_find(32));
	xp_trace_args_clear();
	xp_trace_args_arm();
	assert_int_equal(xp_trace_args_on, 0); /* nothing given: no lookups */
	xp_trace_args_disarm();
}

/* The tool's options text: kept whole, bounded, forgotten with the specs. */
static void test_options(void **state)
{
	(void)state;
	static char big[XP_TRACE_ARG_OPTIONS_MAX + 2];
	uint8_t it[XP_TRACE_ARG_ITEMS];
	xp_trace_args_clear();
	assert_string_equal(xp_trace_args_options(), "");
	assert_int_equal(xp_trace_args_set_options("-A f@arg1/x -R f@retval"), 0);
	assert_string_equal(xp_trace_args_options(), "-A f@arg1/x -R f@retval");
	memset(big, 'x', XP_TRACE_ARG_OPTIONS_MAX + 1);
	assert_int_equal(xp_trace_args_set_options(big), -E2BIG);
	assert_string_equal(xp_trace_args_options(), "-A f@arg1/x -R f@retval");
	big[XP_TRACE_ARG_OPTIONS_MAX] = 0;
	assert_int_equal(xp_trace_args_set_options(big), 0);
	assert_int_equal(strlen(xp_trace_args_options()), XP_TRACE_ARG_OPTIONS_MAX);
	assert_int_equal(xp_trace_args_set_options("-a"), 0); /* a later one replaces */
	xp_trace_args_arm(); /* a start used them; they stay for its readers */
	xp_trace_args_disarm();
	assert_string_equal(xp_trace_args_options(), "-a");
	assert_int_equal(xp_trace_args_parse("i1", it), 0);
	assert_int_equal(xp_trace_args_set(16, it), 0); /* the next start's: a new set */
	assert_string_equal(xp_trace_args_options(), "");
	assert_int_equal(xp_trace_args_set_options("-R g@retval"), 0);
	xp_trace_args_clear();
	assert_string_equal(xp_trace_args_options(), "");
}

static uint64_t word(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static void test_capture(void **state)
{
	(void)state;
	struct xp_trace_argspec s = { .func = 64 };
	assert_int_equal(xp_trace_args_parse("i1,i2,i7,s3,s4,s5,s6,r", s.item), 0);
	/* rdi at regs[0], rsi below it and so on, as the hooks push them. */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char *two = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(two != MAP_FAILED);
	assert_int_equal(munmap(two + page, page), 0);
	char *edge = two + page - 3; /* "ab" + NUL just before an unmapped page */
	memcpy(edge, "ab", 3);
	char *cut = two; /* 200 bytes of 'x' then NUL */
	memset(cut, 'x', 200);
	cut[200] = 0;
	uintptr_t saved[6] = { 0 }, stack[2] = { 777, 0 };
	uintptr_t *regs = &saved[5];
	regs[0] = (uintptr_t)-5;     /* i1 */
	regs[-1] = 42;               /* i2 */
	regs[-2] = (uintptr_t)edge;  /* s3 */
	regs[-3] = 0;                /* s4: NULL */
	regs[-4] = (uintptr_t)(two + page); /* s5: unmapped */
	regs[-5] = (uintptr_t)cut;   /* s6: longer than kept */
	xp_trace_args_after_fork(); /* this process's pid */
	uint8_t out[XP_TRACE_ARG_MAX_BYTES];
	size_t n = xp_trace_args_capture(&s, 0, regs, stack, out);
	const uint8_t *p = out;
	assert_int_equal((int64_t)word(p), -5);
	assert_int_equal(word(p + 8), 42);
	assert_int_equal(word(p + 16), 777);
	p += 24;
	assert_int_equal(p[0], XP_TRACE_ARG_STR_OK);
	assert_int_equal(p[1], 2);
	assert_memory_equal(p + 2, "ab", 2);
	p += 4;
	assert_int_equal(p[0], XP_TRACE_ARG_STR_NULL);
	p += 1;
	assert_int_equal(p[0], XP_TRACE_ARG_STR_BAD);
	assert_int_equal(word(p + 1), (uintptr_t)(two + page));
	p += 9;
	assert_int_equal(p[0], XP_TRACE_ARG_STR_CUT);
	assert_int_equal(p[1], XP_TRACE_ARG_STR_MAX);
	p += 2 + XP_TRACE_ARG_STR_MAX;
	assert_int_equal(n, (size_t)(p - out));
	/* The return items alone: rax at regs[0]. */
	uintptr_t rax = 9;
	n = xp_trace_args_capture(&s, 1, &rax, stack, out);
	assert_int_equal(n, 8);
	assert_int_equal(word(out), 9);
	assert_int_equal(xp_trace_args_ret_recs(&s), 2);
	munmap(two, page);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_capture),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
