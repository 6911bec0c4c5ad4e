/* SPDX-License-Identifier: MIT */
/* Signature canonicalisation: what makes a probe's types equal a site's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "base/base.h"

static void expect_canon(const char *in, const char *want)
{
	char out[256];
	assert_int_equal(sig_canonical(in, out, sizeof(out)), 0);
	assert_string_equal(out, want);
}

static void test_spaces_around_pointers(void **state)
{
	(void)state;
	expect_canon("(const struct conn *)", "const struct conn*");
	expect_canon("( const  struct conn* )", "const struct conn*");
	expect_canon("(char * * , int)", "char**, int");
	expect_canon("(const char *const)", "const char*const");
}

static void test_empty_lists(void **state)
{
	(void)state;
	expect_canon("()", "");
	expect_canon("(void)", "");
	expect_canon("( )", "");
}

static void test_commas_and_function_pointers(void **state)
{
	(void)state;
	expect_canon("(int,long,  unsigned  long)", "int, long, unsigned long");
	expect_canon("(int (*)(int, char *))", "int(*)(int, char*)");
}

static void test_equal(void **state)
{
	(void)state;
	assert_true(sig_equal("(const struct conn *)", "(const struct conn*)"));
	assert_true(sig_equal("(int, char *)", "(int,char*)"));
	assert_true(sig_equal("()", "(void)"));
	assert_false(sig_equal("(int)", "(long)"));
	assert_false(sig_equal("(unsigned int)", "(unsignedint)"));
	assert_false(sig_equal("(const char *)", "(char *)"));
	assert_false(sig_equal("(int, int)", "(int)"));
}

static void test_truncation_is_reported(void **state)
{
	(void)state;
	char out[8];
	assert_int_equal(sig_canonical("(const struct conn *)", out, sizeof(out)), -1);
	assert_int_equal(strlen(out), sizeof(out) - 1);
}

/* Any length compares exactly: two type lists that agree in their first
 * 1023 characters (the old fixed buffer) and differ after it are not the
 * same signature, and equal long lists are. */
static void test_long_lists_compare_exactly(void **state)
{
	(void)state;
	static char a[5000], b[5000];
	size_t n = 0;
	a[n++] = '(';
	while (n < 4000)
		n += (size_t)snprintf(a + n, sizeof(a) - n, "struct s%zu *, ", n);
	memcpy(a + n, "int)", 5);
	memcpy(b, a, sizeof(a));
	assert_true(sig_equal(a, b));
	b[n] = 'l', b[n + 1] = 'o', b[n + 2] = 'n', b[n + 3] = 'g';
	b[n + 4] = ')', b[n + 5] = '\0';
	assert_false(sig_equal(a, b));
	char *ca = sig_canonical_dup(a);
	assert_non_null(ca);
	assert_true(strlen(ca) > 3000); /* far past the old 1023 */
	free(ca);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spaces_around_pointers),
		cmocka_unit_test(test_empty_lists),
		cmocka_unit_test(test_commas_and_function_pointers),
		cmocka_unit_test(test_equal),
		cmocka_unit_test(test_truncation_is_reported),
		cmocka_unit_test(test_long_lists_compare_exactly),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
