/* SPDX-License-Identifier: MIT */
/* One look at the module and the frame it makes.
 *
 * The module keeps running totals per key; rates come from the difference
 * between this look and a reference look: the previous one (per interval)
 * or the one taken at attach (--cumulative).  For each key in this look:
 *   - in the reference with the same first_ns: the difference;
 *   - taken by its counter after the reference (first_ns later), or
 *     re-taken after an eviction (first_ns changed): all its counts are new;
 *   - tracked before the reference but not among the rows it fetched: its
 *     average since first_ns, scaled to the span (an estimate; such a key
 *     was below the previous look's cut).
 * calls and err stay the module's totals, whose bound holds for them. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "../common/common.h"
#include "core.h"

/* Rows asked of the module: enough to fill any table, more to group;
 * at most the module's limit. */
#define MODULE_MAX_TOP 2000
static size_t look_rows(const struct mctop_opts *o)
{
	size_t n = o->rows > 200 ? (size_t)o->rows : 200;
	if (o->prefix && n < 1000)
		n = 1000;
	return n < MODULE_MAX_TOP ? n : MODULE_MAX_TOP;
}

int mctop_look(struct mctop *m, struct mctop_raw *r)
{
	if (m->watch)
		return mctop_watch_look(m->watch, look_rows(&m->o), m->o.cmd_mask, r);
	char by[128];
	mctop_cmd_by(m->o.cmd_mask, by, sizeof(by));
	char *text = mctop_call(m, "top %zu raw%s%s", look_rows(&m->o), *by ? " " : "", by);
	if (!text)
		return -1;
	char why[512];
	int rc = mctop_raw_parse(text, r, why, sizeof(why));
	if (rc) /* and what it said instead: often the module's own complaint */
		fprintf(stderr, "mctop: cannot read the module's answer (%s): %.*s\n", why,
			(int)strcspn(text, "\n"), sanitize_text(text));
	free(text);
	return rc;
}

/* The commands of -c among a key's exact per-command counts. */
static uint64_t selected(const struct mctop_raw_key *k, unsigned mask)
{
	uint64_t n = 0;
	for (int c = 0; c < MC_NCMD; c++)
		if (mask & (1u << c))
			n += k->ncmd[c];
	return n;
}

/* Fill row from cur against ref (NULL: everything in cur is new; scale
 * < 1: only that share of it). */
static void make_row(struct mctop_key *row, const struct mctop_raw_key *cur,
		     const struct mctop_raw_key *ref, double scale, double span_s, unsigned mask)
{
	static const struct mctop_raw_key zero;
	if (!ref)
		ref = &zero;
	row->key_escaped = keytext_from_module(cur->key, row->key, sizeof(row->key), 0);
	row->members = 1;
	row->calls = mask ? selected(cur, mask) + cur->err : cur->calls;
	row->err = cur->err;
	row->objsize = cur->objsize;
	row->bytes = cur->bytes;
	row->first_ns = cur->first_ns;
	row->clients = cur->clients;
	memcpy(row->ncmd, cur->ncmd, sizeof(row->ncmd));
	uint64_t dcalls = mask ? selected(cur, mask) - selected(ref, mask) : cur->calls - ref->calls;
	double dbytes = (double)(cur->bytes - ref->bytes);
	double dlat = (double)(cur->lat_sum_ns - ref->lat_sum_ns);
	uint64_t dn = cur->lat_n - ref->lat_n;
	row->reqs = span_s > 0 ? (double)dcalls * scale / span_s : 0;
	row->bw_kbps = span_s > 0 ? dbytes * scale * 8 / 1000 / span_s : 0;
	row->lat_us = dn ? dlat / (double)dn / 1000 : -1;
	for (int h = 0; h < MCTOP_HIST; h++)
		row->hist[h] = (uint64_t)((double)(cur->hist[h] - ref->hist[h]) * scale + 0.5);
}

