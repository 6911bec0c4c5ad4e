/* SPDX-License-Identifier: MIT */
/* Random numbers and Zipf draws: see sample.h. */
#include <math.h>

#include "sample.h"

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void rng_seed(struct rng *r, uint64_t seed, uint64_t stream)
{
	/* Streams differ in the splitmix start, so each connection's
	 * sequence is independent of the others yet fixed by the seed. */
	uint64_t x = seed ^ splitmix(&stream);
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

uint64_t rng_below(struct rng *r, uint64_t n)
{
	unsigned __int128 m = (unsigned __int128)rng_next(r) * n;
	uint64_t low = (uint64_t)m;
	if (low < n) {
		uint64_t floor = -n % n;
		while (low < floor) {
			m = (unsigned __int128)rng_next(r) * n;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

double rng_unit(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* log1p(x)/x and expm1(x)/x, with their series near 0 where the
 * quotients lose precision. */
static double log1p_over(double x)
{
	if (fabs(x) > 1e-8)
		return log1p(x) / x;
	return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

static double expm1_over(double x)
{
	if (fabs(x) > 1e-8)
		return expm1(x) / x;
	return 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
}

/* The hat function h(x) = x^-s, its integral H(x) = (x^(1-s) - 1)/(1-s)
 * (log x when s = 1, which the _over helpers give as the limit), and
 * H's inverse. */
static double h(const struct zipf *z, double x)
{
	return exp(-z->s * log(x));
}

static double H(const struct zipf *z, double x)
{
	double lx = log(x);
	return expm1_over((1.0 - z->s) * lx) * lx;
}

static double H_inv(const struct zipf *z, double y)
{
	double t = y * (1.0 - z->s);
	if (t < -1.0)
		t = -1.0;   /* rounding only: keeps log1p defined */
	return exp(log1p_over(t) * y);
}

void zipf_init(struct zipf *z, uint64_t n, double s)
{
	z->n = n;
	z->s = s;
	z->h_x1 = H(z, 1.5) - 1.0;
	z->h_n = H(z, (double)n + 0.5);
	z->squeeze = 2.0 - H_inv(z, H(z, 2.5) - h(z, 2.0));
}

uint64_t zipf_draw(const struct zipf *z, struct rng *r)
{
	if (z->s == 0.0)
		return rng_below(r, z->n);
	for (;;) {
		/* u uniform over (h_x1, h_n]: invert the hat's integral. */
		double u = z->h_n + rng_unit(r) * (z->h_x1 - z->h_n);
		double x = H_inv(z, u);
		double kd = floor(x + 0.5);
		uint64_t k = kd < 1.0 ? 1 : kd > (double)z->n ? z->n : (uint64_t)kd;
		/* Accept when the point lies under the true mass of k. */
		if ((double)k - x <= z->squeeze || u >= H(z, (double)k + 0.5) - h(z, (double)k))
			return k - 1;
	}
}
