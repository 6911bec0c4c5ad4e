/* SPDX-License-Identifier: MIT */
/* One interval's stage times: every value kept (a second of saturated
 * memcached is ~100k batches, 8 stages: a few MB), so percentiles are
 * exact, not bucketed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mclat.h"

const char *const stage_names[NSTAGES] = {
	"rx", "tcpip_rx", "epoll", "wait", "read", "memcached", "tx", "total",
};

int stage_index(const char *name)
{
	for (int i = 0; i < NSTAGES; i++)
		if (strcmp(name, stage_names[i]) == 0)
			return i;
	return -1;
}

static int push(struct stage_values *s, uint64_t v)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 1024;
		uint64_t *nv = realloc(s->v, cap * sizeof(*nv));
		if (!nv)
			return -1;
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n++] = v;
	s->sorted = 0;
	return 0;
}

int interval_add(struct interval *iv, const struct lat_batch *b)
{
	for (int i = 0; i < NSTAGES; i++)
		if (b->measured[i] && push(&iv->st[i], b->ns[i]) != 0)
			return -1;
	iv->count++;
	return 0;
}

void interval_reset(struct interval *iv)
{
	for (int i = 0; i < NSTAGES; i++)
		iv->st[i].n = 0;
	iv->count = iv->unmatched = iv->partial = iv->noreply = 0;
	iv->lost = 0;
	iv->cut = 0;
	iv->window_ns = iv->length_ns = iv->attach_ns = iv->detach_ns = 0;
	iv->windows = 0;
}

void interval_free(struct interval *iv)
{
	for (int i = 0; i < NSTAGES; i++)
		free(iv->st[i].v);
}

double stage_mean_us(struct stage_values *s)
{
	if (!s->n)
		return NAN;
	long double sum = 0;
	for (size_t i = 0; i < s->n; i++)
		sum += s->v[i];
	return (double)(sum / s->n / 1000);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Sort by LSD radix, 11 bits a pass, only as many passes as the largest
 * value needs (three for anything under 8.5 s).  qsort, a comparator call
 * per comparison over ~100k values per stage a second, was 28% of mclat's
 * CPU under load (perf).  -1 without memory for the second buffer. */
#define RADIX_BITS 11

static int radix_sort(uint64_t *v, size_t n)
{
	uint64_t max = 0;
	for (size_t i = 0; i < n; i++)
		max = v[i] > max ? v[i] : max;
	uint64_t *tmp = malloc(n * sizeof(*tmp));
	if (!tmp)
		return -1;
	uint64_t *src = v, *dst = tmp;
	for (unsigned shift = 0; shift < 64 && (max >> shift); shift += RADIX_BITS) {
		size_t at[1u << RADIX_BITS] = { 0 };
		for (size_t i = 0; i < n; i++)
			at[(src[i] >> shift) & ((1u << RADIX_BITS) - 1)]++;
		size_t sum = 0;
		for (unsigned d = 0; d < (1u << RADIX_BITS); d++) {
			size_t c = at[d];
			at[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[at[(src[i] >> shift) & ((1u << RADIX_BITS) - 1)]++] = src[i];
		uint64_t *t = src;
		src = dst;
		dst = t;
	}
	if (src != v)
		memcpy(v, src, n * sizeof(*v));
	free(tmp);
	return 0;
}

/* Nearest rank: the smallest value with at least p% of them at or below. */
double stage_pct_us(struct stage_values *s, double p)
{
	if (!s->n)
		return NAN;
	if (!s->sorted) {
		if (radix_sort(s->v, s->n) != 0)
			qsort(s->v, s->n, sizeof(*s->v), cmp_u64);
		s->sorted = 1;
	}
	size_t rank = (size_t)(p / 100 * (double)s->n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > s->n)
		rank = s->n;
	return (double)s->v[rank - 1] / 1000;
}

double interval_sampled(const struct interval *iv)
{
	if (!iv->length_ns)
		return 0;
	double f = (double)iv->window_ns / (double)iv->length_ns;
	return f > 1 ? 1 : f;
}
