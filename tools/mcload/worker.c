/* SPDX-License-Identifier: MIT */
/* One worker thread: its connections, one epoll loop, until the run's
 * end (time, request count or Ctrl-C) and every answer is in.
 *
 * Closed loop: each connection keeps --pipeline requests in flight and
 * sends the next as soon as one is answered.  Open loop (--rate): each
 * connection has a timeline of intended send times (rate / conns each,
 * phases staggered so the sum is evenly spaced) and sends every request
 * whose time has come, answered or not; latency counts from the intended
 * time, so a stalled server is charged for the requests it delayed
 * (no coordinated omission). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "mcload.h"
#include "proto.h"
#include "sample.h"

#define RBUF     65536
#define IDLE_NS  (10 * 1000000000ull)   /* no answer for this long: give up */
#define MAX_WAIT_MS 100                 /* so Ctrl-C is noticed promptly */

volatile sig_atomic_t mcload_stop;

struct conn {
	int fd;
	unsigned index;           /* over all threads */
	struct rng rng;
	uint64_t quota;           /* requests still to send */
	uint64_t sent;            /* requests sent: the open-loop step */
	uint64_t last_read;       /* last progress, for the idle limit */
	struct buf out;
	char *in;
	size_t in_len;
	struct parser ps;
	struct pending *fifo;     /* ring: answers come back in order */
	size_t head, count, cap;
	int polling_out;
	int dead;
};

struct wstate {
	int ep, tfd;
	struct conn *c;
	unsigned n;
	struct zipf zipf;
	uint64_t *keys;           /* a multi-get's draws */
};

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n, size);
	if (!p) {
		fputs("mcload: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

static void fifo_push(struct conn *c, struct pending p)
{
	if (c->count == c->cap) {
		/* Grow, unrolling the ring into the new array. */
		size_t cap = c->cap ? c->cap * 2 : 16;
		struct pending *f = xcalloc(cap, sizeof *f);
		for (size_t i = 0; i < c->count; i++)
			f[i] = c->fifo[(c->head + i) % c->cap];
		free(c->fifo);
		c->fifo = f;
		c->cap = cap;
		c->head = 0;
	}
	c->fifo[(c->head + c->count++) % c->cap] = p;
}

static uint64_t t_stop(const struct run *run)
{
	return mcload_stop ? 0 : run->t_end;
}

/* When CONN's next open-loop request is due. */
static uint64_t due(const struct worker *w, const struct conn *c)
{
	const struct config *cfg = w->run->cfg;
	double step = ((double)c->index + (double)c->sent * cfg->conns) / cfg->rate;
	return w->run->t0 + (uint64_t)(step * 1e9);
}

static int may_send(const struct worker *w, const struct conn *c, uint64_t t)
{
	return !c->dead && c->quota > 0 && t < t_stop(w->run);
}

static void send_one(struct worker *w, struct conn *c, uint64_t t)
{
	const struct run *run = w->run;
	const struct config *cfg = run->cfg;
	struct wstate *st = w->st;
	struct pending p = { .t = t, .width = 1, .kind = REQ_SET };
	if (cfg->get_weight &&
	    rng_below(&c->rng, cfg->get_weight + cfg->set_weight) < cfg->get_weight) {
		p.kind = REQ_GET;
		p.width = (uint16_t)cfg->width;
		for (unsigned i = 0; i < cfg->width; i++) {
			st->keys[i] = zipf_draw(&st->zipf, &c->rng);
			if (run->truth.gets)
				atomic_fetch_add_explicit(&run->truth.gets[st->keys[i]], 1,
							  memory_order_relaxed);
		}
		proto_get(cfg, &c->out, st->keys, cfg->width);
		w->c.gets++;
		w->c.get_keys += cfg->width;
	} else {
		uint64_t k = zipf_draw(&st->zipf, &c->rng);
		unsigned vlen = cfg->vmin + (unsigned)rng_below(&c->rng, cfg->vmax - cfg->vmin + 1ull);
		if (run->truth.sets)
			atomic_fetch_add_explicit(&run->truth.sets[k], 1, memory_order_relaxed);
		proto_set(cfg, &c->out, k, run->value, vlen);
		w->c.sets++;
	}
	if (c->count == 0)
		c->last_read = now_ns();   /* the idle clock starts now */
	fifo_push(c, p);
	w->c.requests++;
	c->quota--;
	c->sent++;
}

static void kill_conn(struct worker *w, struct conn *c)
{
	if (c->dead)
		return;
	c->dead = 1;
	w->c.unanswered += c->count;
	c->count = 0;
	epoll_ctl(w->st->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
}

static void set_polling_out(struct worker *w, struct conn *c, int on)
{
	if (c->polling_out == on)
		return;
	struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0u), .data.ptr = c };
	epoll_ctl(w->st->ep, EPOLL_CTL_MOD, c->fd, &ev);
	c->polling_out = on;
}

/* Write what is buffered; wait for EPOLLOUT if the socket is full. */
static void flush(struct worker *w, struct conn *c)
{
	struct buf *b = &c->out;
	while (!c->dead && b->off < b->len) {
		ssize_t n = send(c->fd, b->p + b->off, b->len - b->off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				set_polling_out(w, c, 1);
				return;
			}
			w->c.conn_errors++;
			kill_conn(w, c);
			return;
		}
		b->off += (size_t)n;
	}
	b->off = b->len = 0;
	set_polling_out(w, c, 0);
}

