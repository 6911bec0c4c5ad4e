/* SPDX-License-Identifier: MIT */
/* Kernel events and module batches joined into stage times.
 *
 * A worker thread serves one connection at a time, so each thread's
 * kernel events (one per read batch, sent when its reply reaches the
 * device) and its module batches (process__command__start to _end) come
 * in time order, and they join per thread by walking both queues: the
 * module batch of a kernel event is on the same fd and lies between the
 * read's return and the reply's send.  Module batches before it belong
 * to no kernel event (a batch served from the read buffer without a new
 * read) and are passed over.  A kernel event waits until the module's
 * batches up to its reply time are known to have been read (horizon).
 *
 * The boundaries, in order: rx tcp ready epoll read done end xmit.  Each
 * is raised to the one before it (an epoll return older than the data's
 * arrival means the worker found the data without waiting: epoll 0; data
 * that was queued while the worker was already in read: its wait 0), so
 * the stages, their differences, always sum to total = xmit - rx.
 */
#include <stdlib.h>
#include <string.h>

#include "mclat.h"

/* A FIFO of fixed-size items. */
struct fifo {
	char *v;
	size_t size, head, n, cap;
};

static int fifo_push(struct fifo *f, const void *item)
{
	if (f->head && f->head == f->n) {
		f->head = f->n = 0;
	} else if (f->n == f->cap && f->head > f->cap / 2) {
		memmove(f->v, f->v + f->head * f->size, (f->n - f->head) * f->size);
		f->n -= f->head;
		f->head = 0;
	}
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 256;
		char *v = realloc(f->v, cap * f->size);
		if (!v)
			return -1;
		f->v = v;
		f->cap = cap;
	}
	memcpy(f->v + f->n++ * f->size, item, f->size);
	return 0;
}

static void *fifo_front(struct fifo *f)
{
	return f->head < f->n ? f->v + f->head * f->size : NULL;
}

static void fifo_pop(struct fifo *f)
{
	f->head++;
}

struct thread_queues {
	int tid;
	struct fifo kernel, module;
};

struct join {
	int with_kernel;
	struct thread_queues *t;
	size_t nt;
	void (*out)(const struct lat_batch *, void *);
	void *arg;
	struct interval *iv;
	const struct windows *w;
};

struct join *join_new(int with_kernel, void (*out)(const struct lat_batch *, void *), void *arg,
		      struct interval *iv, const struct windows *w)
{
	struct join *j = calloc(1, sizeof(*j));
	if (j) {
		j->with_kernel = with_kernel;
		j->out = out;
		j->arg = arg;
		j->iv = iv;
		j->w = w;
	}
	return j;
}

