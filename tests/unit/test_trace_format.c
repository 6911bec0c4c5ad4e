/* SPDX-License-Identifier: MIT */
/* The trace printer (tools/xprobes/trace_format.c) on synthetic record streams:
 * nesting, leaf collapse, ftrace's duration marks, 64-bit durations,
 * threads, missing exits and entries, lost records, sites, and the
 * chrome, folded and stat views.  The tool's file is compiled in here, as
 * unit tests link only the agent's objects. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/xprobes/trace_bounds.c"
#include "../../tools/xprobes/trace_argspec.c"
#include "../../tools/xprobes/trace_argfmt.c"
#include "../../tools/xprobes/trace_format.c"
#include "unit.h"

enum { MAIN = 0x1000, F = 0x1100, G = 0x1200, H = 0x1300, SITE = 0x9000 };

static const char *func_name(void *ctx, uint64_t addr)
{
	(void)ctx;
	switch (addr) {
	case MAIN: return "main";
	case F: return "f";
	case G: return "g";
	case H: return "h";
	default: return "0x?";
	}
}

static const char *site_name(void *ctx, uint64_t addr)
{
	(void)ctx;
	return addr == SITE ? "prov:hit" : "?";
}

#define E(ns, a) { (ns), (a), XP_TRACE_ENTRY }
#define X(ns, a) { (ns), (a), XP_TRACE_EXIT }
#define S(ns, a) { (ns), (a), XP_TRACE_SITE }
#define L(ns, n) { (ns), (n), XP_TRACE_LOST }
#define N(a) (sizeof(a) / sizeof((a)[0]))

enum view { GRAPH, CHROME, FOLDED, STAT };

/* Print threads in one view; the text, malloc'd. */
static char *render(const struct tf_thread *th, size_t n, enum view v, uint64_t min_ns, int tid)
{
	struct tf_trace t = { .threads = th, .nthreads = n, .pid = 42, .origin_ns = 0,
			      .names = { func_name, site_name, NULL, NULL } };
	struct tf_filter f = { .min_ns = min_ns, .tid = tid };
	char *text = NULL;
	size_t len = 0;
	FILE *o = open_memstream(&text, &len);
	assert_non_null(o);
	int rc = v == GRAPH ? tf_graph(o, &t, &f) : v == CHROME ? tf_chrome(o, &t, &f)
		 : v == FOLDED ? tf_folded(o, &t, &f) : tf_stat(o, &t, &f, TF_SORT_TOTAL);
	assert_int_equal(rc, 0);
	fclose(o);
	return text;
}

static char *graph1(const struct tf_event *ev, size_t n, uint64_t lost, uint64_t min_ns)
{
	struct tf_thread th = { .tid = 7, .ev = ev, .n = n, .lost = lost };
	return render(&th, 1, GRAPH, min_ns, 0);
}

#define HEADER " ------- tid 7 -------\n   Time(us)  |  Function Graph\n" \
	       "-------------------------------\n"

static void test_nesting_and_leaves(void **state)
{
	(void)state;
	/* main { f { g(); site } h(); } */
	const struct tf_event ev[] = {
		E(1000, MAIN), E(2000, F), E(2500, G), X(3750, G), S(4000, SITE),
		X(5000, F), E(6000, H), X(6001, H), X(9000, MAIN),
	};
	char *out = graph1(ev, N(ev), 0, 0);
	assert_string_equal(out, HEADER
			    "             |  main() {\n"
			    "             |    f() {\n"
			    "     1.250   |      g();\n"
			    "             |      /* prov:hit */\n"
			    "     3.000   |    }\n"
			    "     0.001   |    h();\n"
			    "     8.000   |  }\n");
	free(out);
}

static void test_markers_at_each_threshold(void **state)
{
	(void)state;
	static const struct { uint64_t ns; const char *line; } cases[] = {
		{ 10000, "    10.000   |  f();\n" },
		{ 10001, "+   10.001   |  f();\n" },
		{ 100000, "+  100.000   |  f();\n" },
		{ 100001, "!  100.001   |  f();\n" },
		{ 1000001, "# 1000.001   |  f();\n" },
		{ 10000001, "*10000.001   |  f();\n" },
		{ 100000001, "@100000.001   |  f();\n" },
		{ 1000000001, "$1000000.001   |  f();\n" },
	};
	for (size_t i = 0; i < N(cases); i++) {
		const struct tf_event ev[] = { E(5, F), X(5 + cases[i].ns, F) };
		char *out = graph1(ev, N(ev), 0, 0);
		assert_non_null(strstr(out, HEADER));
		assert_string_equal(out + strlen(HEADER), cases[i].line);
		free(out);
	}
}

