/* SPDX-License-Identifier: MIT */
/* --metrics ADDR:PORT: each stage as a Prometheus histogram,
 * so that a fleet's Prometheus answers
 *
 *   histogram_quantile(0.99, sum by (stage, le) (rate(mclat_stage_seconds_bucket[1m])))
 *
 * across hosts.  Classic buckets only: native histograms exist only in
 * Prometheus' protobuf exposition, which Debian's Prometheus 2.42 reads
 * only behind --enable-feature=native-histograms and which the shared
 * exporter (tools/common/exporter.c, text formats) does not speak.
 *
 * Buckets and counters are cumulative since mclat started (Prometheus
 * takes rates); each interval's batches are added when it ends, from
 * mclat's own thread; the exporter's thread serves the last rendering.
 * Only measured batches (inside a window, not cut) are in them. */
#include <math.h>
#include <stdlib.h>

#include "mclat.h"

/* Upper bounds in seconds: 1 us to 1 s, 1-2.5-5 steps.  A loopback
 * request's stages are 0.1-100 us, a loaded one's total ms. */
static const double bounds[] = { 1e-6,	 2.5e-6, 5e-6,	 1e-5, 2.5e-5, 5e-5, 1e-4,
				 2.5e-4, 5e-4,	 1e-3,	 2.5e-3, 5e-3, 1e-2, 2.5e-2,
				 5e-2,	 0.1,	 0.25,	 0.5,	 1 };
#define NBOUNDS (sizeof(bounds) / sizeof(bounds[0]))

struct metrics {
	struct exporter *ex;
	const unsigned char *shown;
	unsigned long long bucket[NSTAGES][NBOUNDS + 1]; /* last: +Inf */
	double sum_s[NSTAGES];
	unsigned long long count[NSTAGES];
	unsigned long long cut, partial, unmatched, lost;
	double sampled; /* the last interval's share */
};

static int render(FILE *f, enum expo_format fmt, const void *data)
{
	const struct metrics *m = data;
	expo_family(f, fmt, "mclat_stage_seconds", "histogram",
		    "Time a memcached read batch spent in each stage (see mclat(1)), measured "
		    "batches only (inside a sampling window, none cut by its edge).");
	for (int s = 0; s < NSTAGES; s++) {
		if (!m->shown[s])
			continue;
		unsigned long long cum = 0;
		for (size_t b = 0; b <= NBOUNDS; b++) {
			cum += m->bucket[s][b];
			fprintf(f, "mclat_stage_seconds_bucket{stage=\"%s\",le=\"", stage_names[s]);
			if (b < NBOUNDS)
				expo_value(f, bounds[b]);
			else
				fputs("+Inf", f);
			fprintf(f, "\"} %llu\n", cum);
		}
		fprintf(f, "mclat_stage_seconds_sum{stage=\"%s\"} ", stage_names[s]);
		expo_value(f, m->sum_s[s]);
		fprintf(f, "\nmclat_stage_seconds_count{stage=\"%s\"} %llu\n", stage_names[s],
			m->count[s]);
	}
	const struct {
		const char *name, *type, *help;
		double v;
	} more[] = {
		{ "mclat_sampled_ratio", "gauge",
		  "Share of the last interval mclat watched (its sampling windows).", m->sampled },
		{ "mclat_batches_cut", "counter",
		  "Batches a sampling window's edge cut: not measured.", (double)m->cut },
		{ "mclat_batches_partial", "counter",
		  "Batches missing a kernel boundary: not measured.", (double)m->partial },
		{ "mclat_batches_unmatched", "counter",
		  "Kernel batches without the module's: not measured.", (double)m->unmatched },
		{ "mclat_events_lost", "counter", "Events a full ring dropped.", (double)m->lost },
	};
	for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
		expo_single(f, fmt, more[i].name, more[i].type, more[i].help, more[i].v);
	expo_end(f, fmt);
	return 0;
}

struct metrics *metrics_start(const char *addr, const unsigned char *shown)
{
	struct metrics *m = calloc(1, sizeof(*m));
	if (!m) {
		fprintf(stderr, "mclat: out of memory\n");
		return NULL;
	}
	m->shown = shown;
	static const struct exporter_conf conf = {
		.prog = "mclat",
		.about = "where memcached's requests spend their time, stage by stage",
		.render = render,
	};
	m->ex = exporter_start(addr, &conf, m);
	if (!m->ex) {
		free(m);
		return NULL;
	}
	return m;
}

/* Before the interval's values are reset. */
void metrics_update(struct metrics *m, const struct interval *iv, double sampled)
{
	for (int s = 0; s < NSTAGES; s++) {
		const struct stage_values *v = &iv->st[s];
		for (size_t i = 0; i < v->n; i++) {
			double sec = (double)v->v[i] / 1e9;
			size_t b = 0;
			while (b < NBOUNDS && sec > bounds[b])
				b++;
			m->bucket[s][b]++;
			m->sum_s[s] += sec;
		}
		m->count[s] += v->n;
	}
	m->cut += iv->cut;
	m->partial += iv->partial;
	m->unmatched += iv->unmatched;
	m->lost += iv->lost;
	m->sampled = sampled;
	exporter_publish(m->ex, m);
}

void metrics_stop(struct metrics *m)
{
	if (!m)
		return;
	exporter_stop(m->ex);
	free(m);
}
