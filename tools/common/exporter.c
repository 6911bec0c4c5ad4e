/* SPDX-License-Identifier: MIT */
/* The --metrics exporter the tools share (mctop's, then mclat's
 * next): a text body, rendered by the tool's own callback in the
 * Prometheus and OpenMetrics formats, served over HTTP from a thread of
 * its own.
 *
 * exporter_publish renders on the caller's thread, once per interval,
 * into an immutable reference-counted snapshot and swaps it in under a
 * mutex: the tool's loop never waits on a scraper, and a scraper never
 * sees half a body.  The server thread is one poll() loop over a few
 * connection slots, every socket non-blocking and with a deadline, so a
 * scraper that connects and sends nothing, or stops reading, holds one
 * slot until its deadline and delays nobody else.  One request per
 * connection (Connection: close) keeps it small.  Why not Debian's
 * libmicrohttpd: docs/mctop-metrics.md, "HTTP". */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define EX_SLOTS 16          /* connections served at once */
#define EX_REQ_MAX 8192      /* request line and headers; more is refused */
#define EX_READ_MS 5000      /* to send the whole request */
#define EX_WRITE_MS 10000    /* to take the whole answer: Prometheus' default scrape_timeout */
#define EX_DRAIN_MS 1000     /* to close after our answer (see conn_done) */
#define EX_REST_MS 100       /* accept() out of descriptors: rest before retrying */

/* One rendered body in both formats.  Immutable once published; refs is
 * guarded by exporter.mu. */
struct snap {
	unsigned refs;
	char *text[EXPO_NFORMATS];
	size_t len[EXPO_NFORMATS];
};

enum conn_state { C_FREE, C_READ, C_WRITE, C_DRAIN };

struct conn {
	enum conn_state state;
	int fd;
	int64_t deadline;       /* CLOCK_MONOTONIC ms */
	uint64_t seq;           /* accept order */
	size_t got;             /* request bytes in req */
	char req[EX_REQ_MAX + 1];
	char head[512];         /* status line and headers of the answer */
	size_t head_len, sent;  /* sent counts head, then body */
	const char *body;
	size_t body_len;
	struct snap *snap;      /* held while a scrape is being written */
};

struct exporter {
	struct exporter_conf conf;
	char *index_page;       /* what GET / answers */
	int lfd;
	int wake[2];            /* a byte on wake[1] stops the thread */
	pthread_t thread;
	pthread_mutex_t mu;
	struct snap *cur;       /* under mu; never NULL */
	int64_t rest_until;     /* accept() paused until then (ms) */
	uint64_t accepted;      /* connections so far: the next seq */
	struct conn conns[EX_SLOTS];
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- Snapshots ---- */

static void snap_free(struct snap *s)
{
	for (int i = 0; i < EXPO_NFORMATS; i++)
		free(s->text[i]);
	free(s);
}

/* Both formats of data, rendered by the tool; NULL when out of memory or
 * the renderer failed. */
static struct snap *snap_new(const struct exporter_conf *conf, const void *data)
{
	struct snap *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->refs = 1;
	for (int i = 0; i < EXPO_NFORMATS; i++) {
		FILE *f = open_memstream(&s->text[i], &s->len[i]);
		if (!f)
			goto fail;
		int rc = conf->render(f, (enum expo_format)i, data);
		if (fclose(f) != 0 || rc != 0)
			goto fail;
	}
	return s;
fail:
	snap_free(s);
	return NULL;
}

static void snap_put(struct exporter *ex, struct snap *s)
{
	pthread_mutex_lock(&ex->mu);
	int last = --s->refs == 0;
	pthread_mutex_unlock(&ex->mu);
	if (last)
		snap_free(s);
}

int exporter_publish(struct exporter *ex, const void *data)
{
	if (!ex)
		return 0;
	struct snap *s = snap_new(&ex->conf, data);
	if (!s)
		return -1; /* scrapers keep the previous body */
	pthread_mutex_lock(&ex->mu);
	struct snap *old = ex->cur;
	ex->cur = s;
	pthread_mutex_unlock(&ex->mu);
	snap_put(ex, old);
	return 0;
}

/* ---- HTTP ---- */

static const char om_type[] = "application/openmetrics-text; version=1.0.0; charset=utf-8";
static const char prom_type[] = "text/plain; version=0.0.4; charset=utf-8";

static void conn_close(struct exporter *ex, struct conn *c)
{
	if (c->snap)
		snap_put(ex, c->snap);
	close(c->fd);
	c->snap = NULL;
	c->state = C_FREE;
}

static void answer(struct conn *c, int status, const char *reason, const char *type,
		   const char *extra, const char *body, size_t len, int head_only)
{
	int n = snprintf(c->head, sizeof(c->head),
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Cache-Control: no-store\r\nConnection: close\r\n%s\r\n",
			 status, reason, type, len, extra);
	c->head_len = n > 0 && (size_t)n < sizeof(c->head) ? (size_t)n : 0;
	c->body = body;
	c->body_len = head_only ? 0 : len;
	c->sent = 0;
	c->state = C_WRITE;
	c->deadline = now_ms() + EX_WRITE_MS;
}

static void answer_text(struct conn *c, int status, const char *reason, const char *extra,
			const char *text, int head_only)
{
	answer(c, status, reason, "text/plain; charset=utf-8", extra, text, strlen(text),
	       head_only);
}

/* Does the Accept header ask for OpenMetrics?  Prometheus lists it first
 * with the highest q; anything naming it is taken at its word. */
static int wants_openmetrics(const char *headers)
{
	for (const char *l = headers; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (*l == '\r' || *l == '\n')
			break; /* the blank line: what follows is a body */
		if (strncasecmp(l, "accept:", 7))
			continue;
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);
		char *v = strndup(l + 7, len - 7);
		int om = v && strcasestr(v, "application/openmetrics-text") != NULL;
		free(v);
		if (om)
			return 1;
	}
	return 0;
}

