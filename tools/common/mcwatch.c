/* SPDX-License-Identifier: MIT */
/* memcached's own event stream, for a memcached built without probe
 * sites (Debian's, say).  memcached 1.5+ answers `watch fetchers
 * mutations` on its text port with "OK" and then one line per item fetch
 * and store, whatever the protocol of the command behind it (logger.c;
 * the lines, and how they are parsed: mcwatch_line.c).  "skipped=N" says
 * memcached dropped N lines because this reader fell behind: the tools
 * count them as lost.  Errors come as ERROR, CLIENT_ERROR or WATCHER_*
 * lines.
 *
 * Every store (set, add, cas...) first looks the key up, and memcached
 * logs that lookup as an item_get on the same connection right before
 * the item_store (do_store_item).  So a get is held back until the next
 * line of its connection: an item_store of the same key means it was the
 * store's lookup and it is dropped; anything else, or 250 ms of quiet on
 * that connection, means it was a get.  A connection's lines come from
 * one worker thread in order, and memcached's logger thread passes a
 * worker's lines on within a millisecond or so when busy, so the two
 * lines of a store never arrive 250 ms apart.  When memcached skips
 * lines, a held get may have been a lookup whose store was skipped: it is
 * counted as lost (ambiguous), so the counts stay bounds.
 *
 * The stream is the target's, and the tools' -d and counts must hold
 * whatever it sends: a line is at most MCWATCH_LINE_MAX bytes (a longer
 * one is dropped whole, not cut into a shorter line that parses), every
 * wait has a deadline (the socket is non-blocking, and bytes that keep
 * dripping in without a newline do not extend a wait), and so do the
 * connection and the statistics' round trip. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define MCWATCH_PEND 1024           /* pending-get slots, by cfd */
#define MCWATCH_HOLD_NS 250000000ull /* how long a get may wait for its store */
#define CONNECT_MS 2000             /* a memcached that accepts nobody */

struct mcwatch_pending {
	int used;
	unsigned long long at_ns; /* when it arrived (CLOCK_MONOTONIC) */
	struct mcwatch_event e;
};

