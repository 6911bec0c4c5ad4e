/* SPDX-License-Identifier: MIT */
/* lib/base/base.h: which globs the agent and the CLI accept. */
#include <string.h>

#include "unit.h"

#include "base/base.h"

static void accepts_well_formed_globs(void **state)
{
	(void)state;
	static const char *const good[] = {
		"", "*", "conn_*", "a?c", "a[bc]d", "[!a]*", "[^a]", "[]]", "[!]]x", "[a-z]*",
		"[[:alpha:]]*", "[[:digit:][:space:]]", "a\\[", "[\\]]", "\\\\", "memcached:*",
		"[[:alpha]", /* no ":]": an ordinary '[' in the set, as fnmatch takes it */
		"[[:alpha]:]]", /* the same set, then ":]]" */
	};
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (xp_glob_error(good[i]))
			fail_msg("'%s' refused: %s", good[i], xp_glob_error(good[i]));
}

static void names_what_is_wrong(void **state)
{
	(void)state;
	assert_string_equal(xp_glob_error("["), "a '[' is not closed by ']'");
	assert_string_equal(xp_glob_error("conn_[ab"), "a '[' is not closed by ']'");
	assert_string_equal(xp_glob_error("[]"), "a '[' is not closed by ']'");
	assert_string_equal(xp_glob_error("[!]"), "a '[' is not closed by ']'");
	assert_string_equal(xp_glob_error("a[\\]"), "a '[' is not closed by ']'");
	assert_string_equal(xp_glob_error("[[:alpha:]"), "a '[' is not closed by ']'");
	assert_non_null(strstr(xp_glob_error("[[:alpah:]]"), "class is not one of alnum"));
	assert_string_equal(xp_glob_error("[[:alpha:"), "a '[' is not closed by ']'");
	assert_string_equal(xp_glob_error("site\\"), "it ends with a lone '\\'");
	assert_string_equal(xp_glob_error(NULL), "it is missing");
}

static void splits_outside_sets(void **state)
{
	(void)state;
	char a[] = "lib*:conn_*", b[] = "host_[[:alpha:]]sg", c[] = "[:]x:y", d[] = "a\\:b:c";
	assert_string_equal(xp_glob_colon(a), ":conn_*");
	assert_null(xp_glob_colon(b));
	assert_string_equal(xp_glob_colon(c), ":y");
	assert_string_equal(xp_glob_colon(d), ":c");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(accepts_well_formed_globs),
		cmocka_unit_test(names_what_is_wrong),
		cmocka_unit_test(splits_outside_sets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
