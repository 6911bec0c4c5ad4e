/* SPDX-License-Identifier: MIT */
/* The results, for people or (--json) for programs, and the ground
 * truth file (--truth). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mcload.h"

static const double pcts[] = { 50, 90, 99, 99.9 };
static const char *const pct_names[] = { "p50", "p90", "p99", "p99.9" };

static double us(uint64_t ns)
{
	return (double)ns / 1000.0;
}

static const char *loop_name(const struct config *cfg, char *buf, size_t n)
{
	if (cfg->rate > 0)
		snprintf(buf, n, "open loop at %g req/s", cfg->rate);
	else
		snprintf(buf, n, "closed loop, pipeline %u", cfg->pipeline);
	return buf;
}

static void print_json(const struct config *cfg, const struct counters *c,
		       const struct hist *lat, double elapsed)
{
	printf("{\"server\":\"%s:%s\",\"protocol\":\"%s\",\"connections\":%u,\"threads\":%u,"
	       "\"keys\":%llu,\"zipf\":%g,\"seed\":%llu,\"multiget\":%u,\"rate\":%g,"
	       "\"pipeline\":%u,\"seconds\":%.6f,\"requests\":%llu,\"gets\":%llu,\"sets\":%llu,"
	       "\"get_keys\":%llu,\"completed\":%llu,\"hits\":%llu,\"misses\":%llu,"
	       "\"server_errors\":%llu,\"conn_errors\":%llu,\"unanswered\":%llu,"
	       "\"requests_per_sec\":%.1f,\"latency_us\":{",
	       cfg->host, cfg->port, cfg->proto == PROTO_TEXT ? "text" : "binary", cfg->conns,
	       cfg->threads, (unsigned long long)cfg->keys, cfg->zipf_s,
	       (unsigned long long)cfg->seed, cfg->width, cfg->rate, cfg->pipeline, elapsed,
	       (unsigned long long)c->requests, (unsigned long long)c->gets,
	       (unsigned long long)c->sets, (unsigned long long)c->get_keys,
	       (unsigned long long)c->completed, (unsigned long long)c->hits,
	       (unsigned long long)c->misses, (unsigned long long)c->server_errors,
	       (unsigned long long)c->conn_errors, (unsigned long long)c->unanswered,
	       elapsed > 0 ? (double)c->completed / elapsed : 0.0);
	for (size_t i = 0; i < sizeof pcts / sizeof pcts[0]; i++)
		printf("\"%s\":%.3f,", pct_names[i], us(hist_percentile(lat, pcts[i])));
	printf("\"max\":%.3f}}\n", us(lat->max));
}

void report_print(const struct config *cfg, const struct counters *c,
		  const struct hist *lat, double elapsed)
{
	if (cfg->json) {
		print_json(cfg, c, lat, elapsed);
		return;
	}
	char loop[64];
	printf("mcload: %s:%s, %s protocol, %u connection%s on %u thread%s, %s\n",
	       cfg->host, cfg->port, cfg->proto == PROTO_TEXT ? "text" : "binary",
	       cfg->conns, cfg->conns == 1 ? "" : "s", cfg->threads, cfg->threads == 1 ? "" : "s",
	       loop_name(cfg, loop, sizeof loop));
	printf("workload: %llu keys, %s %g, seed %llu, get:set %u:%u, values %u-%u bytes, "
	       "%u keys per get\n",
	       (unsigned long long)cfg->keys, cfg->zipf_s > 0 ? "zipf" : "uniform", cfg->zipf_s,
	       (unsigned long long)cfg->seed, cfg->get_weight, cfg->set_weight, cfg->vmin,
	       cfg->vmax, cfg->width);
	printf("requests      %llu in %.3f s: %.1f req/s (gets %llu, sets %llu)\n",
	       (unsigned long long)c->completed, elapsed,
	       elapsed > 0 ? (double)c->completed / elapsed : 0.0,
	       (unsigned long long)c->gets, (unsigned long long)c->sets);
	uint64_t looked = c->hits + c->misses;
	printf("get keys      %llu: hits %llu, misses %llu (%.1f%% hits)\n",
	       (unsigned long long)c->get_keys, (unsigned long long)c->hits,
	       (unsigned long long)c->misses, looked ? 100.0 * (double)c->hits / (double)looked : 0.0);
	printf("latency (us) ");
	for (size_t i = 0; i < sizeof pcts / sizeof pcts[0]; i++)
		printf(" %s %.1f", pct_names[i], us(hist_percentile(lat, pcts[i])));
	printf("  max %.1f\n", us(lat->max));
	printf("errors        server %llu, connection %llu, unanswered %llu\n",
	       (unsigned long long)c->server_errors, (unsigned long long)c->conn_errors,
	       (unsigned long long)c->unanswered);
}

int truth_write(const struct config *cfg, const struct truth *t)
{
	FILE *f = fopen(cfg->truth_path, "w");
	if (!f) {
		fprintf(stderr, "mcload: cannot write %s: %s\n", cfg->truth_path, strerror(errno));
		return -1;
	}
	/* Only keys that were sent, in key-number order: two runs with the
	 * same seed and --requests give byte-identical files. */
	int json = cfg->truth_fmt == TRUTH_JSON, first = 1;
	if (json)
		fputs("{", f);
	for (uint64_t k = 0; k < cfg->keys; k++) {
		uint64_t g = atomic_load_explicit(&t->gets[k], memory_order_relaxed);
		uint64_t s = atomic_load_explicit(&t->sets[k], memory_order_relaxed);
		if (!g && !s)
			continue;
		if (json) {
			fputs(first ? "\n\"" : ",\n\"", f);
			key_print_escaped(cfg, k, json, f);
			fprintf(f, "\":{\"get\":%llu,\"set\":%llu}", (unsigned long long)g,
				(unsigned long long)s);
		} else {
			key_print_escaped(cfg, k, json, f);
			fprintf(f, "\t%llu\t%llu\n", (unsigned long long)g, (unsigned long long)s);
		}
		first = 0;
	}
	if (json)
		fputs("\n}\n", f);
	if (fclose(f) != 0) {
		fprintf(stderr, "mcload: cannot write %s: %s\n", cfg->truth_path, strerror(errno));
		return -1;
	}
	return 0;
}
