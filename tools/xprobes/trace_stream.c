/* SPDX-License-Identifier: MIT */
/* Draining a live trace (trace_stream.h).  Each pass asks the agent for
 * its buffers (`trace buffers`: a thread that starts tracing shows up on
 * the next pass), copies every ring's records [tail, head) with
 * process_vm_readv, hands them to the sink, and writes the new tail into
 * the target with process_vm_writev, which frees that room for the
 * thread.  The tool may ptrace the target (the attach rule), which is
 * what both calls need; the agent is not involved in the copying, so
 * draining costs the traced threads nothing but the room check they make
 * anyway.  docs/design.md says why this and not shared memory. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* A pass that found a ring at least this full goes again at once; else
 * the next pass waits PASS_MS.  At ~100 MB/s of records (memcached with
 * every function traced) a 1 MiB ring fills in ~10 ms. */
#define BUSY_FRACTION 4
#define PASS_MS 5
/* How often a pass asks the agent for its list of buffers (below). */
#define LIST_MS 20
#define QUIET_LIST_MS 250
/* Records copied, decoded and written at a time: 512 KiB of them.  A
 * pass may be cut short between two (trace_stream_cut): one chunk costs
 * the writer at most CHUNK * 1024 steps (an exit's scan of its stack). */
#define CHUNK 32768
/* Rings a recording drains at most (the writer's threads, trace_uftrace.c):
 * a target listing more has the rest left alone, and said. */
#define MAX_RINGS 65536u

struct ring {
	uint64_t addr, cap;
	int tid;
	uint64_t lost;     /* the header's count when last read */
	uint64_t marked;   /* of those, said by LOST records drained */
	uint64_t last_ns;  /* the newest record's time */
	uint64_t left;     /* records a cut-short pass left in it */
};

struct trace_stream {
	struct session *s;
	struct trace_sink sink;
	struct ring *rings;
	size_t nrings;
	struct xp_trace_rec *rec;  /* copy space */
	struct tf_event *ev;
	size_t space;              /* records rec and ev hold */
	struct trace_buffers list; /* the agent's last `trace buffers` */
	int have_list;
	uint64_t objects_gen;      /* the agent's count of loads and unloads */
	uint64_t unbuffered;       /* records of threads the budget left no ring */
	int stopped;               /* the agent said tracing is off */
	int execd;                 /* the process exec'd: said once */
	long long list_ms;         /* when it was asked */
	long long list_every_ms;   /* how often: LIST_MS, or QUIET_LIST_MS */
	int (*cut)(void *ctx);     /* 1: end the pass now (trace_stream_cut) */
	void *cut_ctx;
	struct u64map index;       /* ring address -> its newest ring */
	uint64_t refused;          /* buffers past MAX_RINGS in the last listing */
};

struct trace_stream *trace_stream_new(struct session *s, const struct trace_sink *sink)
{
	struct trace_stream *t = calloc(1, sizeof(*t));
	if (t) {
		t->s = s;
		t->sink = *sink;
		t->list_every_ms = LIST_MS;
	}
	return t;
}

void trace_stream_quiet(struct trace_stream *t)
{
	if (t)
		t->list_every_ms = QUIET_LIST_MS;
}

void trace_stream_free(struct trace_stream *t)
{
	if (!t)
		return;
	if (t->have_list)
		trace_buffers_free(&t->list);
	free(t->rings);
	u64map_free(&t->index);
	free(t->rec);
	free(t->ev);
	free(t);
}

static int room(struct trace_stream *t, uint64_t n)
{
	if (n <= t->space)
		return 0;
	struct xp_trace_rec *rec = reallocarray(t->rec, n, sizeof(*rec));
	if (rec)
		t->rec = rec;
	struct tf_event *ev = reallocarray(t->ev, n, sizeof(*ev));
	if (ev)
		t->ev = ev;
	if (!rec || !ev)
		return -1;
	t->space = n;
	return 0;
}

void trace_stream_cut(struct trace_stream *t, int (*cut)(void *ctx), void *ctx)
{
	t->cut = cut;
	t->cut_ctx = ctx;
}

static int cut_now(struct trace_stream *t)
{
	return t->cut && t->cut(t->cut_ctx);
}

/* The ring for a listed buffer; a new one is announced to the sink.
 * *refused: NULL because MAX_RINGS are drained already. */
