/* Copying a trace out of the target.  The agent only publishes where the
 * buffers are; the tool copies them itself, so reading a large trace
 * costs the target nothing but the directory.  Buffers are read while
 * their threads may still write: the header first, then rec[0..head),
 * which the writer never changes again (head is stored with release after
 * each record, and a full buffer drops rather than wraps). */
#define _GNU_SOURCE
#include "trace_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "sanitize.h"

int trace_vm_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		struct iovec local = { p, len }, remote = { (void *)(uintptr_t)addr, len };
		ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
		if (n <= 0) {
			if (n == 0)
				errno = EFAULT;
			return -1;
		}
		p += n;
		addr += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int trace_vm_read_str(pid_t pid, uint64_t addr, char *buf, size_t size)
{
	/* Byte by byte would be slow; a page at a time could cross into an
	 * unmapped one, so shrink to the page's end first. */
	size_t got = 0;
	while (got + 1 < size) {
		size_t chunk = 4096 - (size_t)((addr + got) & 4095);
		if (chunk > size - 1 - got)
			chunk = size - 1 - got;
		if (trace_vm_read(pid, addr + got, buf + got, chunk) != 0)
			return -1;
		void *nul = memchr(buf + got, '\0', chunk);
		if (nul)
			return 0;
		got += chunk;
	}
	buf[got] = '\0';
	return 0;
}

int trace_field(const char *line, const char *key, uint64_t *v)
{
	size_t klen = strlen(key);
	for (const char *p = line; (p = strstr(p, key)); p += klen) {
		if ((p != line && p[-1] != ' ') || p[klen] != '=')
			continue;
		char *end;
		errno = 0;
		*v = strtoull(p + klen + 1, &end, 0);
		return errno || end == p + klen + 1 ? -1 : 0;
	}
	return -1;
}

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
	char *text = ask(s, "trace objects");
	*objs = NULL;
	*n = 0;
	if (!text)
		return -1;
	for (char *save, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct trace_object o = { 0 };
		uint64_t nsites;
		char *path = strstr(line, " path=");
		if (strncmp(line, "object ", 7) || !path || trace_field(line, "base", &o.base) ||
		    trace_field(line, "table", &o.table) || trace_field(line, "sites", &nsites))
			continue;
		o.nsites = (size_t)nsites;
		struct trace_object *grown = realloc(*objs, (*n + 1) * sizeof(*grown));
		if (!grown || !(o.path = strdup(path + 6))) {
			free(grown ? NULL : text);
			fprintf(stderr, "xprobes: out of memory\n");
			*objs = grown ? grown : *objs;
			free(text);
			return -1;
		}
		*objs = grown;
		(*objs)[(*n)++] = o;
	}
	free(text);
	return 0;
}

void trace_objects_free(struct trace_object *objs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(objs[i].path);
	free(objs);
}

/* One thread's buffer, decoded into th. */
static int read_buffer(pid_t pid, uint64_t addr, uint64_t cap, const struct tf_clock *c,
		       struct tf_thread *th)
{
	struct xp_trace_buf h;
	if (trace_vm_read(pid, addr, &h, sizeof(h)) != 0) {
		fprintf(stderr, "xprobes: trace: cannot read the buffer at 0x%llx in process %d: %s\n",
			(unsigned long long)addr, (int)pid, strerror(errno));
		return -1;
	}
	uint64_t head = atomic_load_explicit(&h.head, memory_order_relaxed);
	if (h.magic != XP_TRACE_BUF_MAGIC || h.version != 1 || h.cap != cap || head > cap) {
		fprintf(stderr, "xprobes: trace: the buffer at 0x%llx is not a version 1 trace "
				"buffer of %llu records\n", (unsigned long long)addr,
			(unsigned long long)cap);
		return -1;
	}
	struct xp_trace_rec *rec = malloc((head ? head : 1) * sizeof(*rec));
	struct tf_event *ev = malloc((head ? head : 1) * sizeof(*ev));
	if (!rec || !ev ||
	    trace_vm_read(pid, addr + offsetof(struct xp_trace_buf, rec), rec, head * sizeof(*rec))) {
		fprintf(stderr, "xprobes: trace: cannot read %llu records of thread %d: %s\n",
			(unsigned long long)head, (int)h.tid, rec && ev ? strerror(errno) : "no memory");
		free(rec);
		free(ev);
		return -1;
	}
	tf_decode(rec, head, c, ev);
	free(rec);
	*th = (struct tf_thread){ .tid = h.tid, .ev = ev, .n = head,
				  .lost = atomic_load_explicit(&h.lost, memory_order_relaxed) };
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

int trace_read(struct session *s, int tid, struct trace_data *d)
{
	*d = (struct trace_data){ 0 };
	char *text = ask(s, "trace buffers");
	if (!text)
		return -1;
	int rc = 0, have_clock = 0;
	for (char *save, *line = strtok_r(text, "\n", &save); line && !rc;
	     line = strtok_r(NULL, "\n", &save)) {
		uint64_t t, addr, cap;
		if (!strncmp(line, "clock ", 6)) {
			struct tf_clock *c = &d->clock;
			have_clock = !trace_field(line, "start_tsc", &c->start_tsc) &&
				     !trace_field(line, "start_ns", &c->start_ns) &&
				     !trace_field(line, "now_tsc", &c->now_tsc) &&
				     !trace_field(line, "now_ns", &c->now_ns);
			continue;
		}
		if (strncmp(line, "buf ", 4) || trace_field(line, "tid", &t) ||
		    trace_field(line, "addr", &addr) || trace_field(line, "cap", &cap))
			continue;
		if (tid && (int)t != tid)
			continue;
		if (!have_clock) {
			fprintf(stderr, "xprobes: trace buffers: no clock line before the buffers\n");
			rc = -1;
			break;
		}
		struct tf_thread *grown = realloc(d->threads, (d->nthreads + 1) * sizeof(*grown));
		if (!grown) {
			rc = -1;
			break;
		}
		d->threads = grown;
		if (read_buffer(s->pid, addr, cap, &d->clock, &d->threads[d->nthreads]) == 0)
			d->nthreads++;
		else
			rc = -1;
	}
	free(text);
	if (rc)
		return -1;
	if (d->nthreads)
		qsort(d->threads, d->nthreads, sizeof(*d->threads), cmp_first);

	/* Names: every instrumented object by its own base. */
	struct trace_object *objs;
	size_t nobjs;
	if (!(d->names = trace_names_new(s->pid)) || trace_objects(s, &objs, &nobjs) != 0)
		return -1;
	for (size_t i = 0; i < nobjs; i++)
		trace_names_add_object(d->names, objs[i].base, objs[i].path);
	trace_objects_free(objs, nobjs);
	return 0;
}

void trace_data_free(struct trace_data *d)
{
	for (size_t i = 0; i < d->nthreads; i++)
		free((void *)d->threads[i].ev);
	free(d->threads);
	trace_names_free(d->names);
	*d = (struct trace_data){ 0 };
}