/* 5 s and 7 days: past 2^32 ns and past 2^32 us, exact to the ns. */
static void test_long_durations_do_not_wrap(void **state)
{
	(void)state;
	const uint64_t week = 7ull * 86400 * 1000000000 + 123;
	const struct tf_event ev[] = {
		E(1, MAIN), E(2, F), X(2 + 5000000007ull, F), X(1 + week, MAIN),
	};
	char *out = graph1(ev, N(ev), 0, 0);
	assert_non_null(strstr(out, "$5000000.007   |    f();\n"));
	assert_non_null(strstr(out, "$604800000000.123   |  }\n"));
	free(out);
}

/* The clock line is the target's word: any four numbers give a time,
 * clamped, and no signed overflow (the product of two 64-bit spans can
 * pass 2^127; make sanitize runs this under UBSan). */
static void test_tsc_conversion_clamps(void **state)
{
	(void)state;
	struct tf_clock c = { .start_tsc = UINT64_MAX - 1, .start_ns = 5, .now_tsc = UINT64_MAX,
			      .now_ns = UINT64_MAX };
	assert_int_equal(tf_tsc_ns(&c, 0), 0);
	c = (struct tf_clock){ .start_tsc = 0, .start_ns = 5, .now_tsc = 1, .now_ns = UINT64_MAX };
	assert_true(tf_tsc_ns(&c, UINT64_MAX) == UINT64_MAX);
	c.now_ns = 0; /* time running backwards */
	assert_int_equal(tf_tsc_ns(&c, 3), 0);
	c.now_tsc = 0; /* no span */
	assert_int_equal(tf_tsc_ns(&c, 3), 5);
}

/* Spans whose product overflows 64 bits: 100 s of a 3 GHz TSC. */
static void test_tsc_conversion_is_exact(void **state)
{
	(void)state;
	struct tf_clock c = { .start_tsc = 1000000000000ull, .start_ns = 50000000000ull,
			      .now_tsc = 1000000000000ull + 300000000000ull,
			      .now_ns = 50000000000ull + 100000000000ull };
	assert_int_equal(tf_tsc_ns(&c, c.start_tsc), c.start_ns);
	assert_int_equal(tf_tsc_ns(&c, c.now_tsc), c.now_ns);
	assert_int_equal(tf_tsc_ns(&c, c.start_tsc + 30000000000ull), c.start_ns + 10000000000ull);
	assert_int_equal(tf_tsc_ns(&c, c.start_tsc + 3), c.start_ns + 1);
	/* Before the start pair: earlier times, not a wrap. */
	assert_int_equal(tf_tsc_ns(&c, c.start_tsc - 3000), c.start_ns - 1000);

	struct xp_trace_rec rec[] = {
		{ (c.start_tsc + 300) << 2 | XP_TRACE_ENTRY, F },
		{ (c.start_tsc + 600) << 2 | XP_TRACE_EXIT, F },
		{ (c.start_tsc + 900) << 2 | XP_TRACE_LOST, 5 },
	};
	struct tf_event ev[3];
	tf_decode(rec, 3, &c, ev);
	assert_int_equal(ev[0].kind, XP_TRACE_ENTRY);
	assert_int_equal(ev[1].kind, XP_TRACE_EXIT);
	assert_int_equal(ev[2].kind, XP_TRACE_LOST);
	assert_int_equal(ev[1].ns - ev[0].ns, 100);
	assert_int_equal(ev[2].addr, 5);
}

