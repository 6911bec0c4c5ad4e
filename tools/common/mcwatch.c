/* memcached's own event stream, for a memcached built without probe
 * sites (Debian's, say).  memcached 1.5+ answers `watch fetchers
 * mutations` on its text port with one line per item fetch and store,
 * whatever the protocol of the command behind it (logger.c):
 *
 *   ts=SEC.USEC gid=N type=item_get key=K status=found clsid=N cfd=N size=N
 *   ts=SEC.USEC gid=N type=item_store key=K status=stored cmd=set ttl=N clsid=N cfd=N size=N
 *   skipped=N
 *
 * Keys are URI-encoded (every byte but [A-Za-z0-9._~-] as %XX), so a
 * binary key is exact.  "skipped=N" says memcached dropped N lines because
 * this reader fell behind: the tools count them as lost.  A successful
 * watch has no "OK": lines simply start to flow; errors come as ERROR,
 * CLIENT_ERROR or WATCHER_* lines.
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
 * counted as lost (ambiguous), so the counts stay bounds. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <time.h>

#include "common.h"

#define MCWATCH_PEND 1024           /* pending-get slots, by cfd */
#define MCWATCH_HOLD_NS 250000000ull /* how long a get may wait for its store */

struct mcwatch_pending {
	int used;
	unsigned long long at_ns; /* when it arrived (CLOCK_MONOTONIC) */
	struct mcwatch_event e;
};

static unsigned long long mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0'
	     : c >= 'a' && c <= 'f' ? c - 'a' + 10
	     : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The value of " name=" in line, up to the next space, into out; 0, or -1
 * if absent or too long. */
static int field(const char *line, const char *name, char *out, size_t outsz)
{
	size_t n = strlen(name);
	for (const char *p = line; (p = strstr(p, name)); p += n) {
		if ((p != line && p[-1] != ' ') || p[n] != '=')
			continue;
		p += n + 1;
		size_t len = strcspn(p, " ");
		if (len >= outsz)
			return -1;
		memcpy(out, p, len);
		out[len] = '\0';
		return 0;
	}
	return -1;
}

static int uridecode(const char *in, unsigned char *out, size_t outsz, size_t *len)
{
	size_t n = 0;
	while (*in) {
		int hi, lo;
		if (n == outsz)
			return -1;
		if (*in == '%') {
			if ((hi = hexval(in[1])) < 0 || (lo = hexval(in[2])) < 0)
				return -1;
			out[n++] = (unsigned char)(hi << 4 | lo);
			in += 3;
		} else {
			out[n++] = (unsigned char)*in++;
		}
	}
	*len = n;
	return 0;
}

int mcwatch_parse(const char *line, struct mcwatch_event *e, unsigned long long *skipped)
{
	char type[16], key[3 * MCWATCH_KEY_MAX + 1], num[32], *end;
	if (strncmp(line, "skipped=", 8) == 0) {
		*skipped = strtoull(line + 8, &end, 10);
		return end != line + 8 && !*end ? 2 : 0;
	}
	if (!strncmp(line, "ERROR", 5) || !strncmp(line, "CLIENT_ERROR", 12) ||
	    !strncmp(line, "SERVER_ERROR", 12) || !strncmp(line, "WATCHER_", 8))
		return -1;
	if (strncmp(line, "ts=", 3) != 0 || field(line, "type", type, sizeof(type)))
		return 0;
	memset(e, 0, sizeof(*e));
	if (!strcmp(type, "item_get")) {
		strcpy(e->cmd, "get");
	} else if (!strcmp(type, "item_store")) {
		e->store = 1;
		if (field(line, "cmd", e->cmd, sizeof(e->cmd)))
			return 0;
	} else {
		return 0;
	}
	if (field(line, "key", key, sizeof(key)) ||
	    uridecode(key, e->key, sizeof(e->key), &e->keylen) ||
	    field(line, "status", e->status, sizeof(e->status)))
		return 0;
	e->ts_sec = strtoll(line + 3, &end, 10);
	e->ts_usec = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
	e->size = field(line, "size", num, sizeof(num)) ? 0 : strtol(num, NULL, 10);
	e->cfd = field(line, "cfd", num, sizeof(num)) ? -1 : (int)strtol(num, NULL, 10);
	return 1;
}

void mcwatch_escape(const unsigned char *key, size_t len, char *out, size_t outsz)
{
	size_t n = 0;
	for (size_t i = 0; i < len && n + 5 <= outsz; i++) {
		if (key[i] < 0x21 || key[i] > 0x7e || key[i] == '\\')
			n += (size_t)snprintf(out + n, 5, "\\x%02x", key[i]);
		else
			out[n++] = (char)key[i];
	}
	if (outsz)
		out[n < outsz ? n : outsz - 1] = '\0';
}

/* A TCP connection to port on loopback, IPv4 then IPv6; -1 if neither. */
static int connect_loopback(unsigned port)
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
		int fd = socket(addrs[i]->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		if (connect(fd, addrs[i], lens[i]) == 0)
			return fd;
		err = errno;
		close(fd);
	}
	errno = err;
	return -1;
}