/* The request is in c->req (NUL-terminated, headers complete). */
static void respond(struct exporter *ex, struct conn *c)
{
	char *line_end = strchr(c->req, '\n');
	char *sp1 = strchr(c->req, ' ');
	char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!line_end || !sp1 || !sp2 || sp2 > line_end || strncmp(sp2 + 1, "HTTP/1.", 7)) {
		answer_text(c, 400, "Bad Request", "", "bad request\n", 0);
		return;
	}
	*sp1 = *sp2 = '\0';
	const char *method = c->req, *target = sp1 + 1;
	int head = !strcmp(method, "HEAD");
	if (!head && strcmp(method, "GET")) {
		answer_text(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n",
			    "only GET /metrics\n", 0);
		return;
	}
	size_t plen = strcspn(target, "?#");
	if (plen == 1 && target[0] == '/') {
		answer(c, 200, "OK", "text/html; charset=utf-8", "", ex->index_page,
		       strlen(ex->index_page), head);
	} else if (plen == 8 && !strncmp(target, "/metrics", 8)) {
		enum expo_format fmt = wants_openmetrics(line_end + 1) ? EXPO_OPENMETRICS : EXPO_PROMETHEUS;
		pthread_mutex_lock(&ex->mu);
		c->snap = ex->cur;
		c->snap->refs++;
		pthread_mutex_unlock(&ex->mu);
		answer(c, 200, "OK", fmt == EXPO_OPENMETRICS ? om_type : prom_type, "",
		       c->snap->text[fmt], c->snap->len[fmt], head);
	} else {
		answer_text(c, 404, "Not Found", "", "not found: try /metrics\n", head);
	}
}

static void conn_read(struct exporter *ex, struct conn *c)
{
	ssize_t r = recv(c->fd, c->req + c->got, EX_REQ_MAX - c->got, 0);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		conn_close(ex, c); /* gone before asking anything */
		return;
	}
	c->got += (size_t)r;
	c->req[c->got] = '\0';
	if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n"))
		respond(ex, c);
	else if (c->got == EX_REQ_MAX)
		answer_text(c, 431, "Request Header Fields Too Large", "", "request too large\n", 0);
}

/* Our answer is out.  Closing now with unread request bytes (a POST's
 * body) would reset the connection and could destroy the answer before
 * the client read it, so: half-close, and read until the client closes
 * or a short deadline passes. */
static void conn_done(struct conn *c)
{
	shutdown(c->fd, SHUT_WR);
	c->state = C_DRAIN;
	int64_t drain = now_ms() + EX_DRAIN_MS;
	if (drain < c->deadline)
		c->deadline = drain;
}