static void answered(struct worker *w, struct conn *c, const struct outcome *o, uint64_t now)
{
	const struct pending *p = &c->fifo[c->head];
	hist_add(&w->lat, now > p->t ? now - p->t : 0);
	w->c.completed++;
	w->c.hits += o->hits;
	w->c.misses += o->misses;
	w->c.server_errors += o->error;
	c->head = (c->head + 1) % c->cap;
	c->count--;
	w->t_last = now;
	/* Closed loop: the answer frees a slot for the next request. */
	if (w->run->cfg->rate == 0 && may_send(w, c, now))
		send_one(w, c, now);
}

static void readable(struct worker *w, struct conn *c, uint64_t now)
{
	ssize_t n = recv(c->fd, c->in + c->in_len, RBUF - c->in_len, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		w->c.conn_errors++;   /* memcached closed it, or it broke */
		kill_conn(w, c);
		return;
	}
	c->in_len += (size_t)n;
	c->last_read = now;
	size_t pos = 0;
	while (c->count) {
		struct outcome o;
		size_t used = 0;
		int r = proto_parse(w->run->cfg->proto, &c->ps, &c->fifo[c->head],
				    c->in + pos, c->in_len - pos, &used, &o);
		pos += used;
		if (r < 0) {
			w->c.conn_errors++;
			kill_conn(w, c);
			return;
		}
		if (r == 0)
			break;
		answered(w, c, &o, now);
	}
	/* An answer nobody asked for is a protocol violation. */
	if (c->count == 0 && pos < c->in_len && !c->ps.skip) {
		w->c.conn_errors++;
		kill_conn(w, c);
		return;
	}
	memmove(c->in, c->in + pos, c->in_len - pos);
	c->in_len -= pos;
	flush(w, c);
}

int worker_connect(struct worker *w)
{
	const struct run *run = w->run;
	const struct config *cfg = run->cfg;
	struct wstate *st = w->st = xcalloc(1, sizeof *st);
	st->ep = epoll_create1(EPOLL_CLOEXEC);
	st->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (st->ep < 0 || st->tfd < 0) {
		snprintf(w->err, sizeof w->err, "epoll/timerfd: %s", strerror(errno));
		return -1;
	}
	struct epoll_event tev = { .events = EPOLLIN, .data.ptr = NULL };
	epoll_ctl(st->ep, EPOLL_CTL_ADD, st->tfd, &tev);
	zipf_init(&st->zipf, cfg->keys, cfg->zipf_s);
	st->keys = xcalloc(cfg->width, sizeof *st->keys);
	st->n = (cfg->conns - w->first_conn + cfg->threads - 1) / cfg->threads;
	st->c = xcalloc(st->n, sizeof *st->c);
	for (unsigned i = 0; i < st->n; i++) {
		struct conn *c = &st->c[i];
		c->index = w->first_conn + i * cfg->threads;
		rng_seed(&c->rng, cfg->seed, c->index);
		/* --requests N: conn i sends N / conns, the first N % conns one more. */
		c->quota = cfg->requests ? cfg->requests / cfg->conns + (c->index < cfg->requests % cfg->conns)
					 : UINT64_MAX;
		c->in = xcalloc(1, RBUF);
		c->fd = socket(cfg->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c->fd < 0 || connect(c->fd, (const struct sockaddr *)&cfg->addr, cfg->addrlen) < 0) {
			snprintf(w->err, sizeof w->err, "cannot connect to %s:%s: %s",
				 cfg->host, cfg->port, strerror(errno));
			return -1;
		}
		int one = 1;
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		epoll_ctl(st->ep, EPOLL_CTL_ADD, c->fd, &ev);
	}
	return 0;
}