static unsigned long long clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static unsigned long long mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* Milliseconds from now to deadline (CLOCK_MONOTONIC ns), 0 if past. */
static int ms_left(unsigned long long deadline)
{
	unsigned long long now = mono_ns();
	return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

/* Wait for events on fd until deadline: poll's answer. */
static int wait_fd(int fd, short events, unsigned long long deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	return poll(&p, 1, ms_left(deadline));
}

/* A non-blocking TCP connection to port on loopback, IPv4 then IPv6,
 * each tried until deadline; -1 (errno set) if neither. */
static int connect_loopback(unsigned port, unsigned long long deadline)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	const struct sockaddr *addrs[] = { (const struct sockaddr *)&a4,
					   (const struct sockaddr *)&a6 };
	const socklen_t lens[] = { sizeof(a4), sizeof(a6) };
	int err = 0;
	for (int i = 0; i < 2; i++) {
		int fd = socket(addrs[i]->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			continue;
		err = connect(fd, addrs[i], lens[i]) == 0 ? 0 : errno;
		if (err == EINPROGRESS) {
			socklen_t len = sizeof(err);
			int rc = wait_fd(fd, POLLOUT, deadline);
			if (rc <= 0)
				err = rc == 0 ? ETIMEDOUT : errno;
			else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
				err = errno;
		}
		if (err == 0)
			return fd;
		close(fd);
	}
	errno = err;
	return -1;
}

/* memcached's log_worker_dropped and log_watcher_skipped, all asked and
 * answered within timeout_ms (a stuck or dripping memcached must not
 * hold the tool): 0, or -1. */
static int log_stats(unsigned port, int timeout_ms, unsigned long long *dropped,
		     unsigned long long *skipped)
{
	unsigned long long deadline = mono_ns() + (unsigned long long)timeout_ms * 1000000ull;
	int fd = connect_loopback(port, deadline);
	if (fd < 0)
		return -1;
	static const char cmd[] = "stats\r\n";
	char buf[8192];
	size_t len = 0;
	int rc = -1;
	if (send(fd, cmd, sizeof(cmd) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(cmd) - 1) {
		buf[0] = '\0';
		while (len < sizeof(buf) - 1 && !strstr(buf, "END\r\n")) {
			if (wait_fd(fd, POLLIN, deadline) <= 0)
				break;
			ssize_t got = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
			if (got < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (got <= 0)
				break;
			len += (size_t)got;
			buf[len] = '\0';
		}
		const char *d = strstr(buf, "STAT log_worker_dropped ");
		const char *k = strstr(buf, "STAT log_watcher_skipped ");
		if (d && k && strstr(buf, "END\r\n")) {
			*dropped = strtoull(d + strlen("STAT log_worker_dropped "), NULL, 10);
			*skipped = strtoull(k + strlen("STAT log_watcher_skipped "), NULL, 10);
			rc = 0;
		}
	}
	close(fd);
	return rc;
}

int mcwatch_stats(struct mcwatch *w, int timeout_ms, unsigned long long *dropped,
		  unsigned long long *skipped)
{
	unsigned long long d, k;
	if (log_stats(w->port, timeout_ms, &d, &k) != 0)
		return -1;
	*dropped = d > w->dropped_at_open ? d - w->dropped_at_open : 0;
	*skipped = k > w->skipped_at_open ? k - w->skipped_at_open : 0;
	return 0;
}

int mcwatch_init(struct mcwatch *w, const char *prog)
{
	*w = (struct mcwatch){ .fd = -1 };
	w->pend = calloc(MCWATCH_PEND, sizeof(*w->pend));
	w->ready = calloc(MCWATCH_PEND + 2, sizeof(*w->ready));
	if (!w->pend || !w->ready) {
		fprintf(stderr, "%s: out of memory\n", prog);
		mcwatch_close(w);
		return -1;
	}
	w->opened_ns = mono_ns();
	return 0;
}

int mcwatch_open(struct mcwatch *w, pid_t pid, unsigned port, const char *prog)
{
	if (mcwatch_init(w, prog) != 0)
		return -1;
	if (!port && !(port = procnet_listen_port(pid))) {
		fprintf(stderr, "%s: process %d listens on no TCP port, so its watch stream cannot "
				"be read (--port PORT names one)\n", prog, (int)pid);
		mcwatch_close(w);
		return -1;
	}
	w->port = port;
	if (log_stats(port, MCWATCH_STATS_MS, &w->dropped_at_open, &w->skipped_at_open) != 0)
		w->dropped_at_open = w->skipped_at_open = 0;
	w->fd = connect_loopback(port, mono_ns() + CONNECT_MS * 1000000ull);
	if (w->fd < 0) {
		fprintf(stderr, "%s: cannot connect to memcached on 127.0.0.1 or [::1] port %u: %s\n",
			prog, port, strerror(errno));
		mcwatch_close(w);
		return -1;
	}
	/* A fresh socket's send buffer takes these bytes at once. */
	static const char cmd[] = "watch fetchers mutations\r\n";
	if (send(w->fd, cmd, sizeof(cmd) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(cmd) - 1) {
		fprintf(stderr, "%s: cannot send watch to memcached port %u: %s\n", prog, port,
			strerror(errno));
		mcwatch_close(w);
		return -1;
	}
	w->opened_ns = mono_ns();
	return 0;
}

/* Take one line out of buf into line (NUL-terminated, \r\n cut); 1, or 0
 * if no whole line is waiting.  Lines are taken by moving off, not the
 * bytes: a buffer of ~600 lines is moved once per read, not per line.
 * A line longer than MCWATCH_LINE_MAX, or holding a NUL, is no line of
 * memcached's: it is dropped whole (counted in w->malformed), the bytes
 * of an unfinished one as they come, so the buffer never fills. */
static int take_line(struct mcwatch *w, char *line)
{
	for (;;) {
		char *start = w->buf + w->off;
		size_t have = w->len - w->off;
		char *nl = memchr(start, '\n', have);
		if (!nl) {
			if (have > MCWATCH_LINE_MAX) { /* too long already: drop what came */
				if (!w->overlong)
					w->malformed++;
				w->overlong = 1;
				w->off = w->len = 0;
			}
			return 0;
		}
		size_t n = (size_t)(nl - start);
		w->off += n + 1;
		if (w->overlong) { /* the end of a line already dropped */
			w->overlong = 0;
			continue;
		}
		if (n > MCWATCH_LINE_MAX || memchr(start, '\0', n)) {
			w->malformed++;
			continue;
		}
		memcpy(line, start, n);
		line[n] = '\0';
		if (n && line[n - 1] == '\r')
			line[n - 1] = '\0';
		return 1;
	}
}

/* memcached's stamp (its wall clock) on CLOCK_MONOTONIC, the clock of
 * every other timestamp the tools print: moved by the clocks' difference
 * when the line arrived, and kept between the watch's start and the
 * line's arrival, the times it must lie between whatever the stream says. */
static unsigned long long event_time(const struct mcwatch *w, const struct mcwatch_event *e,
				     unsigned long long arrived, long long wall_minus_mono)
{
	unsigned long long wall = (unsigned long long)e->ts_sec * 1000000000ull +
				  (unsigned long long)e->ts_usec * 1000ull;
	unsigned long long diff = wall_minus_mono >= 0 ? (unsigned long long)wall_minus_mono
						      : (unsigned long long)-wall_minus_mono;
	unsigned long long t = wall_minus_mono < 0 ? wall + diff : wall >= diff ? wall - diff : 0;
	return t > arrived ? arrived : t < w->opened_ns ? w->opened_ns : t;
}

static void push(struct mcwatch *w, const struct mcwatch_event *e)
{
	w->ready[w->nready++] = *e;
}

/* Route one parsed event through the pending gets (see the top). */
static void route(struct mcwatch *w, const struct mcwatch_event *e)
{
	struct mcwatch_pending *p = &w->pend[(unsigned)e->cfd % MCWATCH_PEND];
	if (p->used) {
		int lookup = e->store && p->e.cfd == e->cfd && p->e.keylen == e->keylen &&
			     !memcmp(p->e.key, e->key, e->keylen);
		if (!lookup)
			push(w, &p->e);
		p->used = 0;
		w->npend--;
	}
	if (e->store || e->cfd < 0) {
		push(w, e);
		return;
	}
	p->used = 1;
	p->at_ns = mono_ns();
	p->e = *e;
	w->npend++;
}

/* Gets that waited long enough are gets. */
static void sweep(struct mcwatch *w, int all)
{
	unsigned long long now = mono_ns();
	if (!w->npend || (!all && now - w->last_sweep_ns < MCWATCH_HOLD_NS / 4))
		return;
	w->last_sweep_ns = now;
	for (size_t i = 0; i < MCWATCH_PEND && w->npend; i++) {
		struct mcwatch_pending *p = &w->pend[i];
		if (p->used && (all || now - p->at_ns >= MCWATCH_HOLD_NS)) {
			push(w, &p->e);
			p->used = 0;
			w->npend--;
		}
	}
}

/* Lines were skipped: a held-back get may have been a store's lookup
 * whose store was among them.  Neither shown nor counted: lost. */
static void forget_held(struct mcwatch *w)
{
	for (size_t i = 0; i < MCWATCH_PEND && w->npend; i++)
		if (w->pend[i].used) {
			w->pend[i].used = 0;
			w->npend--;
			w->ambiguous++;
		}
}

/* The whole lines waiting in the buffer, parsed and routed until one
 * makes an event ready: 0, or -1 after an error line. */
static int take_lines(struct mcwatch *w, const char *prog)
{
	char line[MCWATCH_LINE_MAX + 1];
	unsigned long long arrived = 0;
	long long offset = 0;
	while (!w->nready && take_line(w, line)) {
		unsigned long long skipped = 0;
		struct mcwatch_event e;
		int rc = mcwatch_parse(line, &e, &skipped);
		if (rc == 1) {
			if (!arrived) { /* the clocks read once per batch of lines */
				arrived = mono_ns();
				offset = (long long)(clock_ns(CLOCK_REALTIME) - arrived);
			}
			e.time_ns = event_time(w, &e, arrived, offset);
			route(w, &e);
		} else if (rc == 2) {
			w->skipped += skipped;
			forget_held(w);
		} else if (rc == 3) {
			w->malformed++;
		} else if (rc < 0) {
			fprintf(stderr, "%s: memcached refused the watch: %s\n", prog,
				sanitize_text(line));
			return -1;
		}
	}
	return 0;
}

int mcwatch_next(struct mcwatch *w, struct mcwatch_event *e, int timeout_ms, const char *prog)
{
	unsigned long long deadline = timeout_ms < 0 ? ~0ull
				    : mono_ns() + (unsigned long long)timeout_ms * 1000000ull;
	for (int polled = 0;; polled = 1) {
		if (w->next_ready < w->nready) {
			*e = w->ready[w->next_ready++];
			return 1;
		}
		w->nready = w->next_ready = 0;
		sweep(w, 0);
		if (!w->nready && take_lines(w, prog) != 0)
			return -1;
		if (w->nready)
			continue;
		/* Once the deadline is past, a call has read what was waiting
		 * (a timeout of 0 reads once): bytes still arriving, a drip
		 * without a newline included, never hold it longer. */
		unsigned long long now = mono_ns();
		if (polled && now >= deadline)
			return 0;
		/* Wake up for the oldest pending get, not only for new lines. */
		unsigned long long until = deadline;
		if (w->npend && now + MCWATCH_HOLD_NS / 4 < until)
			until = now + MCWATCH_HOLD_NS / 4;
		struct pollfd p = { .fd = w->fd, .events = POLLIN };
		int n = poll(&p, 1, timeout_ms < 0 && !w->npend ? -1 : ms_left(until));
		if (n < 0 && errno == EINTR)
			return 0; /* a signal: the caller looks at why */
		if (n < 0) {
			fprintf(stderr, "%s: cannot wait for memcached's watch stream: %s\n", prog,
				strerror(errno));
			return -1;
		}
		if (n == 0)
			continue;
		if (w->off) { /* what is left of a line, to the front */
			memmove(w->buf, w->buf + w->off, w->len - w->off);
			w->len -= w->off;
			w->off = 0;
		}
		ssize_t got = recv(w->fd, w->buf + w->len, sizeof(w->buf) - w->len, 0);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0) {
			fprintf(stderr, "%s: memcached closed its watch stream%s%s\n", prog,
				got < 0 ? ": " : "", got < 0 ? strerror(errno) : "");
			return -1;
		}
		w->len += (size_t)got;
	}
}

void mcwatch_flush(struct mcwatch *w)
{
	if (w->next_ready == w->nready)
		w->nready = w->next_ready = 0;
	sweep(w, 1);
}

void mcwatch_close(struct mcwatch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	free(w->pend);
	free(w->ready);
	w->pend = NULL;
	w->ready = NULL;
	w->npend = w->nready = w->next_ready = 0;
}
