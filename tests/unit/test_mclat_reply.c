/* SPDX-License-Identifier: MIT */
/* mclat's reading of modules/mclat.so's `read` answer (tools/mclat/reply.c)
 * on canned text: batches in order, the end line's counts, and every kind
 * of broken line refused with its line number rather than skipped. */
#include <string.h>

#include "unit.h"

#include "mclat.h"

struct got {
	struct module_batch b[8];
	unsigned n;
};

static void collect(const struct module_batch *m, void *arg)
{
	struct got *g = arg;
	if (g->n < 8)
		g->b[g->n] = *m;
	g->n++;
}

static int parse(const char *text, struct got *g, uint64_t *now, unsigned long long *dropped,
		 char *why)
{
	memset(g, 0, sizeof(*g));
	*now = 0;
	*dropped = 0;
	why[0] = 0;
	return module_parse_reply(text, collect, g, now, dropped, why, 256);
}

static void reads_batches_and_the_end_line(void **state)
{
	(void)state;
	struct got g;
	uint64_t now;
	unsigned long long dropped;
	char why[256];
	int more = parse("mclat 1 now_ns=900\n"
			 "101 7 100 250\n"
			 "102 2147483647 18446744073709551615 18446744073709551615\n"
			 "end records=2 dropped=5 more=1\n",
			 &g, &now, &dropped, why);
	assert_int_equal(more, 1);
	assert_int_equal(now, 900);
	assert_int_equal(dropped, 5);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.b[0].tid, 101);
	assert_int_equal(g.b[0].fd, 7);
	assert_int_equal(g.b[0].start_ns, 100);
	assert_int_equal(g.b[0].end_ns, 250);
	assert_int_equal(g.b[1].fd, 2147483647);
	assert_true(g.b[1].end_ns == 18446744073709551615ull);
	/* No batch at all, and nothing more waiting. */
	assert_int_equal(parse("mclat 1 now_ns=1\nend records=0 dropped=0 more=0\n", &g, &now,
			       &dropped, why),
			 0);
	assert_int_equal(g.n, 0);
}

static void refuses_broken_lines_with_their_number(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"101 7 100\n",                       /* a field short */
		"101 7 100 250 9\n",                 /* one too many */
		"101 7 100 25x\n",                   /* trailing junk */
		"-1 7 100 250\n",                    /* negative thread */
		"101 -7 100 250\n",                  /* negative connection */
		"101 7 -100 250\n",                  /* negative time */
		"101 2147483648 100 250\n",          /* past an int */
		"101 7 100 18446744073709551616\n",  /* past 64 bits */
		"101  7 100 250\n",                  /* two spaces */
		"\n",                                /* empty */
		"end records=1 dropped=0 more=7\n",  /* more is 0 or 1 */
		"end records=1\n",                   /* an end line cut short */
		"end records=1 dropped=-3 more=0\n", /* a sign */
		"end records=1 dropped= 3 more=0\n", /* a space */
		"end records=1 dropped=0 more=1 x\n",/* trailing junk */
		"end records=7 dropped=0 more=0\n",  /* not the lines it counts */
		"end records=1 dropped=0 more=0\nx\n", /* something after the end */
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[256];
		snprintf(text, sizeof(text), "mclat 1 now_ns=5\n1 2 3 4\n%send records=2 dropped=0 more=0\n",
			 bad[i]);
		struct got g;
		uint64_t now;
		unsigned long long dropped;
		char why[256];
		int rc = parse(text, &g, &now, &dropped, why);
		if (rc != -1)
			print_error("case %u: %d\n", i, rc);
		assert_int_equal(rc, -1);
		assert_non_null(strstr(why, "line 3 of the module's answer is malformed"));
		assert_int_equal(g.n, 1); /* the good line before it was taken */
	}
}

static void refuses_a_missing_header_or_end(void **state)
{
	(void)state;
	{
		struct got g;
		uint64_t now;
		unsigned long long dropped;
		char why[256];
		assert_int_equal(parse("mclat 1 now_ns=-5\nend records=0 dropped=0 more=0\n", &g,
				       &now, &dropped, why),
				 -1);
		assert_int_equal(parse("mclat 1 now_ns=5 x\nend records=0 dropped=0 more=0\n", &g,
				       &now, &dropped, why),
				 -1);
	}
	struct got g;
	uint64_t now;
	unsigned long long dropped;
	char why[256];
	assert_int_equal(parse("mctop 1 now_ns=5\nend records=0 dropped=0 more=0\n", &g, &now,
			       &dropped, why),
			 -1);
	assert_non_null(strstr(why, "unexpected answer from the module: mctop 1"));
	assert_int_equal(parse("mclat 1 now_ns=5\n1 2 3 4\n", &g, &now, &dropped, why), -1);
	assert_string_equal(why, "the module's answer has no end line");
	assert_int_equal(parse("", &g, &now, &dropped, why), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_batches_and_the_end_line),
		cmocka_unit_test(refuses_broken_lines_with_their_number),
		cmocka_unit_test(refuses_a_missing_header_or_end),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