/* The reference line for cur in ref, and the share of cur's counts that
 * fall in the span (see the top of this file). */
static const struct mctop_raw_key *reference(const struct mctop_raw *ref,
					     const struct mctop_raw_key *cur, uint64_t now_ns,
					     double *scale)
{
	*scale = 1;
	const struct mctop_raw_key *k = mctop_raw_find(ref, cur->key);
	if (k && k->first_ns == cur->first_ns && k->calls <= cur->calls)
		return k;
	if (cur->first_ns < ref->now_ns && now_ns > cur->first_ns)
		*scale = (double)(now_ns - ref->now_ns) / (double)(now_ns - cur->first_ns);
	return NULL;
}

void mctop_frame_free(struct mctop_frame *f)
{
	free(f->keys);
	f->keys = NULL;
	f->nkeys = 0;
}

int mctop_sample(struct mctop *m, struct mctop_frame *f)
{
	struct mctop_raw cur;
	if (mctop_look(m, &cur) != 0)
		return -1;
	mctop_frame_free(f);
	struct mctop_raw *ref = m->o.cumulative || !m->prev.now_ns ? &m->base : &m->prev;
	static const struct mctop_raw empty;
	/* Someone reset the module since: everything counts from then. */
	const struct mctop_raw *r = cur.total < ref->total ? &empty : ref;
	uint64_t ref_ns = r->now_ns ? r->now_ns : ref->now_ns;
	double span_s = cur.now_ns > ref_ns ? (double)(cur.now_ns - ref_ns) / 1e9 : 0;

	*f = (struct mctop_frame){
		.pid = m->s.pid,
		.uptime_s = mctop_uptime(m->boot_ticks),
		.span_s = span_s,
		.cmds_per_s = span_s > 0 ? (double)(cur.total - r->total) / span_s : 0,
		.total = cur.total,
		.tracked = cur.tracked,
		.bound = cur.bound,
		.budget = cur.budget,
		.used = cur.bytes,
		.lat_every = cur.lat_every,
		.no_lat = m->watch != NULL,
		.source = m->watch ? "memcached watch" : "probes",
		.lost = cur.lost,
	};
	snprintf(f->target, sizeof(f->target), "%s", m->target);
	f->keys = calloc(cur.nkeys ? cur.nkeys : 1, sizeof(*f->keys));
	if (!f->keys) {
		fprintf(stderr, "mctop: out of memory\n");
		mctop_raw_free(&cur);
		return -1;
	}
	for (size_t i = 0; i < cur.nkeys; i++) {
		const struct mctop_raw_key *k = &cur.keys[i];
		if (m->o.cmd_mask && !selected(k, m->o.cmd_mask))
			continue;
		double scale;
		const struct mctop_raw_key *rk = reference(r, k, cur.now_ns, &scale);
		make_row(&f->keys[f->nkeys++], k, rk, scale, span_s, m->o.cmd_mask);
	}
	f->untracked = cur.untracked;
	if (m->have_prefix)
		mctop_prefix_apply(&m->prefix, f);
	mctop_sort(f, SORT_CALLS, 0);

	mctop_raw_free(&m->prev);
	m->prev = cur;
	if (m->on_frame)
		m->on_frame(m->on_frame_arg, f);
	return 0;
}

struct mctop *mctop_open(const struct mctop_opts *o)
{
	struct mctop *m = mctop_attach(o);
	if (m && mctop_look(m, &m->base) != 0) {
		mctop_close(m);
		return NULL;
	}
	return m;
}

int mctop_reset(struct mctop *m)
{
	if (m->watch) {
		mctop_watch_reset(m->watch);
		mctop_raw_free(&m->base);
		mctop_raw_free(&m->prev);
		return mctop_look(m, &m->base);
	}
	char *text = mctop_call(m, "reset");
	if (!text)
		return -1;
	free(text);
	mctop_raw_free(&m->base);
	mctop_raw_free(&m->prev);
	return mctop_look(m, &m->base);
}
