/* SPDX-License-Identifier: MIT */
/* Copying a trace out of the target.  The agent only publishes where the
 * buffers are; the tool copies them itself, so reading a large trace
 * costs the target nothing but the directory.  Buffers are read while
 * their threads may still write: the header first, then rec[0..head),
 * which the writer never changes again (head is stored with release after
 * each record, and a full buffer drops rather than wraps). */
#define _GNU_SOURCE
#include "xprobes.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Send one agent command; its reply, or NULL after printing why not. */
static char *ask(struct session *s, const char *cmd)
{
	char *text = NULL;
	int rc = session_call(s, cmd, &text);
	if (rc == 1)
		fprintf(stderr, "xprobes: %s: %s", cmd, text && *text ? sanitize_text(text) : "failed\n");
	if (rc != 0) {
		free(text);
		return NULL;
	}
	return text;
}

int trace_objects(struct session *s, struct trace_object **objs, size_t *n)
{
	char *text = ask(s, "trace objects"), why[TRACE_WHY_SIZE];
	*objs = NULL;
	*n = 0;
	if (!text)
		return -1;
	int rc = trace_parse_objects(text, objs, n, why, sizeof(why));
	if (rc)
		fprintf(stderr, "xprobes: trace objects: process %d %s\n", (int)s->pid, why);
	free(text);
	return rc;
}

/* One thread's buffer, copied and decoded into th: the header first, then
 * as many records as it says are written, once trace_buf_check has held
 * that number to what the buffer can hold. */
/* Records [first, end) of the ring at addr (cap records) into rec: at
 * most two copies, the second from the ring's start. */
int trace_read_ring(const struct session *s, uint64_t addr, uint64_t cap, uint64_t first, uint64_t end,
		    struct xp_trace_rec *rec)
{
	uint64_t n = end - first, at = first % cap, one = n < cap - at ? n : cap - at;
	uint64_t base = addr + offsetof(struct xp_trace_buf, rec);
	if (trace_vm_read(s, base + at * sizeof(*rec), rec, one * sizeof(*rec)) != 0)
		return -1;
	return n == one ? 0 : trace_vm_read(s, base, rec + one, (n - one) * sizeof(*rec));
}

void trace_thread_name(pid_t pid, int tid, const struct xp_trace_buf *h, char *name, size_t size)
{
	char path[64];
	name[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, tid);
	FILE *f = fopen(path, "re");
	if (f) {
		if (fgets(name, (int)size, f))
			name[strcspn(name, "\n")] = '\0';
		fclose(f);
	}
	if (!name[0] && h->version >= 2) { /* ended: the name it had */
		size_t n = size < sizeof(h->comm) ? size : sizeof(h->comm);
		memcpy(name, h->comm, n);
		name[n - 1] = '\0';
	}
	sanitize_text(name); /* the target chose it */
}

static int read_buffer(const struct session *s, const struct trace_buf_ref *r, const struct tf_clock *c,
		       struct tf_thread *th)
{
	struct xp_trace_buf h;
	char why[TRACE_WHY_SIZE];
	uint64_t first, head;
	if (trace_vm_read(s, r->addr, &h, sizeof(h)) != 0) {
		fprintf(stderr, "xprobes: trace: cannot read the buffer at 0x%" PRIx64
				" in process %d: %s\n", r->addr, (int)s->pid, strerror(errno));
		return -1;
	}
	if (trace_buf_check(&h, r->cap, &first, &head, why, sizeof(why)) != 0) {
		fprintf(stderr, "xprobes: trace: the buffer at 0x%" PRIx64 " in process %d %s\n",
			r->addr, (int)s->pid, why);
		return -1;
	}
	uint64_t n = head - first;
	struct xp_trace_rec *rec = reallocarray(NULL, n ? n : 1, sizeof(*rec));
	int rc = rec ? trace_read_ring(s, r->addr, h.cap, first, head, rec) : -1;
	/* The thread goes on writing while we copy: a flight recorder over
	 * its oldest records at once, a drained ring (a recording runs) once
	 * the drainer has given their room back.  Either way a record j is
	 * written over only after head passes j + cap, so what the head
	 * moved over meanwhile may be torn, and is left out. */
	uint64_t now = head;
	if (rc == 0 &&
	    trace_vm_read(s, r->addr + offsetof(struct xp_trace_buf, head), &now, sizeof(now)) == 0 &&
	    now >= head && now >= h.cap && now - h.cap + 1 > first) {
		uint64_t skip = now - h.cap + 1 - first;
		skip = skip > n ? n : skip;
		memmove(rec, rec + skip, (n - skip) * sizeof(*rec));
		n -= skip;
	}
	if (rc == 0 && trace_buf_decode(&h, rec, n, c, th) != 0) {
		errno = ENOMEM;
		rc = -1;
	}
	/* Named as a recording names it (trace cat -d), beside the tid. */
	char name[64];
	trace_thread_name(s->pid, (int)h.tid, &h, name, sizeof(name));
	if (rc == 0 && name[0] && !(th->name = strdup(name))) {
		errno = ENOMEM;
		rc = -1;
	}
	if (rc)
		fprintf(stderr, "xprobes: trace: cannot read %" PRIu64 " records of thread %d: %s\n",
			n, (int)h.tid, rec ? strerror(errno) : "out of memory");
	free(rec);
	return rc;
}

