/* SPDX-License-Identifier: MIT */
/* An interval as mclat prints it: the means line (the format),
 * --percentiles' table, --hist's log2 histogram, or --json's object.
 * Only stages measured in this mode appear (po->shown). */
#include <math.h>
#include <string.h>
#include <time.h>

#include "mclat.h"

/* A figure in us, "-" when there is none (no data is not 0). */
static void us(FILE *out, int width, double v)
{
	if (isnan(v))
		fprintf(out, "%*s", width, "-");
	else
		fprintf(out, "%*.1f", width, v);
}

static void json_us(FILE *out, const char *name, double v)
{
	if (isnan(v))
		fprintf(out, "\"%s\":null", name);
	else
		fprintf(out, "\"%s\":%.3f", name, v);
}


/* The line starts with its local time and its unit, as mcsnoop's and
 * mctop's lines start with theirs: a log of them reads on its own. */
static void means_line(struct interval *iv, const struct print_opts *po, FILE *out)
{
	char clock[16] = "--:--:--";
	time_t now = time(NULL);
	struct tm tm;
	if (localtime_r(&now, &tm))
		strftime(clock, sizeof clock, "%H:%M:%S", &tm);
	fprintf(out, "%s (us) ", clock);
	for (int i = 0; i < NSTAGES; i++)
		if (po->shown[i]) {
			fprintf(out, "%s=", stage_names[i]);
			us(out, 0, stage_mean_us(&iv->st[i]));
			fputc(' ', out);
		}
	fprintf(out, "count=%lu sampled=%.1f%%", iv->count, 100 * interval_sampled(iv));
	/* What did not make it into the means, when anything did not. */
	if (iv->unmatched)
		fprintf(out, " unmatched=%lu", iv->unmatched);
	if (iv->partial)
		fprintf(out, " partial=%lu", iv->partial);
	if (iv->lost)
		fprintf(out, " lost=%llu", iv->lost);
	if (iv->cut)
		fprintf(out, " cut=%lu", iv->cut);
	fputc('\n', out);
}

static void percentiles(struct interval *iv, const struct print_opts *po, FILE *out)
{
	fprintf(out, "%-10s %9s %9s %9s %9s %9s   (us, %lu read batches, %.1f%% of the time sampled)\n",
		"STAGE", "p50", "p90", "p99", "max", "mean", iv->count, 100 * interval_sampled(iv));
	for (int i = 0; i < NSTAGES; i++) {
		if (!po->shown[i])
			continue;
		struct stage_values *s = &iv->st[i];
		fprintf(out, "%-10s", stage_names[i]);
		double v[5] = { stage_pct_us(s, 50), stage_pct_us(s, 90), stage_pct_us(s, 99),
				stage_pct_us(s, 100), stage_mean_us(s) };
		for (int k = 0; k < 5; k++)
			us(out, 10, v[k]);
		fputc('\n', out);
	}
}

/* Buckets [0,1) [1,2) [2,4) ... in us. */
static void histogram(struct stage_values *s, const char *name, FILE *out)
{
	unsigned long bucket[64] = { 0 }, most = 0;
	int top = 0;
	for (size_t i = 0; i < s->n; i++) {
		uint64_t us = s->v[i] / 1000;
		int b = us ? 64 - __builtin_clzll(us) : 0;
		if (++bucket[b] > most)
			most = bucket[b];
		if (b > top)
			top = b;
	}
	fprintf(out, "%s (us) %23s distribution\n", name, "count");
	for (int b = 0; s->n && b <= top; b++) {
		unsigned long lo = b ? 1ul << (b - 1) : 0, hi = 1ul << b;
		int stars = most ? (int)(bucket[b] * 40 / most) : 0;
		fprintf(out, "%10lu -> %-10lu : %-8lu |%-40.*s|\n", lo, hi, bucket[b], stars,
			"****************************************");
	}
}

/* Every field carries its unit (_us, _ns, _s) or is a count or a
 * fraction (docs/man/mclat.1, JSON). */
static void json(struct interval *iv, const struct print_opts *po, FILE *out)
{
	fprintf(out, "{\"time_s\":%lld,\"per\":\"read batch\",\"interval_s\":%.6f,"
		     "\"sampled_fraction\":%.4f,"
		     "\"count\":%lu,\"unmatched\":%lu,\"partial\":%lu,\"noreply\":%lu,"
		     "\"lost\":%llu,\"cut\":%lu,",
		(long long)time(NULL), (double)iv->length_ns / 1e9, interval_sampled(iv), iv->count, iv->unmatched, iv->partial,
		iv->noreply, iv->lost, iv->cut);
	/* What one window's attaching costs (mclat's time, not memcached's). */
	json_us(out, "attach_us",
		iv->windows ? (double)iv->attach_ns / (double)iv->windows / 1000 : NAN);
	fputc(',', out);
	json_us(out, "detach_us",
		iv->windows ? (double)iv->detach_ns / (double)iv->windows / 1000 : NAN);
	fputs(",\"stages\":{", out);
	const char *sep = "";
	for (int i = 0; i < NSTAGES; i++) {
		if (!po->shown[i])
			continue;
		struct stage_values *s = &iv->st[i];
		fprintf(out, "%s\"%s\":{\"count\":%zu,", sep, stage_names[i], s->n);
		json_us(out, "mean_us", stage_mean_us(s));
		static const char *const names[] = { "p50_us", "p90_us", "p99_us", "max_us" };
		static const double ps[] = { 50, 90, 99, 100 };
		for (int k = 0; k < 4; k++) {
			fputc(',', out);
			json_us(out, names[k], stage_pct_us(s, ps[k]));
		}
		fputc('}', out);
		sep = ",";
	}
	fputs("}}\n", out);
}

void print_interval(struct interval *iv, const struct print_opts *po, FILE *out)
{
	if (po->json) {
		json(iv, po, out);
		return;
	}
	means_line(iv, po, out);
	if (po->percentiles)
		percentiles(iv, po, out);
	if (po->hist >= 0)
		histogram(&iv->st[po->hist], stage_names[po->hist], out);
}

/* --batches: one object per read batch, in ns (docs/json.md); at_ns: CLOCK_MONOTONIC when
 * its first stage began (rx's start with BPF, memcached's without). */
void print_batch_json(const struct lat_batch *b, FILE *out)
{
	fprintf(out, "{\"batch\":{\"tid\":%d,\"fd\":%d,\"at_ns\":%llu", b->tid, b->fd,
		(unsigned long long)b->at_ns);
	for (int i = 0; i < NSTAGES; i++)
		if (b->measured[i])
			fprintf(out, ",\"%s_ns\":%llu", stage_names[i], (unsigned long long)b->ns[i]);
	fputs("}}\n", out);
}

/* --batches: a sampling window, when it opens (close_ns 0) and when it
 * closes, so that a batch can be checked against it. */
void print_window_json(uint64_t open_ns, uint64_t close_ns, FILE *out)
{
	fprintf(out, "{\"window\":{\"open_ns\":%llu", (unsigned long long)open_ns);
	if (close_ns)
		fprintf(out, ",\"close_ns\":%llu", (unsigned long long)close_ns);
	fputs("}}\n", out);
}
