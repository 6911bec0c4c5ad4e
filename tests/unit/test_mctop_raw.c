/* SPDX-License-Identifier: MIT */
/* mctop's reading of the module's "top N raw" text (tools/mctop/raw.c),
 * its -c words, and --prefix grouping (tools/mctop/prefix.c), on canned
 * text in the format mctop.h documents. */
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "core.h"

#define HEAD "mctop 1 now_ns=5000000000 total=1234 tracked=3 untracked=7 threads=2 " \
	     "counters=2048 bytes=65536 budget=33554432 bound=4\n"
#define HIST0 "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0"
#define HIST1 "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28," \
	      "29,30,31,32"

static void parses_header_and_keys(void **state)
{
	(void)state;
	const char *text = HEAD
		"user:1\t100\t2\t37\t3700\t500000\t50\t1000\t3\t60\t10\t20\t1\t0\t2\t0\t0\t0\t3\t1\t3\t" HIST1 "\n"
		"a\\x01b\t5\t0\t-1\t0\t0\t0\t2000\t1\t0\t5\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t" HIST0 "\n"
		"end\n";
	struct mctop_raw r;
	char why[256] = "";
	assert_int_equal(mctop_raw_parse(text, &r, why, sizeof(why)), 0);
	assert_int_equal(r.now_ns, 5000000000ull);
	assert_int_equal(r.total, 1234);
	assert_int_equal(r.tracked, 3);
	assert_int_equal(r.untracked, 7);
	assert_int_equal(r.threads, 2);
	assert_int_equal(r.counters, 2048);
	assert_int_equal(r.bytes, 65536);
	assert_int_equal(r.budget, 33554432);
	assert_int_equal(r.bound, 4);
	assert_int_equal(r.lat_every, 1); /* not said (an older module): every command */
	assert_int_equal(r.nkeys, 2);

	const struct mctop_raw_key *k = &r.keys[0];
	assert_string_equal(k->key, "user:1");
	assert_int_equal(k->calls, 100);
	assert_int_equal(k->err, 2);
	assert_int_equal(k->objsize, 37);
	assert_int_equal(k->bytes, 3700);
	assert_int_equal(k->lat_sum_ns, 500000);
	assert_int_equal(k->lat_n, 50);
	assert_int_equal(k->first_ns, 1000);
	assert_int_equal(k->clients, 3);
	assert_int_equal(k->ncmd[MC_GET_HIT], 60);
	assert_int_equal(k->ncmd[MC_GET_MISS], 10);
	assert_int_equal(k->ncmd[MC_SET], 20);
	assert_int_equal(k->ncmd[MC_ADD], 1);
	assert_int_equal(k->ncmd[MC_APPEND], 2);
	assert_int_equal(k->ncmd[MC_INCR], 3);
	assert_int_equal(k->ncmd[MC_DECR], 1);
	assert_int_equal(k->ncmd[MC_DELETE], 3);
	for (int h = 0; h < MCTOP_HIST; h++)
		assert_int_equal(k->hist[h], h + 1);
	assert_int_equal(r.keys[1].objsize, -1);

	/* Lookups by the escaped key. */
	assert_ptr_equal(mctop_raw_find(&r, "a\\x01b"), &r.keys[1]);
	assert_ptr_equal(mctop_raw_find(&r, "user:1"), &r.keys[0]);
	assert_null(mctop_raw_find(&r, "user:2"));
	mctop_raw_free(&r);
}

static void empty_table_and_unknown_header_fields(void **state)
{
	(void)state;
	struct mctop_raw r;
	char why[256];
	/* A later module may add header fields: they are skipped. */
	const char *text = "mctop 1 bound=0 now_ns=1 total=0 tracked=0 untracked=0 threads=0 "
			   "counters=0 bytes=0 budget=1 newfield=9\nend\n";
	assert_int_equal(mctop_raw_parse(text, &r, why, sizeof(why)), 0);
	assert_int_equal(r.nkeys, 0);
	assert_null(mctop_raw_find(&r, "x"));
	mctop_raw_free(&r);
	/* The optional field, said: a busy worker times one command in 8. */
	text = "mctop 1 now_ns=1 total=0 tracked=0 untracked=0 threads=1 counters=0 bytes=0 "
	       "budget=1 bound=0 lat_every=8\nend\n";
	assert_int_equal(mctop_raw_parse(text, &r, why, sizeof(why)), 0);
	assert_int_equal(r.lat_every, 8);
	mctop_raw_free(&r);
	text = "mctop 1 now_ns=1 total=0 tracked=0 untracked=0 threads=1 counters=0 bytes=0 "
	       "budget=1 bound=0 lat_every=often\nend\n";
	assert_int_equal(mctop_raw_parse(text, &r, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "lat_every=often"));
}

/* Each of these must be refused with a reason, never half-read. */
static void refuses_what_is_not_the_format(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", /* nothing */
		"top keys:\n  10  foo\n", /* the human format */
		"mctop 2 now_ns=1 total=0 tracked=0 untracked=0 threads=0 counters=0 bytes=0 "
		"budget=1 bound=0\nend\n", /* another version */
		"mctop 1 now_ns=1 total=0\nend\n", /* fields missing */
		"mctop 1 now_ns=x total=0 tracked=0 untracked=0 threads=0 counters=0 bytes=0 "
		"budget=1 bound=0\nend\n",
		HEAD "k\t1\t0\t1\t1\t1\t1\t1\t1\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t" HIST0 "\n", /* no end */
		HEAD "k\t1\t0\t1\t1\t1\t1\t1\t1\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t" HIST0 "\nend\n", /* a count short */
		HEAD "k\t1\t0\t1\t1\t1\t1\t1\t1\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t1,2,3\nend\n", /* short histogram */
		HEAD "k\t1\t0\t1\t1\t1\t1\t1\t1\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t" HIST0 ",5\nend\n", /* long one */
		HEAD "k\t-1\t0\t1\t1\t1\t1\t1\t1\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t" HIST0 "\nend\n", /* negative calls */
		HEAD "\t1\t0\t1\t1\t1\t1\t1\t1\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0\t" HIST0 "\nend\n", /* no key */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct mctop_raw r;
		char why[256] = "";
		assert_int_equal(mctop_raw_parse(bad[i], &r, why, sizeof(why)), -1);
		assert_true(why[0] != '\0');
		assert_null(r.keys);
	}
}

