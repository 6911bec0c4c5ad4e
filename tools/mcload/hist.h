/* SPDX-License-Identifier: MIT */
/* A log-linear latency histogram, in the manner of HdrHistogram: values
 * below 2^HIST_SUB_BITS are exact, above that each power of two is cut
 * into 2^HIST_SUB_BITS equal buckets, so any value is recorded within
 * 1/128 (0.8%) of itself.  Fixed size, no allocation, summable. */
#ifndef MCLOAD_HIST_H
#define MCLOAD_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 7
#define HIST_SUB      (1u << HIST_SUB_BITS)
#define HIST_BUCKETS  ((64 - HIST_SUB_BITS + 1) * HIST_SUB)

struct hist {
	uint64_t count[HIST_BUCKETS];
	uint64_t total;
	uint64_t max;
};

void hist_add(struct hist *h, uint64_t v);
void hist_merge(struct hist *into, const struct hist *from);
/* The value at percentile P (0..100]: the highest value of the bucket
 * holding that rank, capped at the largest value recorded.  0 if empty. */
uint64_t hist_percentile(const struct hist *h, double p);

#endif