static void test_threads_are_labelled_and_filtered(void **state)
{
	(void)state;
	const struct tf_event a[] = { E(10, F), X(20, F) };
	const struct tf_event b[] = { E(10, G), X(30, G) };
	struct tf_thread th[] = { { .tid = 100, .ev = a, .n = 2 }, { .tid = 200, .ev = b, .n = 2 } };
	char *out = render(th, 2, GRAPH, 0, 0);
	char *t100 = strstr(out, " ------- tid 100 -------\n");
	char *t200 = strstr(out, "\n\n ------- tid 200 -------\n");
	assert_non_null(t100);
	assert_non_null(t200);
	assert_true(t100 < strstr(out, "f();") && strstr(out, "f();") < t200);
	assert_true(t200 < strstr(out, "g();"));
	free(out);

	out = render(th, 2, GRAPH, 0, 200);
	assert_null(strstr(out, "tid 100"));
	assert_null(strstr(out, "f();"));
	assert_non_null(strstr(out, "0.020   |  g();"));
	free(out);
}

static void test_missing_exits_and_entries(void **state)
{
	(void)state;
	/* main { f { g {  longjmp back into main  } } }, h's exit without its
	 * entry (tracing began inside it), and f still running at the end. */
	const struct tf_event ev[] = {
		X(500, H),
		E(1000, MAIN), E(2000, F), E(3000, G), X(9000, MAIN),
		E(10000, F), E(11000, G), X(12000, G),
	};
	char *out = graph1(ev, N(ev), 0, 0);
	assert_string_equal(out, HEADER
			    "             |  } /* h: entry not recorded */\n"
			    "             |  main() {\n"
			    "             |    f() {\n"
			    "             |      g() {\n"
			    "             |      } /* g: exit not recorded */\n"
			    "             |    } /* f: exit not recorded */\n"
			    "     8.000   |  }\n"
			    "             |  f() {\n"
			    "     1.000   |    g();\n");
	free(out);
}

static void test_lost_records(void **state)
{
	(void)state;
	const struct tf_event ev[] = { E(1000, F), L(2000, 7), X(3000, F) };
	char *out = graph1(ev, N(ev), 10, 0);
	assert_string_equal(out, HEADER
			    "             |  f() {\n"
			    "             |    /* 7 records lost */\n"
			    "     2.000   |  }\n"
			    "             |  /* 3 records lost */\n");
	free(out);
}

static void test_min_duration_hides_short_calls(void **state)
{
	(void)state;
	/* main { f { g() 1us } 5us; h() 0.5us } 20us */
	const struct tf_event ev[] = {
		E(0, MAIN), E(1000, F), E(2000, G), X(3000, G), X(6000, F),
		E(7000, H), X(7500, H), X(20000, MAIN),
	};
	char *out = graph1(ev, N(ev), 0, 2000);
	assert_string_equal(out, HEADER
			    "             |  main() {\n"
			    "     5.000   |    f();\n"
			    "+   20.000   |  }\n");
	free(out);
}

/* Brackets and braces outside strings balance, and never close below 0. */
static void assert_balanced_json(const char *s)
{
	int depth = 0, in_str = 0;
	for (; *s; s++) {
		if (in_str) {
			if (*s == '\\')
				s++;
			else if (*s == '"')
				in_str = 0;
			continue;
		}
		if (*s == '"')
			in_str = 1;
		else if (*s == '{' || *s == '[')
			depth++;
		else if (*s == '}' || *s == ']')
			assert_true(--depth >= 0);
	}
	assert_int_equal(in_str, 0);
	assert_int_equal(depth, 0);
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;
	for (; (s = strstr(s, what)); s += strlen(what))
		n++;
	return n;
}

