/* SPDX-License-Identifier: MIT */
/* mctop --metrics ADDR:PORT: the top keys and the totals as Prometheus /
 * OpenMetrics text (the names are documented
 * in docs/mctop-metrics.md).  This file is mctop's families only; the
 * formats' details and the HTTP side are the tools' shared exporter
 * (tools/common/exposition.c, exporter.c).
 *
 * mctop_metrics_update renders on the caller's thread, once per interval:
 * the UI never waits on a scraper. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/common.h"
#include "mctop.h"

#define MM_DEFAULT_ROWS 20   /* rows 0: the streams' default */

struct mctop_metrics {
	struct exporter *ex;
	size_t rows;
};

/* What one exposition shows: a frame (NULL: none yet) cut to its busiest
 * rows.  Made once per update, rendered in both formats. */
struct view {
	const struct mctop_frame *fr;
	size_t rows;
	const struct mctop_key **sel; /* the frame's keys, busiest first */
	size_t n;                     /* exported: at most rows */
	uint64_t bound;
	double now;                   /* Unix time of the look */
};

/* The per-key families: one sample per exported key; get answers 0 when
 * the key has no such value (no size or latency seen yet). */
struct key_family {
	const char *name, *type, *help;
	int (*get)(const struct mctop_key *k, double *v);
};

static int k_calls(const struct mctop_key *k, double *v) { *v = (double)k->calls; return 1; }
static int k_err(const struct mctop_key *k, double *v) { *v = (double)k->err; return 1; }
static int k_reqs(const struct mctop_key *k, double *v) { *v = k->reqs; return 1; }
static int k_bytes(const struct mctop_key *k, double *v) { *v = (double)k->bytes; return 1; }
static int k_bw(const struct mctop_key *k, double *v) { *v = k->bw_kbps * 125.0; return 1; }
static int k_clients(const struct mctop_key *k, double *v) { *v = (double)k->clients; return 1; }

static int k_size(const struct mctop_key *k, double *v)
{
	*v = (double)k->objsize;
	return k->objsize >= 0;
}

static int k_lat(const struct mctop_key *k, double *v)
{
	*v = k->lat_us / 1e6;
	return k->lat_us >= 0;
}

/* calls is a counter: the merged Space-Saving estimate of a key never
 * decreases while the module runs (a counter only grows, and a table
 * that evicts the key stands in its minimum, at least what the key had),
 * and a reset or a new module is a counter reset, which rate() handles. */
static const struct key_family key_families[] = {
	{"mctop_key_calls", "counter",
	 "Commands on the key since the module started counting, an upper bound: "
	 "the true count is at least mctop_key_calls_total - mctop_key_calls_error.", k_calls},
	{"mctop_key_calls_error", "gauge",
	 "The most mctop_key_calls_total can exceed the key's true count (Space-Saving).", k_err},
	{"mctop_key_requests_per_second", "gauge",
	 "Commands on the key per second over mctop's last interval (since attach with --cumulative).",
	 k_reqs},
	{"mctop_key_value_bytes", "counter",
	 "Value bytes the key's commands moved since it was first tracked.", k_bytes},
	{"mctop_key_bandwidth_bytes_per_second", "gauge",
	 "Value bytes per second over mctop's last interval (the table's BW(kbps) is this * 8 / 1000).",
	 k_bw},
	{"mctop_key_object_size_bytes", "gauge",
	 "The latest value size of the key (absent until one is seen).", k_size},
	{"mctop_key_latency_mean_seconds", "gauge",
	 "Mean latency of the key's commands over mctop's last interval (absent when none).", k_lat},
	{"mctop_key_clients", "gauge",
	 "Distinct connections that used the key, estimated.", k_clients},
};

/* Busiest first whatever order the UI shows; ties by key so that the
 * same keys are exported from one scrape to the next. */
