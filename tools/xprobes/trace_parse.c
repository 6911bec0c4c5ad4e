/* SPDX-License-Identifier: MIT */
/* Checking what a target says about its trace before the tool sizes a
 * copy by it.  A hostile target (anyone's process that serves the control
 * protocol itself) once had root's `trace cat` write past a malloc(0):
 * cap = head = 2^62 made head * 16 wrap.  So each number is bounded by
 * what a real agent writes (lib/trace/trace.h's XP_TRACE_MAX_RECS), products are
 * taken by reallocarray, and a line that claims to be a buffer, a clock or
 * an object but does not parse is an error, never skipped: skipping would
 * quietly show less than was recorded. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int trace_field(const char *line, const char *key, uint64_t *v)
{
	size_t klen = strlen(key);
	for (const char *p = line; (p = strstr(p, key)); p += klen) {
		if ((p != line && p[-1] != ' ') || p[klen] != '=')
			continue;
		const char *num = p + klen + 1;
		if (!isdigit((unsigned char)*num))
			return -1;
		char *end;
		errno = 0;
		*v = strtoull(num, &end, 0);
		return errno || (*end && *end != ' ') ? -1 : 0;
	}
	return -1;
}

static int failed(char *why, size_t whysz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int failed(char *why, size_t whysz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
	return -1;
}

/* The line as the user may see it: its start, without what a terminal
 * would obey. */
static int bad_line(char *why, size_t whysz, const char *line)
{
	char shown[96];
	snprintf(shown, sizeof(shown), "%s", line);
	return failed(why, whysz, "sent a bad line: '%s'", sanitize_text(shown));
}

/* Each line of text, in a copy (text is the reply, which stays whole). */
typedef int (*line_fn)(char *line, void *arg, char *why, size_t whysz);

static int each_line(const char *text, line_fn fn, void *arg, char *why, size_t whysz)
{
	char *copy = strdup(text);
	if (!copy)
		return failed(why, whysz, "could not be read: out of memory");
	int rc = 0;
	for (char *save, *line = strtok_r(copy, "\n", &save); line && !rc;
	     line = strtok_r(NULL, "\n", &save))
		rc = fn(line, arg, why, whysz);
	free(copy);
	return rc;
}

/* ---- trace buffers ------------------------------------------------------ */

struct buffers_state {
	struct trace_buffers *b;
	int have_clock;
};

static int clock_line(char *line, struct buffers_state *st, char *why, size_t whysz)
{
	struct tf_clock *c = &st->b->clock;
	if (st->have_clock || trace_field(line, "start_tsc", &c->start_tsc) ||
	    trace_field(line, "start_ns", &c->start_ns) || trace_field(line, "now_tsc", &c->now_tsc) ||
	    trace_field(line, "now_ns", &c->now_ns))
		return bad_line(why, whysz, line);
	st->have_clock = 1;
	return 0;
}

static int buf_line(char *line, struct buffers_state *st, char *why, size_t whysz)
{
	uint64_t tid;
	struct trace_buf_ref r;
	if (trace_field(line, "tid", &tid) || trace_field(line, "addr", &r.addr) ||
	    trace_field(line, "cap", &r.cap) || tid == 0 || tid > INT32_MAX)
		return bad_line(why, whysz, line);
	if (r.cap > XP_TRACE_MAX_RECS)
		return failed(why, whysz, "lists a buffer of %" PRIu64 " records, more than the %"
			      PRIu64 " an agent makes", r.cap, (uint64_t)XP_TRACE_MAX_RECS);
	if (!st->have_clock)
		return failed(why, whysz, "sent no clock line before the buffers");
	struct trace_buf_ref *grown = reallocarray(st->b->bufs, st->b->n + 1, sizeof(*grown));
	if (!grown)
		return failed(why, whysz, "could not be read: out of memory");
	r.tid = (int)tid;
	st->b->bufs = grown;
	st->b->bufs[st->b->n++] = r;
	return 0;
}

static int buffers_line(char *line, void *arg, char *why, size_t whysz)
{
	if (!strncmp(line, "clock ", 6))
		return clock_line(line, arg, why, whysz);
	if (!strncmp(line, "buf ", 4))
		return buf_line(line, arg, why, whysz);
	return 0;
}

/* Where a buffer ends: header and every record it may hold. */
static uint64_t buf_bytes(const struct trace_buf_ref *r)
{
	return sizeof(struct xp_trace_buf) + r->cap * sizeof(struct xp_trace_rec);
}

