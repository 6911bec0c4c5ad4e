/* SPDX-License-Identifier: MIT */
/* The sampling windows: when mclat's programs and the
 * module's recording were on.  A batch counts only if it lies inside one
 * window, first boundary to last: one that began before a window opened
 * carries boundaries mclat never saw (or stale ones from an earlier
 * window), one that ended after it closed lost its end, and either would
 * be reported short.  The last WINDOWS are kept: a batch is judged when
 * it is read, at most a window or two after it ended. */
#include <stdint.h>

#include "mclat.h"

void windows_open(struct windows *w, uint64_t open_ns)
{
	w->next = (w->next + 1) % WINDOWS;
	w->open_ns[w->next] = open_ns;
	w->close_ns[w->next] = UINT64_MAX; /* open until windows_close */
	if (w->n < WINDOWS)
		w->n++;
}

void windows_close(struct windows *w, uint64_t close_ns)
{
	if (w->n)
		w->close_ns[w->next] = close_ns;
}

int windows_hold(const struct windows *w, uint64_t from_ns, uint64_t to_ns)
{
	if (w->all)
		return 1;
	for (unsigned i = 0; i < WINDOWS; i++) /* unused ones are [0, 0] */
		if (w->open_ns[i] <= from_ns && to_ns <= w->close_ns[i])
			return 1;
	return 0;
}