static struct ring *ring_for(struct trace_stream *t, const struct trace_buf_ref *b,
			     const struct xp_trace_buf *h, int *refused)
{
	uint32_t at;
	*refused = 0;
	if (u64map_get(&t->index, b->addr, &at) == 0 && t->rings[at].tid == b->tid)
		return &t->rings[at];
	if (t->nrings >= MAX_RINGS) {
		*refused = 1;
		return NULL;
	}
	struct ring *grown = reallocarray(t->rings, t->nrings + 1, sizeof(*grown));
	if (grown)
		t->rings = grown;
	if (!grown || u64map_put(&t->index, b->addr, (uint32_t)t->nrings))
		return NULL;
	struct ring *r = &t->rings[t->nrings++];
	*r = (struct ring){ .addr = b->addr, .cap = b->cap, .tid = b->tid };
	char name[64];
	trace_thread_name(t->s->pid, b->tid, h, name, sizeof(name));
	return t->sink.thread(t->sink.ctx, b->tid, name) == 0 ? r : NULL;
}

/* A read or write failed: -1 (the buffer or the process went: ask
 * again), or 1 after a message when the process runs another image now
 * (it exec'd): the session is bound to the one it checked, and ends. */
static int image_gone(struct trace_stream *t)
{
	if (errno != ESRCH || !session_mem_execd(t->s))
		return -1;
	if (!t->execd++)
		fprintf(stderr, "xprobes: trace: process %d exec'd another program: the session ends "
			"there, and nothing more is read from it or written into it\n", (int)t->s->pid);
	return 1;
}

