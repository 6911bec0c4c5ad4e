/* SPDX-License-Identifier: MIT */
/* spacesaving_tlb.c -- why mctop counts in a drainer thread, not in its
 * handlers (docs/design.md, "Why a feed").
 *
 * The same stream of Space-Saving updates (modules/mctop/spacesaving.h,
 * Zipf(0.99) over 1M keys, a table of BUDGET MiB) is applied two ways,
 * and each update is timed alone with the TSC:
 *
 *   handler: before every update, what a memcached request does between
 *            two of its keys: SYSCALLS system calls (each empties the TLB
 *            on a kernel with page-table isolation and no PCID) and
 *            TOUCHES cache lines of a 256 MiB "cache" touched at random;
 *   drainer: the same system calls and touches, but the updates applied
 *            BATCH at a time between them, as mctop's drainer does.
 *
 *   spacesaving_tlb [SYSCALLS [TOUCHES [BUDGET_MIB [BATCH]]]]   (3 4 8 1000)
 *
 * Prints ns per update for both and their ratio.  The figure that matters
 * is the ratio on the machine at hand: on one without page-table
 * isolation (or with PCID) the two come out close.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../modules/mctop/spacesaving.h"

#define KEYS 1000000u
#define UPDATES 2000000u
#define CACHE_BYTES (256u << 20)

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Zipf(s) ranks over KEYS keys, by inverting the cumulative weights. */
static unsigned *zipf_stream(double s, uint64_t seed)
{
	double *cdf = malloc(KEYS * sizeof(*cdf));
	unsigned *out = malloc(UPDATES * sizeof(*out));
	if (!cdf || !out) {
		fprintf(stderr, "spacesaving_tlb: out of memory\n");
		exit(1);
	}
	double sum = 0;
	for (unsigned i = 0; i < KEYS; i++)
		cdf[i] = sum += 1.0 / pow(i + 1, s);
	for (unsigned i = 0; i < UPDATES; i++) {
		double u = (double)(xorshift(&seed) >> 11) / 9007199254740992.0 * sum;
		unsigned lo = 0, hi = KEYS - 1;
		while (lo < hi) {
			unsigned mid = (lo + hi) / 2;
			if (cdf[mid] < u)
				lo = mid + 1;
			else
				hi = mid;
		}
		out[i] = lo;
	}
	free(cdf);
	return out;
}

/* Ticks spent in the updates alone, BATCH updates between two rounds of
 * system calls and touches (each round as many as BATCH updates would
 * have had one at a time). */
static uint64_t run(const unsigned *stream, unsigned batch, int syscalls, int touches,
		    size_t budget, volatile char *cache)
{
	atomic_long left = (long)(budget / ss_bytes_per_counter());
	struct ss_table *t = ss_create(1024, SS_MAX_CHUNKS, &left);
	if (!t) {
		fprintf(stderr, "spacesaving_tlb: out of memory\n");
		exit(1);
	}
	uint64_t x = 88172645463325252ull, ticks = 0, sink = 0;
	char key[32];
	for (unsigned i = 0; i < UPDATES; i++) {
		if (i % batch == 0) {
			for (unsigned k = 0; k < batch; k++) {
				for (int n = 0; n < syscalls; n++)
					syscall(SYS_getppid);
				for (int n = 0; n < touches; n++)
					sink += cache[xorshift(&x) % CACHE_BYTES & ~(uint64_t)63];
			}
		}
		int len = snprintf(key, sizeof(key), "key:%08u", stream[i]);
		struct ss_event e = { SS_GET_HIT, 100, 1, 1, 1, 1000 }; /* as the drainer's */
		uint64_t t0 = __builtin_ia32_rdtsc();
		ss_add(t, key, (size_t)len, &e);
		ticks += __builtin_ia32_rdtsc() - t0;
	}
	ss_destroy(t);
	return ticks + (sink & 0);
}

int main(int argc, char **argv)
{
	int syscalls = argc > 1 ? atoi(argv[1]) : 3;
	int touches = argc > 2 ? atoi(argv[2]) : 4;
	long mib = argc > 3 ? atol(argv[3]) : 8;
	long batch = argc > 4 ? atol(argv[4]) : 1000;
	if (argc > 5 || syscalls < 0 || touches < 0 || mib < 1 || mib > 1024 || batch < 1 ||
	    batch > 1000000) {
		fprintf(stderr, "usage: spacesaving_tlb [SYSCALLS [TOUCHES [BUDGET_MIB [BATCH]]]]\n");
		return 2;
	}
	unsigned *stream = zipf_stream(0.99, 1);
	char *cache = malloc(CACHE_BYTES);
	if (!cache) {
		fprintf(stderr, "spacesaving_tlb: out of memory\n");
		return 1;
	}
	memset(cache, 1, CACHE_BYTES);
	/* TSC ticks to ns over the whole run. */
	uint64_t n0 = mono_ns(), c0 = __builtin_ia32_rdtsc();
	size_t budget = (size_t)mib << 20;
	uint64_t inline_ticks = run(stream, 1, syscalls, touches, budget, cache);
	uint64_t drained_ticks = run(stream, (unsigned)batch, syscalls, touches, budget, cache);
	double ns_per_tick = (double)(mono_ns() - n0) / (double)(__builtin_ia32_rdtsc() - c0);
	double a = inline_ticks * ns_per_tick / UPDATES, b = drained_ticks * ns_per_tick / UPDATES;
	printf("Space-Saving update, Zipf(0.99) over %u keys, %ld MiB table, "
	       "%d system calls and %d touches per update:\n", KEYS, mib, syscalls, touches);
	printf("  in the handler          %7.1f ns\n", a);
	printf("  drained %ld at a time  %7.1f ns   (%.2fx less)\n", batch, b, a / b);
	free(cache);
	free(stream);
	return 0;
}
