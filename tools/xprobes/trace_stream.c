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
/* Records copied, decoded and written at a time: 512 KiB of them. */
#define CHUNK 32768

struct ring {
	uint64_t addr, cap;
	int tid;
	uint64_t lost;     /* the header's count when last read */
	uint64_t marked;   /* of those, said by LOST records drained */
	uint64_t last_ns;  /* the newest record's time */
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
	int have_list, was_busy;
	uint64_t objects_gen;      /* the agent's count of loads and unloads */
	uint64_t unbuffered;       /* records of threads the budget left no ring */
	int stopped;               /* the agent said tracing is off */
	long long list_ms;         /* when it was asked */
};

struct trace_stream *trace_stream_new(struct session *s, const struct trace_sink *sink)
{
	struct trace_stream *t = calloc(1, sizeof(*t));
	if (t) {
		t->s = s;
		t->sink = *sink;
	}
	return t;
}

void trace_stream_free(struct trace_stream *t)
{
	if (!t)
		return;
	if (t->have_list)
		trace_buffers_free(&t->list);
	free(t->rings);
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

/* The ring for a listed buffer; a new one is announced to the sink. */
static struct ring *ring_for(struct trace_stream *t, const struct trace_buf_ref *b,
			     const struct xp_trace_buf *h)
{
	for (size_t i = 0; i < t->nrings; i++)
		if (t->rings[i].addr == b->addr && t->rings[i].tid == b->tid)
			return &t->rings[i];
	struct ring *grown = reallocarray(t->rings, t->nrings + 1, sizeof(*grown));
	if (!grown)
		return NULL;
	t->rings = grown;
	struct ring *r = &t->rings[t->nrings++];
	*r = (struct ring){ .addr = b->addr, .cap = b->cap, .tid = b->tid };
	char path[64], name[64] = "";
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)t->s->pid, b->tid);
	FILE *f = fopen(path, "re");
	if (f) {
		if (fgets(name, sizeof(name), f))
			name[strcspn(name, "\n")] = '\0';
		fclose(f);
	}
	if (!name[0] && h->version >= 2) { /* ended: the name it had */
		memcpy(name, h->comm, sizeof(h->comm));
		name[sizeof(h->comm) - 1] = '\0';
	}
	sanitize_text(name); /* the target chose it */
	return t->sink.thread(t->sink.ctx, b->tid, name) == 0 ? r : NULL;
}

/* Copy one ring's new records to the sink and give their room back. */
static int drain(struct trace_stream *t, const struct trace_buf_ref *b, const struct tf_clock *c,
		 struct trace_stream_stats *st, int *busy)
{
	pid_t pid = t->s->pid;
	struct xp_trace_buf h;
	char why[TRACE_WHY_SIZE];
	uint64_t first, head;
	if (trace_vm_read(pid, b->addr, &h, sizeof(h)) != 0 || h.tid != b->tid)
		return -1; /* gone meanwhile (an ended thread's, drained, is freed): ask again */
	if (trace_buf_check(&h, b->cap, &first, &head, why, sizeof(why)) != 0) {
		fprintf(stderr, "xprobes: trace: the buffer at 0x%" PRIx64 " in process %d %s\n",
			b->addr, (int)pid, why);
		return 1;
	}
	struct ring *r = ring_for(t, b, &h);
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
	 * each chunk's room goes back to the thread as soon as it is out. */
	while (first < head) {
		uint64_t m = head - first < CHUNK ? head - first : CHUNK;
		if (trace_read_ring(pid, b->addr, b->cap, first, first + m, t->rec) != 0)
			return -1;
		tf_decode(t->rec, m, c, t->ev);
		for (uint64_t i = 0; i < m; i++)
			if (t->ev[i].kind == XP_TRACE_LOST)
				r->marked += t->ev[i].addr;
		r->last_ns = t->ev[m - 1].ns;
		if (t->sink.events(t->sink.ctx, b->tid, t->ev, m) != 0)
			return 1;
		st->records += m;
		first += m;
		/* Only now may the thread write over them.  A flight
		 * recorder's tail means nothing to its writer: left alone. */
		if (!(h.flags & XP_TRACE_BUF_OVERWRITE) &&
		    trace_vm_write(pid, b->addr + offsetof(struct xp_trace_buf, tail), &first,
				   sizeof(first)) != 0)
			return -1;
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
		if (r->lost <= r->marked)
			continue;
		struct tf_event ev = { r->last_ns, r->lost - r->marked, XP_TRACE_LOST };
		if (t->sink.events(t->sink.ctx, r->tid, &ev, 1) != 0)
			return 1;
		r->marked = r->lost;
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

/* While the rings fill fast, passes follow each other with the list they
 * had (asking costs the agent's thread a wake-up and a reply each time);
 * it is asked again after an idle pass, every LIST_MS, and when a buffer
 * it names cannot be read (replaced by a clear, or its process gone). */
#define LIST_MS 20

int trace_stream_pass(struct trace_stream *t, struct trace_stream_stats *st, int *busy)
{
	int rc = 0;
	*busy = 0;
	if (!t->have_list || !t->was_busy || now_ms() - t->list_ms >= LIST_MS)
		rc = ask_list(t);
	for (int again = 1; rc == 0; again = 0) {
		for (size_t i = 0; i < t->list.n && !rc; i++)
			rc = drain(t, &t->list.bufs[i], &t->list.clock, st, busy);
		if (rc >= 0 || !again)
			break;
		/* A buffer went: is it the process? */
		if ((rc = ask_list(t)) == 0)
			continue;
	}
	t->was_busy = *busy;
	st->threads = (unsigned)t->nrings;
	st->objects_gen = t->objects_gen;
	st->unbuffered = t->unbuffered;
	st->stopped = t->stopped;
	return rc;
}

const struct tf_clock *trace_stream_clock(const struct trace_stream *t)
{
	return t && t->have_list ? &t->list.clock : NULL;
}