static int cmp_addr(const void *a, const void *b)
{
	const struct trace_buf_ref *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Each thread has a buffer of its own: one listed many times would have
 * the tool copy the same memory as often as the target likes. */
static int apart(const struct trace_buffers *b, char *why, size_t whysz)
{
	if (!b->n)
		return 0;
	struct trace_buf_ref *v = reallocarray(NULL, b->n, sizeof(*v));
	if (!v)
		return failed(why, whysz, "could not be read: out of memory");
	memcpy(v, b->bufs, b->n * sizeof(*v));
	qsort(v, b->n, sizeof(*v), cmp_addr);
	int rc = 0;
	for (size_t i = 0; i < b->n && !rc; i++) {
		if (v[i].addr > UINT64_MAX - buf_bytes(&v[i]))
			rc = failed(why, whysz, "lists a buffer at 0x%" PRIx64
				    " that runs past the end of memory", v[i].addr);
		else if (i + 1 < b->n && v[i].addr + buf_bytes(&v[i]) > v[i + 1].addr)
			rc = failed(why, whysz, "lists buffers that overlap (at 0x%" PRIx64
				    " and 0x%" PRIx64 ")", v[i].addr, v[i + 1].addr);
	}
	free(v);
	return rc;
}

int trace_parse_buffers(const char *text, struct trace_buffers *b, char *why, size_t whysz)
{
	*b = (struct trace_buffers){ 0 };
	struct buffers_state st = { b, 0 };
	if (each_line(text, buffers_line, &st, why, whysz) || apart(b, why, whysz)) {
		trace_buffers_free(b);
		return -1;
	}
	return 0;
}

void trace_buffers_free(struct trace_buffers *b)
{
	free(b->bufs);
	*b = (struct trace_buffers){ 0 };
}

/* ---- trace objects ------------------------------------------------------ */

struct objects_state {
	struct trace_object **objs;
	size_t *n;
};

static int object_line(char *line, void *arg, char *why, size_t whysz)
{
	struct objects_state *st = arg;
	struct trace_object o;
	uint64_t nsites;
	if (strncmp(line, "object ", 7))
		return 0;
	char *path = strstr(line, " path=");
	if (!path || !path[6] || trace_field(line, "base", &o.base) ||
	    trace_field(line, "table", &o.table) || trace_field(line, "sites", &nsites))
		return bad_line(why, whysz, line);
	if (nsites > TRACE_MAX_SITES)
		return failed(why, whysz, "lists an object of %" PRIu64 " functions, more than "
			      "the %u this tool takes", nsites, TRACE_MAX_SITES);
	o.nsites = (size_t)nsites;
	struct trace_object *grown = reallocarray(*st->objs, *st->n + 1, sizeof(*grown));
	if (grown)
		*st->objs = grown;
	if (!grown || !(o.path = strdup(path + 6)))
		return failed(why, whysz, "could not be read: out of memory");
	(*st->objs)[(*st->n)++] = o;
	return 0;
}

int trace_parse_objects(const char *text, struct trace_object **objs, size_t *n, char *why,
			size_t whysz)
{
	*objs = NULL;
	*n = 0;
	struct objects_state st = { objs, n };
	if (each_line(text, object_line, &st, why, whysz)) {
		trace_objects_free(*objs, *n);
		*objs = NULL;
		*n = 0;
		return -1;
	}
	return 0;
}

void trace_objects_free(struct trace_object *objs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(objs[i].path);
	free(objs);
}

/* ---- a buffer ------------------------------------------------------------- */

int trace_buf_check(const struct xp_trace_buf *h, uint64_t cap, uint64_t *first,
		    uint64_t *head, char *why, size_t whysz)
{
	*head = atomic_load_explicit(&h->head, memory_order_relaxed);
	uint64_t tail = h->version == 1 ? 0 : atomic_load_explicit(&h->tail, memory_order_relaxed);
	if (h->magic != XP_TRACE_BUF_MAGIC || (h->version != 1 && h->version != XP_TRACE_BUF_VERSION))
		return failed(why, whysz, "is not a version 1 or %u trace buffer",
			      XP_TRACE_BUF_VERSION);
	if (h->cap != cap)
		return failed(why, whysz, "holds %" PRIu64 " records, not the %" PRIu64 " listed",
			      h->cap, cap);
	if (cap == 0 || cap > XP_TRACE_MAX_RECS)
		return failed(why, whysz, "holds %" PRIu64 " records, not 1 to the %" PRIu64
			      " an agent makes", cap, (uint64_t)XP_TRACE_MAX_RECS);
	if (tail > *head)
		return failed(why, whysz, "says %" PRIu64 " records were read, more than the %"
			      PRIu64 " written", tail, *head);
	if (h->version != 1 && (h->flags & XP_TRACE_BUF_OVERWRITE)) {
		/* A flight recorder: its newest cap records. */
		*first = *head - tail > cap ? *head - cap : tail;
		return 0;
	}
	if (*head - tail > cap)
		return failed(why, whysz, "says %" PRIu64 " records are waiting, more than the %"
			      PRIu64 " it holds", *head - tail, cap);
	*first = tail;
	return 0;
}

int trace_buf_decode(const struct xp_trace_buf *h, const struct xp_trace_rec *rec,
		     uint64_t head, const struct tf_clock *c, struct tf_thread *th)
{
	struct tf_event *ev = reallocarray(NULL, head ? head : 1, sizeof(*ev));
	if (!ev)
		return -1;
	tf_decode(rec, head, c, ev);
	/* A flight recorder's oldest records may be the end of a payload
	 * whose header went: no use, and their ns is no time. */
	uint64_t skip = 0;
	while (skip < head && ta_is_data(&ev[skip]))
		skip++;
	memmove(ev, ev + skip, (size_t)(head - skip) * sizeof(*ev));
	head -= skip;
	*th = (struct tf_thread){ .tid = h->tid, .ev = ev, .n = head,
				  .lost = atomic_load_explicit(&h->lost, memory_order_relaxed) };
	return 0;
}