static void conn_write(struct conn *c)
{
	while (c->sent < c->head_len + c->body_len) {
		const char *p;
		size_t left;
		if (c->sent < c->head_len) {
			p = c->head + c->sent;
			left = c->head_len - c->sent;
		} else {
			p = c->body + (c->sent - c->head_len);
			left = c->body_len - (c->sent - c->head_len);
		}
		ssize_t w = send(c->fd, p, left, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		if (w < 0) {
			c->deadline = 0; /* the client is gone: closed by the sweep */
			return;
		}
		c->sent += (size_t)w;
	}
	conn_done(c);
}

static void conn_drain(struct exporter *ex, struct conn *c)
{
	char buf[4096];
	ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
	if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
		conn_close(ex, c);
}

/* A free slot, or the oldest connection, closed to make room: a burst of
 * idle connections cannot keep new scrapes out. */
static struct conn *slot(struct exporter *ex)
{
	struct conn *oldest = &ex->conns[0];
	for (int i = 0; i < EX_SLOTS; i++) {
		struct conn *c = &ex->conns[i];
		if (c->state == C_FREE)
			return c;
		if (c->seq < oldest->seq)
			oldest = c;
	}
	conn_close(ex, oldest);
	return oldest;
}

static void accept_all(struct exporter *ex)
{
	for (;;) {
		int fd = accept4(ex->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				ex->rest_until = now_ms() + EX_REST_MS;
			return; /* EAGAIN, or an aborted connection: nothing to do */
		}
		struct conn *c = slot(ex);
		c->state = C_READ;
		c->fd = fd;
		c->seq = ex->accepted++;
		c->got = 0;
		c->req[0] = '\0';
		c->deadline = now_ms() + EX_READ_MS;
	}
}

static void *serve(void *arg)
{
	struct exporter *ex = arg;
	struct pollfd p[EX_SLOTS + 2];
	struct conn *pc[EX_SLOTS + 2];
	for (;;) {
		int64_t now = now_ms(), next = -1;
		int n = 0;
		p[n++] = (struct pollfd){.fd = ex->wake[0], .events = POLLIN};
		if (now >= ex->rest_until) {
			p[n++] = (struct pollfd){.fd = ex->lfd, .events = POLLIN};
		} else {
			next = ex->rest_until;
		}
		for (int i = 0; i < EX_SLOTS; i++) {
			struct conn *c = &ex->conns[i];
			if (c->state == C_FREE)
				continue;
			if (c->deadline <= now) {
				conn_close(ex, c); /* too slow: its slot goes to others */
				continue;
			}
			if (next < 0 || c->deadline < next)
				next = c->deadline;
			pc[n] = c;
			p[n++] = (struct pollfd){
				.fd = c->fd, .events = c->state == C_WRITE ? POLLOUT : POLLIN};
		}
		int timeout = next < 0 ? -1 : (int)(next - now);
		if (poll(p, (nfds_t)n, timeout) < 0 && errno != EINTR)
			return NULL;
		if (p[0].revents)
			return NULL; /* exporter_stop */
		for (int i = 1; i < n; i++) {
			if (!p[i].revents)
				continue;
			if (p[i].fd == ex->lfd) {
				accept_all(ex);
				continue;
			}
			struct conn *c = pc[i];
			if (c->state == C_READ)
				conn_read(ex, c);
			else if (c->state == C_WRITE)
				conn_write(c);
			else if (c->state == C_DRAIN)
				conn_drain(ex, c);
		}
	}
}

/* ---- ADDR:PORT ---- */

/* "HOST:PORT", "[V6]:PORT" or ":PORT" (every address); 0 or -1 after a
 * message.  host is "" for every address. */
static int split_addr(const char *prog, const char *spec, char *host, size_t hostsz,
		      const char **port)
{
	const char *colon;
	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');
		if (!close || close == spec + 1 || close[1] != ':')
			goto bad; /* "[]" names no address: ":PORT" is every one */
		if ((size_t)(close - spec - 1) >= hostsz)
			goto bad;
		memcpy(host, spec + 1, (size_t)(close - spec - 1));
		host[close - spec - 1] = '\0';
		colon = close + 1;
	} else {
		colon = strrchr(spec, ':');
		if (!colon || memchr(spec, ':', (size_t)(colon - spec)))
			goto bad; /* no port, or an IPv6 address without brackets */
		if ((size_t)(colon - spec) >= hostsz)
			goto bad;
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = '\0';
	}
	*port = colon + 1;
	if (!**port || strspn(*port, "0123456789") != strlen(*port) || strlen(*port) > 5 ||
	    atoi(*port) > 65535)
		goto bad;
	return 0;
bad:
	fprintf(stderr, "%s: --metrics %s: expected ADDR:PORT, [IPv6]:PORT or :PORT "
		"(port 0: any free port)\n", prog, spec);
	return -1;
}

