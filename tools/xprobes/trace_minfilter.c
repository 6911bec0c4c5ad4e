/* SPDX-License-Identifier: MIT */
/* `-t MIN_US` while recording (trace_minfilter, xprobes.h): a sink that
 * sits in front of another and passes on only calls that lasted at least
 * MIN_US, as `uftrace record -t` keeps only those.
 *
 * A call's length is known at its exit, so each thread's entries wait on
 * a stack of their own until then.  A call kept keeps its callers too
 * (they contain it, so they last longer): their entries go out first, in
 * order.  A call too short goes with everything it called (shorter
 * still), entry and exit both: the recording stays balanced.  A site hit
 * or a LOST record keeps every call open around it, whatever their
 * lengths, so that it is shown where it happened.  Calls still open when
 * the recording ends are kept (they lasted at least that long). */
#define _GNU_SOURCE
#include "xprobes.h"

#include <stdlib.h>
#include <string.h>

/* Entries waiting per thread at most: deeper, the oldest go out as kept
 * (memory stays bounded whatever the program's recursion).  And room for
 * all threads' together (64 MiB): a target with thousands of threads in
 * deep recursion has the waiting entries of the one that would pass it
 * go out as kept, or (no room at all) its new entries go out at once. */
#define MAX_PENDING 65536
#define ROOM_BUDGET (1u << 21)

struct pending {
	struct tf_event entry;
	int sent;                  /* its entry has gone to the sink */
};

struct thread_stack {
	int tid;
	struct pending *v;
	size_t n, cap;
	int left_out; /* the last call's exit was left out: its argument records go too */
};

struct trace_minfilter {
	struct trace_sink next;
	uint64_t min_ns;
	struct thread_stack *threads;
	size_t nthreads;
	struct u64map index;       /* tid -> its place in threads */
	size_t room;               /* pending entries allocated, all threads */
	struct tf_event *out;      /* what one call passes on */
	size_t nout, capout;
	uint64_t dropped;          /* calls left out, for the summary */
};

struct trace_minfilter *trace_minfilter_new(uint64_t min_ns, const struct trace_sink *next)
{
	struct trace_minfilter *f = calloc(1, sizeof(*f));
	if (f) {
		f->min_ns = min_ns;
		f->next = *next;
	}
	return f;
}

static struct thread_stack *stack_of(struct trace_minfilter *f, int tid)
{
	uint32_t at;
	if (u64map_get(&f->index, (uint64_t)(uint32_t)tid, &at) == 0)
		return &f->threads[at];
	struct thread_stack *grown = reallocarray(f->threads, f->nthreads + 1, sizeof(*grown));
	if (grown)
		f->threads = grown;
	if (!grown || u64map_put(&f->index, (uint64_t)(uint32_t)tid, (uint32_t)f->nthreads))
		return NULL;
	grown[f->nthreads] = (struct thread_stack){ .tid = tid };
	return &grown[f->nthreads++];
}

static int put(struct trace_minfilter *f, const struct tf_event *e)
{
	if (f->nout == f->capout) {
		size_t cap = f->capout ? 2 * f->capout : 4096;
		struct tf_event *grown = reallocarray(f->out, cap, sizeof(*grown));
		if (!grown)
			return -1;
		f->out = grown;
		f->capout = cap;
	}
	f->out[f->nout++] = *e;
	return 0;
}

/* Send the entries of the first n frames not sent yet, oldest first. */
static int send_open(struct trace_minfilter *f, struct thread_stack *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (t->v[i].sent)
			continue;
		if (put(f, &t->v[i].entry) != 0)
			return -1;
		t->v[i].sent = 1;
	}
	return 0;
}

static int push(struct trace_minfilter *f, struct thread_stack *t, const struct tf_event *e)
{
	size_t cap = t->cap ? 2 * t->cap : 64;
	int full = t->n == MAX_PENDING || (t->n == t->cap && f->room + cap - t->cap > ROOM_BUDGET);
	if (full && send_open(f, t, t->n) != 0)
		return -1;
	if (full && t->n) { /* all sent: the oldest no longer need a place */
		memmove(t->v, t->v + t->n / 2, (t->n - t->n / 2) * sizeof(*t->v));
		t->n -= t->n / 2;
	}
	if (t->n == t->cap && f->room + cap - t->cap > ROOM_BUDGET)
		return put(f, e); /* no room at all: kept, its exit passes too */
	if (t->n == t->cap) {
		struct pending *grown = reallocarray(t->v, cap, sizeof(*grown));
		if (!grown)
			return -1;
		f->room += cap - t->cap;
		t->v = grown;
		t->cap = cap;
	}
	t->v[t->n++] = (struct pending){ *e, 0 };
	return 0;
}

static int one(struct trace_minfilter *f, struct thread_stack *t, const struct tf_event *e)
{
	/* Argument records follow their entry or exit: an entry's make it
	 * pass (below, as a site hit does), a left-out exit's go with it. */
	int arg = ta_is_header(e) || ta_is_data(e);
	if (arg && t->left_out)
		return 0;
	if (!arg)
		t->left_out = 0;
	switch (e->kind) {
	case XP_TRACE_ENTRY:
		return push(f, t, e);
	case XP_TRACE_EXIT: {
		if (!t->n) /* entered before the start, or before a half-stack trim */
			return put(f, e);
		struct pending *top = &t->v[t->n - 1];
		if (!top->sent && e->ns - top->entry.ns < f->min_ns) {
			t->n--;
			f->dropped++;
			t->left_out = 1;
			return 0;
		}
		int rc = send_open(f, t, t->n) || put(f, e);
		t->n--;
		return rc;
	}
	default: /* a site hit, a LOST record: shown inside the calls around it */
		return send_open(f, t, t->n) || put(f, e);
	}
}

static int filter_events(void *ctx, int tid, const struct tf_event *ev, size_t n)
{
	struct trace_minfilter *f = ctx;
	struct thread_stack *t = stack_of(f, tid);
	if (!t)
		return -1;
	f->nout = 0;
	for (size_t i = 0; i < n; i++)
		if (one(f, t, &ev[i]) != 0)
			return -1;
	return f->nout ? f->next.events(f->next.ctx, tid, f->out, f->nout) : 0;
}

static int filter_thread(void *ctx, int tid, const char *name)
{
	struct trace_minfilter *f = ctx;
	return f->next.thread(f->next.ctx, tid, name);
}

struct trace_sink trace_minfilter_sink(struct trace_minfilter *f)
{
	return (struct trace_sink){ filter_thread, filter_events, f };
}

int trace_minfilter_finish(struct trace_minfilter *f, uint64_t *dropped)
{
	int rc = 0;
	for (size_t i = 0; i < f->nthreads && !rc; i++) {
		struct thread_stack *t = &f->threads[i];
		f->nout = 0;
		rc = send_open(f, t, t->n);
		if (!rc && f->nout)
			rc = f->next.events(f->next.ctx, t->tid, f->out, f->nout);
		t->n = 0;
	}
	*dropped = f->dropped;
	return rc;
}

void trace_minfilter_free(struct trace_minfilter *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nthreads; i++)
		free(f->threads[i].v);
	free(f->threads);
	u64map_free(&f->index);
	free(f->out);
	free(f);
}