/* Open loop: send what is due; arm the timer for the next due time.
 * Returns 1 while some connection still has requests to send. */
static int send_due(struct worker *w, uint64_t now)
{
	struct wstate *st = w->st;
	uint64_t next = UINT64_MAX;
	for (unsigned i = 0; i < st->n; i++) {
		struct conn *c = &st->c[i];
		uint64_t t;
		while (may_send(w, c, t = due(w, c)) && t <= now)
			send_one(w, c, t);
		if (may_send(w, c, t) && t < next)
			next = t;
		flush(w, c);
	}
	if (next == UINT64_MAX)
		return 0;
	struct itimerspec its = { .it_value = { .tv_sec = (time_t)(next / 1000000000ull),
						.tv_nsec = (long)(next % 1000000000ull) } };
	timerfd_settime(st->tfd, TFD_TIMER_ABSTIME, &its, NULL);
	return 1;
}

/* 1 when no connection has anything in flight or left to send. */
static int finished(struct worker *w, uint64_t now)
{
	const struct config *cfg = w->run->cfg;
	for (unsigned i = 0; i < w->st->n; i++) {
		struct conn *c = &w->st->c[i];
		if (c->dead)
			continue;
		if (c->count && now > c->last_read && now - c->last_read > IDLE_NS) {
			w->c.conn_errors++;   /* the server stopped answering */
			kill_conn(w, c);
			continue;
		}
		if (c->count || (cfg->rate > 0 && may_send(w, c, due(w, c))))
			return 0;
	}
	return 1;
}

void worker_run(struct worker *w)
{
	const struct run *run = w->run;
	const struct config *cfg = run->cfg;
	struct wstate *st = w->st;
	uint64_t now = now_ns();
	w->t_last = now;
	if (cfg->rate == 0) {
		for (unsigned i = 0; i < st->n; i++) {
			struct conn *c = &st->c[i];
			for (unsigned k = 0; k < cfg->pipeline && may_send(w, c, now); k++)
				send_one(w, c, now);
			flush(w, c);
		}
	}
	struct epoll_event ev[64];
	for (;;) {
		now = now_ns();
		if (cfg->rate > 0)
			send_due(w, now);
		if (finished(w, now))
			break;
		int wait = MAX_WAIT_MS;
		uint64_t end = t_stop(run);
		if (end > now && (end - now) / 1000000 < (uint64_t)wait)
			wait = (int)((end - now + 999999) / 1000000);
		int n = epoll_wait(st->ep, ev, 64, wait);
		now = now_ns();
		for (int i = 0; i < n; i++) {
			struct conn *c = ev[i].data.ptr;
			if (!c) {
				uint64_t ticks;
				if (read(st->tfd, &ticks, sizeof ticks) < 0)
					continue;   /* spurious: nothing to drain */
				continue;
			}
			if (c->dead)
				continue;
			if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				readable(w, c, now);
			if (ev[i].events & EPOLLOUT)
				flush(w, c);
		}
	}
	for (unsigned i = 0; i < st->n; i++) {
		struct conn *c = &st->c[i];
		kill_conn(w, c);
		free(c->in);
		free(c->out.p);
		free(c->fifo);
	}
	free(st->c);
	free(st->keys);
	close(st->tfd);
	close(st->ep);
	free(st);
	w->st = NULL;
}
