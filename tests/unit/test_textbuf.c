/* SPDX-License-Identifier: MIT */
/* The reply buffer: grows, and stops cleanly at its limit. */
#include <string.h>

#include "unit.h"
#include "base/base.h"

static void test_grows_and_formats(void **state)
{
	(void)state;
	struct textbuf tb;
	tb_init(&tb, 1 << 20);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(tb_printf(&tb, "line %d\n", i), 0);
	assert_non_null(strstr(tb.data, "line 999\n"));
	assert_false(tb.truncated);
	tb_free(&tb);
}

static void test_limit_truncates_and_sticks(void **state)
{
	(void)state;
	struct textbuf tb;
	tb_init(&tb, 10);
	assert_int_equal(tb_puts(&tb, "12345"), 0);
	assert_int_equal(tb_puts(&tb, "123456"), -1);
	assert_true(tb.truncated);
	/* Once truncated, later small appends are dropped too: no holes. */
	assert_int_equal(tb_puts(&tb, "x"), -1);
	assert_string_equal(tb.data, "12345");
	tb_reset(&tb);
	assert_false(tb.truncated);
	assert_int_equal(tb.len, 0);
	tb_free(&tb);
}

static void test_long_printf(void **state)
{
	(void)state;
	struct textbuf tb;
	char big[2000];
	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	tb_init(&tb, 1 << 20);
	assert_int_equal(tb_printf(&tb, "<%s>", big), 0);
	assert_int_equal(tb.len, sizeof(big) + 1);
	tb_free(&tb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grows_and_formats),
		cmocka_unit_test(test_limit_truncates_and_sticks),
		cmocka_unit_test(test_long_printf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
