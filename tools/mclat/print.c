/* An interval as mclat prints it: the means line (the format),
 * --percentiles' table, --hist's log2 histogram, or --json's object.
 * Only stages measured in this mode appear (po->shown). */
#include <string.h>
#include <time.h>

#include "mclat.h"

static void means_line(struct interval *iv, const struct print_opts *po, FILE *out)
{
	for (int i = 0; i < NSTAGES; i++)
		if (po->shown[i])
			fprintf(out, "%s=%.1f ", stage_names[i], stage_mean_us(&iv->st[i]));
	fprintf(out, "count=%lu", iv->count);
	/* What did not make it into the means, when anything did not. */
	if (iv->unmatched)
		fprintf(out, " unmatched=%lu", iv->unmatched);
	if (iv->partial)
		fprintf(out, " partial=%lu", iv->partial);
	if (iv->lost)
		fprintf(out, " lost=%llu", iv->lost);
	fputc('\n', out);
}

static void percentiles(struct interval *iv, const struct print_opts *po, FILE *out)
{
	fprintf(out, "%-10s %9s %9s %9s %9s %9s   (us, %lu read batches)\n", "STAGE", "p50", "p90",
		"p99", "max", "mean", iv->count);
	for (int i = 0; i < NSTAGES; i++) {
		if (!po->shown[i])
			continue;
		struct stage_values *s = &iv->st[i];
		fprintf(out, "%-10s %9.1f %9.1f %9.1f %9.1f %9.1f\n", stage_names[i],
			stage_pct_us(s, 50), stage_pct_us(s, 90), stage_pct_us(s, 99),
			stage_pct_us(s, 100), stage_mean_us(s));
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

static void json(struct interval *iv, const struct print_opts *po, FILE *out)
{
	fprintf(out, "{\"time_s\":%lld,\"per\":\"read batch\",\"count\":%lu,\"unmatched\":%lu,"
		     "\"partial\":%lu,\"noreply\":%lu,\"lost\":%llu,\"stages\":{",
		(long long)time(NULL), iv->count, iv->unmatched, iv->partial, iv->noreply, iv->lost);
	const char *sep = "";
	for (int i = 0; i < NSTAGES; i++) {
		if (!po->shown[i])
			continue;
		struct stage_values *s = &iv->st[i];
		fprintf(out, "%s\"%s\":{\"mean_us\":%.3f,\"p50_us\":%.3f,\"p90_us\":%.3f,"
			     "\"p99_us\":%.3f,\"max_us\":%.3f}", sep, stage_names[i], stage_mean_us(s),
			stage_pct_us(s, 50), stage_pct_us(s, 90), stage_pct_us(s, 99),
			stage_pct_us(s, 100));
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