/* Copy one ring's new records to the sink and give their room back. */
static int drain(struct trace_stream *t, const struct trace_buf_ref *b, const struct tf_clock *c,
		 struct trace_stream_stats *st, int *busy)
{
	pid_t pid = t->s->pid;
	struct xp_trace_buf h;
	char why[TRACE_WHY_SIZE];
	uint64_t first, head;
	if (trace_vm_read(t->s, b->addr, &h, sizeof(h)) != 0 || h.tid != b->tid)
		return image_gone(t); /* or the thread's (drained, then freed): ask again */
	if (trace_buf_check(&h, b->cap, &first, &head, why, sizeof(why)) != 0) {
		fprintf(stderr, "xprobes: trace: the buffer at 0x%" PRIx64 " in process %d %s\n",
			b->addr, (int)pid, why);
		return 1;
	}
	int refused;
	struct ring *r = ring_for(t, b, &h, &refused);
	if (!r && refused) {
		t->refused++;
		return 0;
	}
	if (!r) {
		fprintf(stderr, "xprobes: trace: out of memory, or the recording failed\n");
		return 1;
	}
	uint64_t lost = atomic_load_explicit(&h.lost, memory_order_relaxed);
	if (lost < r->lost) /* a clear started it over */
		r->marked = 0;
	st->lost += lost >= r->lost ? lost - r->lost : lost;
	r->lost = lost;
	uint64_t n = head - first;
	*busy |= n >= b->cap / BUSY_FRACTION;
	if (n && room(t, n < CHUNK ? n : CHUNK) != 0) {
		fprintf(stderr, "xprobes: trace: out of memory\n");
		return 1;
	}
	/* A chunk at a time: the copy space stays small and resident, and
	 * each chunk's room goes back to the thread as soon as it is out.
	 * What a cut leaves is counted (the next pass, if any, takes it). */
	r->left = 0;
	while (first < head) {
		if (cut_now(t)) {
			r->left = head - first;
			break;
		}
		uint64_t m = head - first < CHUNK ? head - first : CHUNK;
		if (trace_read_ring(t->s, b->addr, b->cap, first, first + m, t->rec) != 0)
			return image_gone(t);
		tf_decode(t->rec, m, c, t->ev);
		for (uint64_t i = 0; i < m; i++)
			if (t->ev[i].kind == XP_TRACE_LOST && !(t->ev[i].addr & XP_TRACE_LABEL))
				r->marked += t->ev[i].addr; /* not a request's label */
		r->last_ns = ta_last_ns(t->ev, m, r->last_ns);
		if (t->sink.events(t->sink.ctx, b->tid, t->ev, m) != 0)
			return 1;
		st->records += m;
		first += m;
		/* Only now may the thread write over them.  A flight
		 * recorder's tail means nothing to its writer: left alone. */
		if (!(h.flags & XP_TRACE_BUF_OVERWRITE) &&
		    trace_vm_write(t->s, b->addr + offsetof(struct xp_trace_buf, tail), &first,
				   sizeof(first)) != 0)
			return image_gone(t);
	}
	return 0;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int trace_stream_finish(struct trace_stream *t)
{
	/* Records dropped after a thread's last LOST record (it wrote no
	 * more once the trace stopped, so none came to say so): a LOST
	 * record at its last record's time, so the recording shows them. */
	for (size_t i = 0; i < t->nrings; i++) {
		struct ring *r = &t->rings[i];
		uint64_t n = (r->lost > r->marked ? r->lost - r->marked : 0) + r->left;
		if (!n) /* (and what a cut left in it, lost to the recording) */
			continue;
		struct tf_event ev = { r->last_ns, n, XP_TRACE_LOST };
		if (t->sink.events(t->sink.ctx, r->tid, &ev, 1) != 0)
			return 1;
		r->marked = r->lost;
		r->left = 0;
	}
	return 0;
}

/* Ask the agent for its buffers again: 0, 1 after a message, -1 gone. */
static int ask_list(struct trace_stream *t)
{
	char *text = NULL, why[TRACE_WHY_SIZE];
	int rc = session_call(t->s, "trace buffers", &text);
	if (rc != 0) {
		free(text);
		return rc < 0 ? -1 : 1;
	}
	if (t->have_list)
		trace_buffers_free(&t->list);
	t->have_list = 0;
	const char *gen = strstr(text, "\nobjects gen="), *unb = strstr(text, "\nunbuffered lost=");
	const char *on = strstr(text, "\ntracing on=");
	t->stopped = on && on[12] == '0'; /* an older agent's says nothing */
	if (gen)
		t->objects_gen = strtoull(gen + 13, NULL, 10);
	if (unb)
		t->unbuffered = strtoull(unb + 17, NULL, 10);
	rc = trace_parse_buffers(text, &t->list, why, sizeof(why));
	free(text);
	if (rc) {
		fprintf(stderr, "xprobes: trace buffers: process %d %s\n", (int)t->s->pid, why);
		return 1;
	}
	t->have_list = 1;
	t->list_ms = now_ms();
	return 0;
}

/* Passes use the list they had (asking costs the target's agent thread a
 * wake-up and a reply each time: asked at every idle pass, every 5 ms,
 * that was 2.5% of memcached's CPU under `mclat --slow`, whose rings stay
 * empty); it is asked again every LIST_MS, and when a buffer it names
 * cannot be read (replaced by a clear, or its process gone).  A thread
 * that starts recording waits that long at most: its ring holds more.
 * A recording of kept requests only (trace_stream_quiet) asks every
 * QUIET_LIST_MS: its rings fill at the pace of the rare requests kept,
 * and at 20 ms the agent thread's replies were still ~1% of memcached's
 * CPU under `mclat --slow` with nothing slow. */

int trace_stream_pass(struct trace_stream *t, struct trace_stream_stats *st, int *busy)
{
	int rc = 0;
	*busy = 0;
	if (!t->have_list || now_ms() - t->list_ms >= t->list_every_ms)
		rc = ask_list(t);
	for (int again = 1; rc == 0; again = 0) {
		t->refused = 0;
		for (size_t i = 0; i < t->list.n && !rc && !cut_now(t); i++)
			rc = drain(t, &t->list.bufs[i], &t->list.clock, st, busy);
		if (rc >= 0 || !again)
			break;
		/* A buffer went: is it the process? */
		if ((rc = ask_list(t)) == 0)
			continue;
	}
	st->threads = (unsigned)t->nrings;
	st->objects_gen = t->objects_gen;
	st->unbuffered = t->unbuffered;
	st->stopped = t->stopped;
	st->refused = t->refused;
	st->left = 0;
	for (size_t i = 0; i < t->nrings; i++)
		st->left += t->rings[i].left;
	return rc;
}

const struct tf_clock *trace_stream_clock(const struct trace_stream *t)
{
	return t && t->have_list ? &t->list.clock : NULL;
}