/* memcached's log_worker_dropped and log_watcher_skipped: 0, or -1. */
static int log_stats(unsigned port, unsigned long long *dropped, unsigned long long *skipped)
{
	int fd = connect_loopback(port);
	if (fd < 0)
		return -1;
	static const char cmd[] = "stats\r\n";
	char buf[8192];
	size_t len = 0;
	int rc = -1;
	struct timeval tv = { 2, 0 }; /* a stuck memcached must not hang the tool */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (send(fd, cmd, sizeof(cmd) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(cmd) - 1) {
		while (len < sizeof(buf) - 1) {
			ssize_t got = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
			if (got <= 0)
				break;
			len += (size_t)got;
			buf[len] = '\0';
			if (strstr(buf, "END\r\n"))
				break;
		}
		buf[len] = '\0';
		const char *d = strstr(buf, "STAT log_worker_dropped ");
		const char *k = strstr(buf, "STAT log_watcher_skipped ");
		if (d && k) {
			*dropped = strtoull(d + strlen("STAT log_worker_dropped "), NULL, 10);
			*skipped = strtoull(k + strlen("STAT log_watcher_skipped "), NULL, 10);
			rc = 0;
		}
	}
	close(fd);
	return rc;
}

int mcwatch_stats(struct mcwatch *w, unsigned long long *dropped, unsigned long long *skipped)
{
	unsigned long long d, k;
	if (log_stats(w->port, &d, &k) != 0)
		return -1;
	*dropped = d > w->dropped_at_open ? d - w->dropped_at_open : 0;
	*skipped = k > w->skipped_at_open ? k - w->skipped_at_open : 0;
	return 0;
}

int mcwatch_open(struct mcwatch *w, pid_t pid, unsigned port, const char *prog)
{
	*w = (struct mcwatch){ .fd = -1 };
	w->fd = -1;
	w->pend = calloc(MCWATCH_PEND, sizeof(*w->pend));
	w->ready = calloc(MCWATCH_PEND + 2, sizeof(*w->ready));
	if (!w->pend || !w->ready) {
		fprintf(stderr, "%s: out of memory\n", prog);
		mcwatch_close(w);
		return -1;
	}
	if (!port && !(port = procnet_listen_port(pid))) {
		fprintf(stderr, "%s: process %d listens on no TCP port, so its watch stream cannot "
				"be read (--port PORT names one)\n", prog, (int)pid);
		return -1;
	}
	w->port = port;
	if (log_stats(port, &w->dropped_at_open, &w->skipped_at_open) != 0)
		w->dropped_at_open = w->skipped_at_open = 0;
	w->fd = connect_loopback(port);
	if (w->fd < 0) {
		fprintf(stderr, "%s: cannot connect to memcached on 127.0.0.1 or [::1] port %u: %s\n",
			prog, port, strerror(errno));
		return -1;
	}
	static const char cmd[] = "watch fetchers mutations\r\n";
	if (send(w->fd, cmd, sizeof(cmd) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(cmd) - 1) {
		fprintf(stderr, "%s: cannot send watch to memcached port %u: %s\n", prog, port,
			strerror(errno));
		mcwatch_close(w);
		return -1;
	}
	return 0;
}

/* Take one line out of buf into line (NUL-terminated, \r\n cut); 1, or 0
 * if no whole line is waiting.  Lines are taken by moving off, not the
 * bytes: a buffer of ~600 lines is moved once per read, not per line. */
static int take_line(struct mcwatch *w, char *line, size_t linesz)
{
	char *start = w->buf + w->off;
	char *nl = memchr(start, '\n', w->len - w->off);
	if (!nl) {
		if (w->off == 0 && w->len == sizeof(w->buf)) /* longer than memcached writes */
			w->len = 0;
		return 0;
	}
	size_t n = (size_t)(nl - start);
	size_t copy = n < linesz ? n : linesz - 1;
	memcpy(line, start, copy);
	line[copy] = '\0';
	if (copy && line[copy - 1] == '\r')
		line[copy - 1] = '\0';
	w->off += n + 1;
	return 1;
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

int mcwatch_next(struct mcwatch *w, struct mcwatch_event *e, int timeout_ms, const char *prog)
{
	char line[4096];
	for (;;) {
		if (w->next_ready < w->nready) {
			*e = w->ready[w->next_ready++];
			return 1;
		}
		w->nready = w->next_ready = 0;
		sweep(w, 0);
		if (w->nready)
			continue;
		while (!w->nready && take_line(w, line, sizeof(line))) {
			unsigned long long skipped = 0;
			int rc = mcwatch_parse(line, e, &skipped);
			if (rc == 1)
				route(w, e);
			if (rc == 2) {
				w->skipped += skipped;
				forget_held(w);
			}
			if (rc < 0) {
				fprintf(stderr, "%s: memcached refused the watch: %s\n", prog,
					sanitize_text(line));
				return -1;
			}
		}
		if (w->nready)
			continue;
		/* Wake up for the oldest pending get, not only for new lines. */
		int wait = w->npend && (timeout_ms < 0 || timeout_ms > (int)(MCWATCH_HOLD_NS / 4000000))
			   ? (int)(MCWATCH_HOLD_NS / 4000000) : timeout_ms;
		struct pollfd p = { .fd = w->fd, .events = POLLIN };
		int n = poll(&p, 1, wait);
		if (n == 0 && wait != timeout_ms)
			continue; /* only the sweep's turn */
		if (n <= 0)
			return n < 0 && errno != EINTR ? -1 : 0;
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
