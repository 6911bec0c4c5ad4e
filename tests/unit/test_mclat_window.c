/* SPDX-License-Identifier: MIT */
/* mclat's sampling windows (tools/mclat/window.c): a batch
 * counts only if it lies inside one window, edges included; one that
 * began before a window opened or ended after it closed does not, nor one
 * spanning the gap between two; a window not yet closed holds what began
 * in it; the last WINDOWS are kept; --all holds everything. */
#include <string.h>

#include "unit.h"

#include "mclat.h"

static void inside_one_window_only(void **state)
{
	(void)state;
	struct windows w;
	memset(&w, 0, sizeof(w));
	assert_false(windows_hold(&w, 1, 2)); /* no window yet */
	windows_open(&w, 100);
	assert_true(windows_hold(&w, 100, 150));   /* open: no end yet */
	assert_false(windows_hold(&w, 99, 150));   /* began before it */
	windows_close(&w, 200);
	assert_true(windows_hold(&w, 100, 200));   /* the edges themselves */
	assert_false(windows_hold(&w, 150, 201));  /* ended after it */
	windows_open(&w, 300);
	windows_close(&w, 400);
	assert_true(windows_hold(&w, 310, 390));
	assert_false(windows_hold(&w, 150, 350));  /* across the gap */
	assert_false(windows_hold(&w, 250, 260));  /* in the gap */
	assert_true(windows_hold(&w, 120, 130));   /* the older one is kept */
}

static void the_last_windows_are_kept(void **state)
{
	(void)state;
	struct windows w;
	memset(&w, 0, sizeof(w));
	for (uint64_t i = 1; i <= WINDOWS + 2; i++) {
		windows_open(&w, i * 1000);
		windows_close(&w, i * 1000 + 500);
	}
	assert_false(windows_hold(&w, 1100, 1200)); /* overwritten */
	assert_false(windows_hold(&w, 2100, 2200));
	assert_true(windows_hold(&w, 3100, 3200));
	assert_true(windows_hold(&w, (WINDOWS + 2) * 1000, (WINDOWS + 2) * 1000 + 500));
}

static void all_holds_everything(void **state)
{
	(void)state;
	struct windows w;
	memset(&w, 0, sizeof(w));
	w.all = 1;
	assert_true(windows_hold(&w, 0, UINT64_MAX));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(inside_one_window_only),
		cmocka_unit_test(the_last_windows_are_kept),
		cmocka_unit_test(all_holds_everything),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
