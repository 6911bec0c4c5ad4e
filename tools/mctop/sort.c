/* SPDX-License-Identifier: MIT */
/* The orders of the table (the UI's C S R B N L keys, --sort). */
#include <stdlib.h>
#include <string.h>

#include "mctop.h"

static enum mctop_sort sort_by; /* qsort has no argument: set just before */

static int cmp3(double a, double b)
{
	return (a > b) - (a < b);
}

/* Ascending by the sort's column; ties by calls (a LAT column of `-`,
 * the watch stream's, is all ties: it then reads as the CALLS order),
 * then by key, so that the order is stable from one frame to the next. */
static int cmp(const void *pa, const void *pb)
{
	const struct mctop_key *a = pa, *b = pb;
	int c = 0;
	switch (sort_by) {
	case SORT_CALLS: c = cmp3((double)a->calls, (double)b->calls); break;
	case SORT_SIZE: c = cmp3((double)a->objsize, (double)b->objsize); break;
	case SORT_REQS: c = cmp3(a->reqs, b->reqs); break;
	case SORT_BW: c = cmp3(a->bw_kbps, b->bw_kbps); break;
	case SORT_NEWEST: c = cmp3((double)a->first_ns, (double)b->first_ns); break;
	case SORT_LAT: c = cmp3(a->lat_us, b->lat_us); break;
	}
	if (!c)
		c = cmp3((double)a->calls, (double)b->calls);
	return c ? c : -strcmp(a->key, b->key);
}

static int cmp_desc(const void *a, const void *b)
{
	return cmp(b, a);
}

void mctop_sort(struct mctop_frame *f, enum mctop_sort by, int ascending)
{
	sort_by = by;
	if (f->nkeys)
		qsort(f->keys, f->nkeys, sizeof(*f->keys), ascending ? cmp : cmp_desc);
}

const char *mctop_sort_name(enum mctop_sort by)
{
	static const char *const names[] = {
		[SORT_CALLS] = "CALLS", [SORT_SIZE] = "OBJSIZE", [SORT_REQS] = "REQ/S",
		[SORT_BW] = "BW(kbps)", [SORT_NEWEST] = "NEWEST", [SORT_LAT] = "LAT(us)",
	};
	return (unsigned)by < sizeof(names) / sizeof(names[0]) ? names[by] : "?";
}