static int by_calls(const void *a, const void *b)
{
	const struct mctop_key *x = *(const struct mctop_key *const *)a;
	const struct mctop_key *y = *(const struct mctop_key *const *)b;
	if (x->calls != y->calls)
		return x->calls > y->calls ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* The keys in the exported rows (a --prefix group holds several). */
static uint64_t exported_keys(const struct view *v)
{
	uint64_t m = 0;
	for (size_t i = 0; i < v->n; i++)
		m += v->sel[i]->members;
	return m;
}

/* Keys are not labelled by rank: a rank label would make a new series
 * each time two keys swap places.  The label is the key text, UTF-8
 * (tools/common/keytext.c), so a query finds the key as people write it. */
static void render_keys(FILE *f, enum expo_format fmt, const struct view *v)
{
	for (size_t i = 0; i < sizeof(key_families) / sizeof(key_families[0]); i++) {
		const struct key_family *kf = &key_families[i];
		if (kf->get == k_lat && v->fr->no_lat)
			continue; /* no latency measured at all */
		expo_family(f, fmt, kf->name, kf->type, kf->help);
		for (size_t j = 0; j < v->n; j++) {
			double x;
			if (!kf->get(v->sel[j], &x))
				continue;
			fprintf(f, "%s%s{key=\"", kf->name, expo_suffix(kf->type));
			expo_label(f, v->sel[j]->key);
			fputs("\"} ", f);
			expo_value(f, x);
			fputc('\n', f);
		}
	}
}

/* The whole exposition of a struct view in one format (the exporter's
 * renderer). */
static int render(FILE *f, enum expo_format fmt, const void *data)
{
	const struct view *v = data;
	const struct mctop_frame *fr = v->fr;
	expo_single(f, fmt, "mctop_target_up", "gauge",
		    "1 once mctop has looked at memcached, 0 before.", fr != NULL);
	expo_single(f, fmt, "mctop_key_rows", "gauge",
		    "The most keys exported (mctop -r): the per-key families hold at most this many series.",
		    (double)v->rows);
	if (fr) {
		expo_family(f, fmt, "mctop_target", "info", "The memcached mctop is attached to.");
		fprintf(f, "mctop_target_info{pid=\"%d\",target=\"", (int)fr->pid);
		expo_label(f, fr->target);
		fputs("\"} 1\n", f);
		/* Where the counts come from: the probe sites, or memcached's
		 * watch stream on a memcached without them (which has no
		 * latency: its family is then absent, not 0). */
		expo_family(f, fmt, "mctop_source", "info",
			    "Where the counts come from: probes, or memcached watch.");
		fputs("mctop_source_info{source=\"", f);
		expo_label(f, fr->source ? fr->source : "probes");
		fputs("\"} 1\n", f);
		expo_single(f, fmt, "mctop_commands_lost", "counter",
			    "Commands the source lost since attach (memcached's skipped watch lines).",
			    (double)fr->lost);
		expo_single(f, fmt, "mctop_target_uptime_seconds", "gauge",
			    "How long memcached has been running.", fr->uptime_s);
		expo_single(f, fmt, "mctop_last_update_timestamp_seconds", "gauge",
			    "When mctop last looked (Unix time).", v->now);
		expo_single(f, fmt, "mctop_interval_seconds", "gauge",
			    "The span the per-second and mean values are over.", fr->span_s);
		expo_single(f, fmt, "mctop_commands", "counter",
			    "Commands memcached ran since the module started counting, tracked or not.",
			    (double)fr->total);
		expo_single(f, fmt, "mctop_commands_per_second", "gauge",
			    "Commands per second over mctop's last interval.", fr->cmds_per_s);
		/* The counters live in the module inside memcached, or with the
		 * watch stream in mctop itself: the HELP says which. */
		int in_mctop = fr->source && strcmp(fr->source, "probes") != 0;
		expo_single(f, fmt, "mctop_keys_tracked", "gauge",
			    in_mctop ? "Keys holding a counter in mctop's tables (the watch stream's)."
				     : "Keys holding a counter in the module's tables.",
			    (double)fr->tracked);
		expo_single(f, fmt, "mctop_keys_omitted", "gauge",
			    "Tracked keys not exported here plus commands no table could take.",
			    (double)mctop_omitted(fr, exported_keys(v)));
		expo_single(f, fmt, "mctop_error_bound", "gauge",
			    "The most calls a key not exported can have had.", (double)v->bound);
		expo_single(f, fmt, "mctop_memory_bytes", "gauge",
			    in_mctop ? "Memory mctop's own tables use (the watch stream's counts; "
				       "nothing inside memcached)."
				     : "Memory the module's tables use inside memcached.",
			    (double)fr->used);
		expo_single(f, fmt, "mctop_memory_budget_bytes", "gauge",
			    in_mctop ? "The limit of mctop's own tables (mctop --budget)."
				     : "The limit of the module's tables (mctop --budget).",
			    (double)fr->budget);
		render_keys(f, fmt, v);
	}
	expo_end(f, fmt);
	return 0;
}

/* The view of fr (NULL: no frame yet): 0, or -1 when out of memory. */
static int view_make(struct view *v, const struct mctop_frame *fr, size_t rows)
{
	*v = (struct view){ .fr = fr, .rows = rows };
	if (fr && fr->nkeys) {
		v->sel = malloc(fr->nkeys * sizeof(*v->sel));
		if (!v->sel)
			return -1;
		for (size_t i = 0; i < fr->nkeys; i++)
			v->sel[i] = &fr->keys[i];
		qsort(v->sel, fr->nkeys, sizeof(*v->sel), by_calls);
		v->n = fr->nkeys < rows ? fr->nkeys : rows;
	}
	if (fr) {
		/* A frame may hold more keys than we export: the busiest left
		 * out raises the bound on every key not shown. */
		v->bound = fr->bound;
		if (v->n < fr->nkeys && v->sel[v->n]->calls > v->bound)
			v->bound = v->sel[v->n]->calls;
	}
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	v->now = (double)wall.tv_sec + (double)(wall.tv_nsec / 1000000) / 1e3;
	return 0;
}

static void view_free(struct view *v)
{
	free(v->sel);
}

struct mctop_metrics *mctop_metrics_start(const char *addr, size_t rows)
{
	struct mctop_metrics *mm = calloc(1, sizeof(*mm));
	if (!mm) {
		fprintf(stderr, "mctop: --metrics: out of memory\n");
		return NULL;
	}
	mm->rows = rows ? rows : MM_DEFAULT_ROWS;
	static const struct exporter_conf conf = {
		.prog = "mctop", .about = "memcached's hottest keys", .render = render };
	struct view none;
	view_make(&none, NULL, mm->rows);
	mm->ex = exporter_start(addr, &conf, &none);
	if (!mm->ex) {
		free(mm);
		return NULL;
	}
	return mm;
}

void mctop_metrics_update(struct mctop_metrics *mm, const struct mctop_frame *f)
{
	struct view v;
	if (!mm || view_make(&v, f, mm->rows) != 0)
		return; /* out of memory: scrapers keep the previous frame */
	exporter_publish(mm->ex, &v);
	view_free(&v);
}

void mctop_metrics_stop(struct mctop_metrics *mm)
{
	if (!mm)
		return;
	exporter_stop(mm->ex);
	free(mm);
}
