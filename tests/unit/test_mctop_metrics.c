/* SPDX-License-Identifier: MIT */
/* mctop's --metrics families (tools/mctop/metrics.c) on their own: the
 * exposition of a made-up frame in both formats.  The HTTP side is the
 * shared exporter's, tested in test_exporter.c.  The source is included so
 * that the test reaches its renderer; it links with the shared exporter
 * (tools/mctop.mk) and without the rest of mctop. */
#include "../../tools/mctop/metrics.c"

#include <stdio.h>

#include "unit.h"

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Five keys, not in calls order, with names that need escaping. */
static struct mctop_key keys[5];
static struct mctop_frame frame(void)
{
	static const char *names[] = {"k300", "quo\"te|\xc3\xa9", "new\nline\x80", "back\\x01", "k100"};
	static const uint64_t calls[] = {300, 500, 400, 600, 100};
	memset(keys, 0, sizeof(keys));
	for (int i = 0; i < 5; i++) {
		strcpy(keys[i].key, names[i]);
		keys[i].calls = calls[i];
		keys[i].err = 1;
		keys[i].objsize = i == 1 ? -1 : 10;
		keys[i].lat_us = 25;
		keys[i].bw_kbps = 8;
		keys[i].members = 1;
	}
	return (struct mctop_frame){.pid = 42, .target = "memcached -p 1", .total = 2000,
				    .tracked = 5, .untracked = 7, .bound = 50, .keys = keys,
				    .nkeys = 5, .budget = 1 << 20, .used = 4096};
}

/* The exposition of fr (NULL: none yet) with at most rows keys, in fmt:
 * what mctop hands the exporter to serve (malloc'd; its length in *len). */
static char *exposition(const struct mctop_frame *fr, size_t rows, enum expo_format fmt,
			size_t *len)
{
	struct view v;
	char *text;
	size_t n;
	assert_int_equal(view_make(&v, fr, rows), 0);
	FILE *f = open_memstream(&text, &n);
	assert_non_null(f);
	assert_int_equal(render(f, fmt, &v), 0);
	assert_int_equal(fclose(f), 0);
	view_free(&v);
	if (len)
		*len = n;
	return text;
}

static void test_exposition_of_the_top_rows(void **state)
{
	(void)state;
	struct mctop_frame f = frame();
	size_t om_len;
	char *prom = exposition(&f, 3, EXPO_PROMETHEUS, NULL);
	char *om = exposition(&f, 3, EXPO_OPENMETRICS, &om_len);

	/* Only the three busiest, escaped, busiest first; no rank label.  The
	 * label is the key text: UTF-8 as it is. */
	assert_int_equal(count(prom, "mctop_key_calls_total{"), 3);
	assert_non_null(strstr(prom, "mctop_key_calls_total{key=\"back\\\\x01\"} 600\n"
				     "mctop_key_calls_total{key=\"quo\\\"te|\xc3\xa9\"} 500\n"
				     "mctop_key_calls_total{key=\"new\\nline\\\\x80\"} 400\n"));
	assert_null(strstr(prom, "k300"));
	assert_null(strstr(prom, "rank"));
	/* A key without a value size has no size sample. */
	assert_int_equal(count(prom, "mctop_key_object_size_bytes{"), 2);
	assert_non_null(strstr(prom, "mctop_key_bandwidth_bytes_per_second{key=\"back\\\\x01\"} 1000\n"));
	assert_non_null(strstr(prom, "mctop_key_latency_mean_seconds{key=\"back\\\\x01\"} 2.5e-05\n"));
	/* The keys left out: in the omitted count, and the busiest of them
	 * (300) raises the bound above the module's 50. */
	assert_non_null(strstr(prom, "\nmctop_keys_omitted 9\n"));
	assert_non_null(strstr(prom, "\nmctop_error_bound 300\n"));
	assert_non_null(strstr(prom, "\nmctop_target_up 1\n"));

	/* Prometheus 0.0.4 names counters' families by their samples and has
	 * no info type; OpenMetrics does the opposite and ends with # EOF. */
	assert_non_null(strstr(prom, "# TYPE mctop_commands_total counter\nmctop_commands_total 2000\n"));
	assert_non_null(strstr(prom, "# TYPE mctop_target_info gauge\n"));
	assert_null(strstr(prom, "# EOF"));
	assert_non_null(strstr(om, "# TYPE mctop_commands counter\nmctop_commands_total 2000\n"));
	assert_non_null(strstr(om, "# TYPE mctop_target info\n"
				   "mctop_target_info{pid=\"42\",target=\"memcached -p 1\"} 1\n"));
	assert_int_equal(count(om, "# EOF\n"), 1);
	assert_string_equal(om + om_len - 6, "# EOF\n");
	/* One sample per line: the newline inside a key was escaped. */
	assert_null(strstr(prom, "\nline"));
	free(prom);
	free(om);
}

static void test_before_the_first_frame(void **state)
{
	(void)state;
	char *prom = exposition(NULL, 20, EXPO_PROMETHEUS, NULL);
	assert_non_null(strstr(prom, "\nmctop_target_up 0\n"));
	assert_null(strstr(prom, "mctop_key_calls"));
	free(prom);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exposition_of_the_top_rows),
		cmocka_unit_test(test_before_the_first_frame),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