/* A kept request (trace start --requests) as one call: trace_labels.c. */
int trace_labels_apply(struct tf_thread *th, struct trace_names *names)
{
	struct tf_event *ev = (struct tf_event *)th->ev;
	struct trace_label l = { 0 };
	uint64_t open = 0; /* the request call entered, its address */
	size_t out = 0;
	for (size_t i = 0; i < th->n; i++) {
		struct tf_event e = ev[i];
		if (e.kind != XP_TRACE_LOST || !(e.addr & XP_TRACE_LABEL)) {
			ev[out++] = e;
			continue;
		}
		switch (e.addr & (UINT64_C(0x7f) << 56)) {
		case XP_TRACE_LABEL_BEGIN:
			trace_label_start(&l, e.addr, e.ns);
			break;
		case XP_TRACE_LABEL_TEXT:
			if (trace_label_text(&l, e.addr)) {
				uint64_t a = trace_names_add_label(names, l.text);
				if (!a)
					return -1;
				ev[out++] = (struct tf_event){ .kind = XP_TRACE_ENTRY, .ns = l.ns, .addr = a };
				open = a;
			}
			break;
		case XP_TRACE_LABEL_END: /* its calls are closed already */
			if (open)
				ev[out++] = (struct tf_event){ .kind = XP_TRACE_EXIT, .ns = e.ns, .addr = open };
			open = 0;
			l.open = 0;
			break;
		default: /* argument records (trace args) and the like: the views' */
			ev[out++] = e;
			break;
		}
	}
	th->n = out;
	return 0;
}

/* Threads in the order they first recorded, empty ones last. */
static int cmp_first(const void *a, const void *b)
{
	const struct tf_thread *x = a, *y = b;
	if (!x->n || !y->n)
		return !x->n - !y->n;
	return x->ev[0].ns < y->ev[0].ns ? -1 : x->ev[0].ns > y->ev[0].ns;
}

/* The buffers of every thread (or of tid alone), copied and decoded. */
static int read_buffers(struct session *s, int tid, struct trace_data *d)
{
	char *text = ask(s, "trace buffers"), why[TRACE_WHY_SIZE];
	struct trace_buffers b;
	if (!text)
		return -1;
	int rc = trace_parse_buffers(text, &b, why, sizeof(why));
	free(text);
	if (rc) {
		fprintf(stderr, "xprobes: trace buffers: process %d %s\n", (int)s->pid, why);
		return -1;
	}
	d->clock = b.clock;
	d->threads = reallocarray(NULL, b.n ? b.n : 1, sizeof(*d->threads));
	if (!d->threads) {
		fprintf(stderr, "xprobes: trace: out of memory\n");
		rc = -1;
	}
	for (size_t i = 0; i < b.n && !rc; i++)
		if (!tid || b.bufs[i].tid == tid)
			rc = read_buffer(s, &b.bufs[i], &d->clock, &d->threads[d->nthreads++]);
	if (rc && d->threads)
		d->nthreads--; /* the one that failed holds nothing */
	trace_buffers_free(&b);
	return rc;
}

int trace_read(struct session *s, int tid, struct trace_data *d)
{
	*d = (struct trace_data){ 0 };
	if (read_buffers(s, tid, d) != 0)
		return -1;
	if (d->nthreads)
		qsort(d->threads, d->nthreads, sizeof(*d->threads), cmp_first);

	/* Names: every instrumented object by its own base. */
	struct trace_object *objs;
	size_t nobjs;
	if (!(d->names = trace_names_new(s)) || trace_objects(s, &objs, &nobjs) != 0)
		return -1;
	for (size_t i = 0; i < nobjs; i++)
		trace_names_add_object(d->names, objs[i].base, objs[i].path);
	trace_objects_free(objs, nobjs);
	for (size_t i = 0; i < d->nthreads; i++)
		if (trace_labels_apply(&d->threads[i], d->names) != 0) {
			fprintf(stderr, "xprobes: trace: out of memory\n");
			return -1;
		}
	return 0;
}

void trace_data_free(struct trace_data *d)
{
	for (size_t i = 0; i < d->nthreads; i++) {
		free((void *)d->threads[i].ev);
		free((void *)d->threads[i].name);
	}
	free(d->threads);
	trace_names_free(d->names);
	*d = (struct trace_data){ 0 };
}
