/* SPDX-License-Identifier: MIT */
/* Random numbers and key popularity.
 *
 * Every connection has its own generator, seeded from (--seed, conn
 * number), so a run with --requests sends exactly the same keys whatever
 * the thread scheduling: the ground truth of two such runs is identical. */
#ifndef MCLOAD_SAMPLE_H
#define MCLOAD_SAMPLE_H

#include <stdint.h>

struct rng {
	uint64_t s[4];            /* xoshiro256** */
};

void rng_seed(struct rng *r, uint64_t seed, uint64_t stream);
uint64_t rng_next(struct rng *r);
/* Uniform in [0, n), exactly (Lemire's multiply-and-reject). */
uint64_t rng_below(struct rng *r, uint64_t n);
/* Uniform in [0, 1). */
double rng_unit(struct rng *r);

/* Key ranks 1..n with P(k) = k^-s / H(n,s), drawn by Hörmann and
 * Derflinger's rejection-inversion: O(1) memory and a handful of
 * log/exp per draw whatever n, exact for any s >= 0 (s = 0 is uniform,
 * done directly). */
struct zipf {
	uint64_t n;
	double s;
	double h_x1;              /* H(1.5) - 1 */
	double h_n;               /* H(n + 0.5) */
	double squeeze;           /* accept at once when k - x <= this */
};

void zipf_init(struct zipf *z, uint64_t n, double s);
/* A key index in [0, n): rank - 1, so index 0 is the most popular. */
uint64_t zipf_draw(const struct zipf *z, struct rng *r);

#endif
