/* SPDX-License-Identifier: MIT */
/* mclat's per-interval percentiles (tools/mclat/stats.c): nearest rank
 * over every value, checked against a plain sort of the same values,
 * small and past 2^33 ns (the radix sort's passes), ties included; no
 * value is no figure (NAN), not 0. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "mclat.h"

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void check(size_t n, uint64_t range)
{
	struct interval iv;
	memset(&iv, 0, sizeof(iv));
	uint64_t *ref = malloc(n * sizeof(*ref));
	assert_non_null(ref);
	for (size_t i = 0; i < n; i++) {
		struct lat_batch b;
		memset(&b, 0, sizeof(b));
		ref[i] = range ? next() % range : next();
		b.ns[2] = ref[i];
		b.measured[2] = 1;
		assert_int_equal(interval_add(&iv, &b), 0);
	}
	qsort(ref, n, sizeof(*ref), cmp);
	static const double ps[] = { 0.1, 1, 50, 90, 99, 99.9, 100 };
	for (unsigned k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
		size_t rank = (size_t)(ps[k] / 100 * (double)n + 0.999999);
		rank = rank < 1 ? 1 : rank > n ? n : rank;
		assert_true(stage_pct_us(&iv.st[2], ps[k]) == (double)ref[rank - 1] / 1000);
	}
	interval_free(&iv);
	free(ref);
}

static void percentiles_match_a_plain_sort(void **state)
{
	(void)state;
	check(1, 1000);
	check(7, 3);                  /* ties */
	check(100000, 200000);        /* microseconds: two passes */
	check(50000, 20000000000ull); /* 20 s: four passes */
	check(20000, 0);              /* all 64 bits */
}

static void no_values_is_no_figure(void **state)
{
	(void)state;
	struct interval iv;
	memset(&iv, 0, sizeof(iv));
	assert_true(isnan(stage_mean_us(&iv.st[0])));
	assert_true(isnan(stage_pct_us(&iv.st[0], 50)));
	assert_true(isnan(stage_pct_us(&iv.st[0], 100)));
	struct lat_batch b;
	memset(&b, 0, sizeof(b));
	b.measured[0] = 1; /* a value of 0 ns is a figure: 0 */
	assert_int_equal(interval_add(&iv, &b), 0);
	assert_true(stage_mean_us(&iv.st[0]) == 0 && stage_pct_us(&iv.st[0], 99) == 0);
	assert_true(isnan(stage_mean_us(&iv.st[1])));
	interval_reset(&iv);
	assert_true(isnan(stage_pct_us(&iv.st[0], 50)));
	interval_free(&iv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(percentiles_match_a_plain_sort),
		cmocka_unit_test(no_values_is_no_figure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