static void test_chrome_json(void **state)
{
	(void)state;
	const struct tf_event ev[] = {
		E(1000, MAIN), E(2000, F), X(2500, F), S(2600, SITE), E(3000, G), E(4000, H),
		X(5000, G), L(5100, 2), E(6000, F),
	};
	struct tf_thread th = { .tid = 7, .ev = ev, .n = N(ev) };
	char *out = render(&th, 1, CHROME, 0, 0);
	assert_balanced_json(out);
	assert_true(strncmp(out, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", 39) == 0);
	assert_non_null(strstr(out, "{\"name\":\"f\",\"ph\":\"X\",\"pid\":42,\"tid\":7,"
				    "\"ts\":2.000,\"dur\":0.500}"));
	assert_non_null(strstr(out, "{\"name\":\"g\",\"ph\":\"X\",\"pid\":42,\"tid\":7,"
				    "\"ts\":3.000,\"dur\":2.000}"));
	assert_non_null(strstr(out, "{\"name\":\"h\",\"ph\":\"X\",\"pid\":42,\"tid\":7,"
				    "\"ts\":4.000,\"dur\":1.000,\"args\":{\"exit\":\"not recorded\"}}"));
	assert_non_null(strstr(out, "\"name\":\"prov:hit\",\"ph\":\"i\""));
	assert_non_null(strstr(out, "\"args\":{\"count\":2}"));
	assert_int_equal(count(out, "\"ph\":\"B\""), 2); /* main and the last f run on */
	assert_int_equal(count(out, "\"ph\":\"X\""), 3);
	assert_non_null(strstr(out, "\"ph\":\"M\""));
	free(out);
}

static void test_chrome_escapes_names(void **state)
{
	(void)state;
	char *text = NULL;
	size_t len = 0;
	FILE *o = open_memstream(&text, &len);
	json_str(o, "a\"b\\c\n\x80");
	fclose(o);
	assert_string_equal(text, "\"a\\\"b\\\\c\\u000a\\u0080\"");
	free(text);
}

static void test_folded_self_times(void **state)
{
	(void)state;
	/* main 100 { f 30 { g 10 } g 20 }, then main { f 5 } on another thread */
	const struct tf_event a[] = {
		E(0, MAIN), E(10, F), E(20, G), X(30, G), X(40, F), E(50, G), X(70, G), X(100, MAIN),
	};
	const struct tf_event b[] = { E(0, MAIN), E(1, F), X(6, F), X(10, MAIN), E(11, H) };
	struct tf_thread th[] = { { .tid = 1, .ev = a, .n = N(a) }, { .tid = 2, .ev = b, .n = N(b) } };
	char *out = render(th, 2, FOLDED, 0, 0);
	assert_string_equal(out,
			    "main 55\n"       /* 100-30-20 + 10-5 */
			    "main;f 25\n"     /* 30-10 + 5 */
			    "main;f;g 10\n"
			    "main;g 20\n");   /* h never returned: no self time */
	free(out);
}

static void test_stat_numbers(void **state)
{
	(void)state;
	const struct tf_event ev[] = {
		E(0, MAIN), E(1000, F), X(4000, F), E(5000, F), E(6000, F), X(7000, F),
		X(9000, F), X(20000, MAIN), E(21000, G),
	};
	struct tf_thread th = { .tid = 7, .ev = ev, .n = N(ev) };
	char *out = render(&th, 1, STAT, 0, 0);
	/* Sorted by total: main 20, f 3+4+1 (the recursion counts twice). */
	assert_string_equal(out,
			    "     calls      total(us)       self(us)        avg(us)        max(us)  function\n"
			    "         1         20.000         13.000         20.000         20.000  main\n"
			    "         3          8.000          7.000          2.666          4.000  f\n"
			    "         1          0.000          0.000          0.000          0.000  g\n");
	free(out);
	enum tf_sort by;
	assert_int_equal(tf_sort_parse("calls", &by), 0);
	assert_int_equal(by, TF_SORT_CALLS);
	assert_int_equal(tf_sort_parse("max", &by), 0);
	assert_int_equal(by, TF_SORT_MAX);
	assert_int_equal(tf_sort_parse("bogus", &by), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nesting_and_leaves),
		cmocka_unit_test(test_markers_at_each_threshold),
		cmocka_unit_test(test_long_durations_do_not_wrap),
		cmocka_unit_test(test_tsc_conversion_is_exact),
		cmocka_unit_test(test_tsc_conversion_clamps),
		cmocka_unit_test(test_threads_are_labelled_and_filtered),
		cmocka_unit_test(test_missing_exits_and_entries),
		cmocka_unit_test(test_lost_records),
		cmocka_unit_test(test_min_duration_hides_short_calls),
		cmocka_unit_test(test_chrome_json),
		cmocka_unit_test(test_chrome_escapes_names),
		cmocka_unit_test(test_folded_self_times),
		cmocka_unit_test(test_stat_numbers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
