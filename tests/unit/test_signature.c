/* Signature canonicalisation: what makes a probe's types equal a site's. */
#include <string.h>

#include "unit.h"
#include "signature.h"

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
	/* Too long to compare means not equal, never a false match. */
	char big[1400];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_false(sig_equal(big, big));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spaces_around_pointers),
		cmocka_unit_test(test_empty_lists),
		cmocka_unit_test(test_commas_and_function_pointers),
		cmocka_unit_test(test_equal),
		cmocka_unit_test(test_truncation_is_reported),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