/* The listening socket for spec; -1 after a message. */
static int listen_on(const char *prog, const char *spec)
{
	char host[256];
	const char *port;
	if (split_addr(prog, spec, host, sizeof(host), &port) < 0)
		return -1;
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res;
	int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (rc) {
		fprintf(stderr, "%s: --metrics %s: %s\n", prog, spec, gai_strerror(rc));
		return -1;
	}
	/* Every address: IPv6's wildcard, which also takes IPv4, first. */
	int fd = -1, err = 0;
	for (int pass = 0; pass < 2 && fd < 0; pass++) {
		for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
			if ((ai->ai_family == AF_INET6) != (pass == 0))
				continue;
			fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
			if (fd < 0) {
				err = errno;
				continue;
			}
			int one = 1, zero = 0;
			/* A restarted tool rebinds despite old connections in
			 * TIME_WAIT; a port another process listens on still fails. */
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (ai->ai_family == AF_INET6 && !host[0])
				setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
			if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
				err = errno;
				close(fd);
				fd = -1;
			}
		}
	}
	freeaddrinfo(res);
	if (fd < 0)
		fprintf(stderr, "%s: --metrics %s: %s%s\n", prog, spec, strerror(err),
			err == EADDRINUSE ? " (another program listens there: pick another port, "
					    "or port 0 for any free one)" : "");
	return fd;
}

/* Where we listen, for people and for tests that asked for port 0. */
static void announce(const char *prog, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN], port[8];
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV))
		return;
	int v6 = ss.ss_family == AF_INET6;
	fprintf(stderr, "%s: metrics at http://%s%s%s:%s/metrics\n", prog, v6 ? "[" : "", host,
		v6 ? "]" : "", port);
}

struct exporter *exporter_start(const char *addr, const struct exporter_conf *conf,
				const void *first)
{
	const char *prog = conf->prog;
	struct exporter *ex = calloc(1, sizeof(*ex));
	if (!ex) {
		fprintf(stderr, "%s: --metrics: out of memory\n", prog);
		return NULL;
	}
	ex->conf = *conf;
	ex->lfd = ex->wake[0] = ex->wake[1] = -1;
	pthread_mutex_init(&ex->mu, NULL);
	ex->lfd = listen_on(prog, addr);
	if (ex->lfd < 0)
		goto fail;
	if (asprintf(&ex->index_page,
		     "<html><head><title>%s</title></head><body>\n"
		     "<h1>%s</h1>\n<p>%s: <a href=\"/metrics\">/metrics</a></p>\n"
		     "</body></html>\n", prog, prog, conf->about) < 0)
		ex->index_page = NULL;
	ex->cur = snap_new(&ex->conf, first);
	if (!ex->index_page || !ex->cur || pipe2(ex->wake, O_CLOEXEC) < 0) {
		fprintf(stderr, "%s: --metrics: %s\n", prog,
			strerror(ex->index_page && ex->cur ? errno : ENOMEM));
		goto fail;
	}
	/* Signals (SIGINT, SIGWINCH) stay with the tool's main thread. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&ex->thread, NULL, serve, ex);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		fprintf(stderr, "%s: --metrics: thread: %s\n", prog, strerror(rc));
		goto fail;
	}
	char name[16]; /* the kernel's limit, NUL included */
	snprintf(name, sizeof(name), "%s-metrics", prog);
	pthread_setname_np(ex->thread, name);
	announce(prog, ex->lfd);
	return ex;
fail:
	if (ex->lfd >= 0)
		close(ex->lfd);
	for (int i = 0; i < 2; i++)
		if (ex->wake[i] >= 0)
			close(ex->wake[i]);
	if (ex->cur)
		snap_free(ex->cur);
	free(ex->index_page);
	pthread_mutex_destroy(&ex->mu);
	free(ex);
	return NULL;
}

void exporter_stop(struct exporter *ex)
{
	if (!ex)
		return;
	while (write(ex->wake[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(ex->thread, NULL);
	for (int i = 0; i < EX_SLOTS; i++)
		if (ex->conns[i].state != C_FREE)
			conn_close(ex, &ex->conns[i]);
	close(ex->lfd);
	close(ex->wake[0]);
	close(ex->wake[1]);
	snap_free(ex->cur);
	free(ex->index_page);
	pthread_mutex_destroy(&ex->mu);
	free(ex);
}