static void command_words(void **state)
{
	(void)state;
	unsigned mask;
	char why[256], by[128];
	assert_int_equal(mctop_cmd_mask("get,set", &mask, why, sizeof(why)), 0);
	assert_int_equal(mask, 1u << MC_GET_HIT | 1u << MC_GET_MISS | 1u << MC_SET);
	mctop_cmd_by(mask, by, sizeof(by));
	assert_string_equal(by, "by=get,set");
	assert_int_equal(mctop_cmd_mask("delete", &mask, why, sizeof(why)), 0);
	assert_int_equal(mask, 1u << MC_DELETE);
	assert_int_equal(mctop_cmd_mask("get,flush", &mask, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "'flush'"));
	assert_int_equal(mctop_cmd_mask("get,", &mask, why, sizeof(why)), -1);
	mctop_cmd_by(0, by, sizeof(by));
	assert_string_equal(by, "");
}

static void prefix_rules(void **state)
{
	(void)state;
	struct mctop_prefix p;
	char why[256], g[64];
	/* A literal: up to and including its first occurrence. */
	assert_int_equal(mctop_prefix_init(&p, ":", why, sizeof(why)), 0);
	assert_int_equal(mctop_prefix_group(&p, "user:1:x", g, sizeof(g)), 0);
	assert_string_equal(g, "user:");
	assert_int_equal(mctop_prefix_group(&p, "plain", g, sizeof(g)), -1);
	mctop_prefix_free(&p);
	assert_int_equal(mctop_prefix_init(&p, "user:", why, sizeof(why)), 0);
	assert_int_equal(mctop_prefix_group(&p, "user:42", g, sizeof(g)), 0);
	assert_string_equal(g, "user:");
	assert_int_equal(mctop_prefix_group(&p, "session:9", g, sizeof(g)), -1);
	mctop_prefix_free(&p);
	/* A regex: the first capture, else the whole match. */
	assert_int_equal(mctop_prefix_init(&p, "^([a-z]+):[0-9]+$", why, sizeof(why)), 0);
	assert_int_equal(mctop_prefix_group(&p, "user:42", g, sizeof(g)), 0);
	assert_string_equal(g, "user");
	assert_int_equal(mctop_prefix_group(&p, "user:x", g, sizeof(g)), -1);
	mctop_prefix_free(&p);
	assert_int_equal(mctop_prefix_init(&p, "(a)?b+", why, sizeof(why)), 0);
	assert_int_equal(mctop_prefix_group(&p, "xbbx", g, sizeof(g)), 0);
	assert_string_equal(g, "bb");
	mctop_prefix_free(&p);
	assert_int_equal(mctop_prefix_init(&p, "(unclosed", why, sizeof(why)), -1);
	assert_non_null(strstr(why, "regular expression"));
	assert_int_equal(mctop_prefix_init(&p, "", why, sizeof(why)), -1);
}

static void prefix_merges_rows(void **state)
{
	(void)state;
	struct mctop_key keys[3] = {
		{ .key = "user:1", .calls = 10, .err = 1, .objsize = 5, .bytes = 50, .reqs = 2,
		  .bw_kbps = 1, .lat_us = 10, .first_ns = 7, .hist = { [3] = 1 } },
		{ .key = "other", .calls = 8, .objsize = -1, .lat_us = -1 },
		{ .key = "user:2", .calls = 4, .err = 2, .objsize = 9, .bytes = 20, .reqs = 1,
		  .bw_kbps = 0.5, .lat_us = 40, .first_ns = 3, .hist = { [5] = 3 } },
	};
	struct mctop_frame f = { .keys = keys, .nkeys = 3 };
	struct mctop_prefix p;
	char why[256];
	assert_int_equal(mctop_prefix_init(&p, "user:", why, sizeof(why)), 0);
	assert_int_equal(mctop_prefix_apply(&p, &f), 0);
	assert_int_equal(f.nkeys, 2);
	assert_string_equal(keys[0].key, "user:");
	assert_int_equal(keys[0].calls, 14);
	assert_int_equal(keys[0].err, 3); /* the bounds add up */
	assert_int_equal(keys[0].bytes, 70);
	assert_int_equal(keys[0].objsize, 5); /* the busiest member's */
	assert_int_equal(keys[0].first_ns, 3);
	assert_true(keys[0].reqs == 3 && keys[0].bw_kbps == 1.5);
	assert_true(keys[0].lat_us > 32.4 && keys[0].lat_us < 32.6); /* (10 + 3 * 40) / 4 */
	assert_string_equal(keys[1].key, "other");
	mctop_prefix_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parses_header_and_keys),
		cmocka_unit_test(empty_table_and_unknown_header_fields),
		cmocka_unit_test(refuses_what_is_not_the_format),
		cmocka_unit_test(command_words),
		cmocka_unit_test(prefix_rules),
		cmocka_unit_test(prefix_merges_rows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
