/* SPDX-License-Identifier: MIT */
/* Log-linear histogram: see hist.h. */
#include <math.h>

#include "hist.h"

static unsigned bucket_of(uint64_t v)
{
	if (v < HIST_SUB)
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v);
	unsigned shift = msb - HIST_SUB_BITS;
	/* v >> shift lies in [HIST_SUB, 2 * HIST_SUB). */
	return (shift + 1) * HIST_SUB + (unsigned)((v >> shift) - HIST_SUB);
}

/* The largest value that falls into bucket B. */
static uint64_t bucket_high(unsigned b)
{
	if (b < HIST_SUB)
		return b;
	unsigned shift = b / HIST_SUB - 1;
	uint64_t mant = HIST_SUB + b % HIST_SUB;
	return ((mant + 1) << shift) - 1;
}

void hist_add(struct hist *h, uint64_t v)
{
	h->count[bucket_of(v)]++;
	h->total++;
	if (v > h->max)
		h->max = v;
}

void hist_merge(struct hist *into, const struct hist *from)
{
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		into->count[i] += from->count[i];
	into->total += from->total;
	if (from->max > into->max)
		into->max = from->max;
}

uint64_t hist_percentile(const struct hist *h, double p)
{
	if (h->total == 0)
		return 0;
	uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->total);
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->count[i];
		if (seen >= rank) {
			uint64_t v = bucket_high(i);
			return v < h->max ? v : h->max;
		}
	}
	return h->max;
}