static struct thread_queues *queues(struct join *j, int tid)
{
	for (size_t i = 0; i < j->nt; i++)
		if (j->t[i].tid == tid)
			return &j->t[i];
	struct thread_queues *t = realloc(j->t, (j->nt + 1) * sizeof(*t));
	if (!t)
		return NULL;
	j->t = t;
	t = &j->t[j->nt++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->kernel.size = sizeof(struct mclat_event);
	t->module.size = sizeof(struct module_batch);
	return t;
}

/* 1 if e lies inside one sampling window, from its first boundary to its
 * reply's transmission.  The read's entry can precede the data (it was
 * waiting): the batch began at the earlier of the two.  Both ways of
 * joining ask it: a socket's pending boundaries can be left from before
 * a window (data that came while the links were still being destroyed
 * after the window's close, read between windows), and a batch made of
 * them would carry the gap between windows as its epoll stage. */
static int in_window(const struct join *j, const struct mclat_event *e)
{
	uint64_t from = e->read_ns && e->read_ns < e->rx_ns ? e->read_ns : e->rx_ns;
	return windows_hold(j->w, from, e->xmit_ns);
}

void join_kernel(const struct mclat_event *e, void *arg)
{
	struct join *j = arg;
	if (!(e->flags & MCLAT_HAVE_TX)) {
		j->iv->noreply++;
		return;
	}
	if ((e->flags & MCLAT_HAVE_RX) && !in_window(j, e)) {
		j->iv->cut++;
		return;
	}
	struct thread_queues *t = queues(j, (int)e->tid);
	if (!t || fifo_push(&t->kernel, e) != 0)
		j->iv->lost++;
}

void join_module(const struct module_batch *m, void *arg)
{
	struct join *j = arg;
	if (!j->with_kernel) {
		/* Without BPF the module's batch is all there is. */
		if (!windows_hold(j->w, m->start_ns, m->end_ns)) {
			j->iv->cut++;
			return;
		}
		struct lat_batch b = { .tid = m->tid, .fd = m->fd, .at_ns = m->start_ns };
		b.ns[ST_MEMCACHED] = m->end_ns - m->start_ns;
		b.measured[ST_MEMCACHED] = 1;
		j->out(&b, j->arg);
		return;
	}
	struct thread_queues *t = queues(j, m->tid);
	if (!t || fifo_push(&t->module, m) != 0)
		j->iv->lost++;
}

void join_kernel_alone(const struct mclat_event *e, void *arg)
{
	struct join *j = arg;
	if (!(e->flags & MCLAT_HAVE_TX)) {
		j->iv->noreply++;
		return;
	}
	if ((e->flags & MCLAT_HAVE_RX) && !in_window(j, e)) {
		j->iv->cut++; /* as join_kernel: judged before partial */
		return;
	}
	if ((e->flags & (MCLAT_HAVE_RX | MCLAT_HAVE_READY)) != (MCLAT_HAVE_RX | MCLAT_HAVE_READY)) {
		j->iv->partial++;
		return;
	}
	/* The boundaries up to the read's end, then the reply's xmit; the
	 * module's end, which splits memcached from tx, is unknown. */
	uint64_t t[6] = { e->rx_ns, e->tcp_ns, e->ready_ns, e->epoll_ns, e->read_ns, e->done_ns };
	struct lat_batch b = { .tid = (int)e->tid, .fd = e->fd, .at_ns = t[0] };
	for (int i = 1; i < 6; i++) {
		if (t[i] < t[i - 1])
			t[i] = t[i - 1];
		b.ns[i - 1] = t[i] - t[i - 1];
		b.measured[i - 1] = 1;
	}
	b.ns[ST_TOTAL] = (e->xmit_ns > t[5] ? e->xmit_ns : t[5]) - t[0];
	b.measured[ST_TOTAL] = 1;
	j->out(&b, j->arg);
}

/* Stage times of e, whose module batch ended at end_ns. */
static void finish(struct join *j, const struct mclat_event *e, uint64_t end_ns)
{
	if ((e->flags & (MCLAT_HAVE_RX | MCLAT_HAVE_READY)) != (MCLAT_HAVE_RX | MCLAT_HAVE_READY)) {
		j->iv->partial++; /* its data came before mclat attached, or unseen */
		return;
	}
	uint64_t t[8] = { e->rx_ns, e->tcp_ns, e->ready_ns, e->epoll_ns,
			  e->read_ns, e->done_ns, end_ns, e->xmit_ns };
	struct lat_batch b = { .tid = (int)e->tid, .fd = e->fd, .at_ns = t[0] };
	for (int i = 1; i < 8; i++) {
		if (t[i] < t[i - 1])
			t[i] = t[i - 1];
		b.ns[i - 1] = t[i] - t[i - 1];
		b.measured[i - 1] = 1;
	}
	b.ns[ST_TOTAL] = t[7] - t[0];
	b.measured[ST_TOTAL] = 1;
	j->out(&b, j->arg);
}

static void run_thread(struct join *j, struct thread_queues *t, uint64_t horizon, int final)
{
	struct mclat_event *e;
	while ((e = fifo_front(&t->kernel))) {
		if (e->xmit_ns > horizon && !final)
			break;
		struct module_batch *m;
		while ((m = fifo_front(&t->module)) && m->end_ns < e->done_ns)
			fifo_pop(&t->module); /* no read of its own */
		uint64_t end = 0;
		while ((m = fifo_front(&t->module)) && m->fd == e->fd && m->start_ns >= e->done_ns &&
		       m->end_ns <= e->send_ns) {
			end = m->end_ns; /* pipelined: the batch's last end */
			fifo_pop(&t->module);
		}
		if (end)
			finish(j, e, end);
		else
			j->iv->unmatched++;
		fifo_pop(&t->kernel);
	}
	if (!fifo_front(&t->kernel)) {
		/* Nothing to wait for: module batches older than any reply
		 * still to come are done with. */
		struct module_batch *m;
		while ((m = fifo_front(&t->module)) && (final || m->end_ns + 1000000000ull < horizon))
			fifo_pop(&t->module);
	}
}

void join_run(struct join *j, uint64_t horizon_ns, int final)
{
	if (!j->with_kernel)
		return;
	for (size_t i = 0; i < j->nt; i++)
		run_thread(j, &j->t[i], horizon_ns, final);
}

void join_free(struct join *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->nt; i++) {
		free(j->t[i].kernel.v);
		free(j->t[i].module.v);
	}
	free(j->t);
	free(j);
}
