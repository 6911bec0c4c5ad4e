/* mctop --metrics ADDR:PORT: the top keys and the totals as Prometheus /
 * OpenMetrics text over HTTP (issue 10, "Beyond one host"; the names are
 * documented in docs/mctop-metrics.md).
 *
 * mctop_metrics_update renders the exposition on the caller's thread,
 * once per interval, into an immutable reference-counted snapshot and
 * swaps it in under a mutex: the UI never waits on a scraper, and a
 * scraper never sees half a frame.  The server thread is one poll() loop
 * over a few connection slots, every socket non-blocking and with a
 * deadline, so a scraper that connects and sends nothing, or stops
 * reading, holds one slot until its deadline and delays nobody else.
 * One request per connection (Connection: close) keeps it small.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mctop.h"

#define MM_SLOTS 16          /* connections served at once */
#define MM_REQ_MAX 8192      /* request line and headers; more is refused */
#define MM_READ_MS 5000      /* to send the whole request */
#define MM_WRITE_MS 10000    /* to take the whole answer: Prometheus' default scrape_timeout */
#define MM_DRAIN_MS 1000     /* to close after our answer (see conn_done) */
#define MM_REST_MS 100       /* accept() out of descriptors: rest before retrying */
#define MM_DEFAULT_ROWS 20   /* rows 0: the streams' default */

enum fmt { FMT_PROM, FMT_OM, FMT_N };

/* One rendered exposition in both formats.  Immutable once published;
 * refs is guarded by mctop_metrics.mu. */
struct snap {
	unsigned refs;
	char *text[FMT_N];
	size_t len[FMT_N];
};

enum conn_state { C_FREE, C_READ, C_WRITE, C_DRAIN };

struct conn {
	enum conn_state state;
	int fd;
	int64_t deadline;       /* CLOCK_MONOTONIC ms */
	uint64_t seq;           /* accept order */
	size_t got;             /* request bytes in req */
	char req[MM_REQ_MAX + 1];
	char head[512];         /* status line and headers of the answer */
	size_t head_len, sent;  /* sent counts head, then body */
	const char *body;
	size_t body_len;
	struct snap *snap;      /* held while a scrape is being written */
};

struct mctop_metrics {
	int lfd;
	int wake[2];            /* a byte on wake[1] stops the thread */
	pthread_t thread;
	size_t rows;
	pthread_mutex_t mu;
	struct snap *cur;       /* under mu; never NULL */
	int64_t rest_until;     /* accept() paused until then (ms) */
	uint64_t accepted;      /* connections so far: the next seq */
	struct conn conns[MM_SLOTS];
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- The exposition ---- */

/* Integers exactly (counts stay below 2^53), the rest with 15 digits, and
 * the spellings both formats accept for the non-finite. */
static void put_value(FILE *f, double v)
{
	if (isnan(v))
		fputs("NaN", f);
	else if (isinf(v))
		fputs(v > 0 ? "+Inf" : "-Inf", f);
	else if (v > -9e15 && v < 9e15 && v == (double)(long long)v)
		fprintf(f, "%lld", (long long)v);
	else
		fprintf(f, "%.15g", v);
}

/* A label value: backslash, double quote and newline escaped as both
 * formats require.  Keys come \xNN-escaped from the module already; any
 * other byte outside printable ASCII (a --prefix group name, say) is
 * written the module's way, \xNN, so the text stays valid UTF-8 and one
 * line per sample. */
static void put_label(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '\\')
			fputs("\\\\", f);
		else if (c == '"')
			fputs("\\\"", f);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20 || c > 0x7e)
			fprintf(f, "\\\\x%02x", c);
		else
			fputc(c, f);
	}
}

/* Sample names carry a suffix by type: a counter's samples end in _total
 * and an info's in _info.  OpenMetrics names the family without it; the
 * Prometheus 0.0.4 format has no info type (a gauge stands in) and names
 * every family by its samples. */
static const char *suffix(const char *type)
{
	return !strcmp(type, "counter") ? "_total" : !strcmp(type, "info") ? "_info" : "";
}

static void family(FILE *f, enum fmt fmt, const char *name, const char *type, const char *help)
{
	const char *sfx = fmt == FMT_OM ? "" : suffix(type);
	if (fmt == FMT_PROM && !strcmp(type, "info"))
		type = "gauge";
	fprintf(f, "# HELP %s%s %s\n# TYPE %s%s %s\n", name, sfx, help, name, sfx, type);
}

/* A family of one unlabelled sample. */
static void single(FILE *f, enum fmt fmt, const char *name, const char *type,
		   const char *help, double v)
{
	family(f, fmt, name, type, help);
	fprintf(f, "%s%s ", name, suffix(type));
	put_value(f, v);
	fputc('\n', f);
}

/* The per-key families: one sample per exported key; get answers 0 when
 * the key has no such value (no size or latency seen yet). */
struct key_family {
	const char *name, *type, *help;
	int (*get)(const struct mctop_key *k, double *v);
};

static int k_calls(const struct mctop_key *k, double *v) { *v = (double)k->calls; return 1; }
static int k_err(const struct mctop_key *k, double *v) { *v = (double)k->err; return 1; }
static int k_reqs(const struct mctop_key *k, double *v) { *v = k->reqs; return 1; }
static int k_bytes(const struct mctop_key *k, double *v) { *v = (double)k->bytes; return 1; }
static int k_bw(const struct mctop_key *k, double *v) { *v = k->bw_kbps * 125.0; return 1; }
static int k_clients(const struct mctop_key *k, double *v) { *v = (double)k->clients; return 1; }

static int k_size(const struct mctop_key *k, double *v)
{
	*v = (double)k->objsize;
	return k->objsize >= 0;
}

static int k_lat(const struct mctop_key *k, double *v)
{
	*v = k->lat_us / 1e6;
	return k->lat_us >= 0;
}

/* calls is a counter: the merged Space-Saving estimate of a key never
 * decreases while the module runs (a counter only grows, and a table
 * that evicts the key stands in its minimum, at least what the key had),
 * and a reset or a new module is a counter reset, which rate() handles. */
static const struct key_family key_families[] = {
	{"mctop_key_calls", "counter",
	 "Commands on the key since the module started counting, an upper bound: "
	 "the true count is at least mctop_key_calls_total - mctop_key_calls_error.", k_calls},
	{"mctop_key_calls_error", "gauge",
	 "The most mctop_key_calls_total can exceed the key's true count (Space-Saving).", k_err},
	{"mctop_key_requests_per_second", "gauge",
	 "Commands on the key per second over mctop's last interval (since attach with --cumulative).",
	 k_reqs},
	{"mctop_key_value_bytes", "counter",
	 "Value bytes the key's commands moved since it was first tracked.", k_bytes},
	{"mctop_key_bandwidth_bytes_per_second", "gauge",
	 "Value bytes per second over mctop's last interval (the table's BW(kbps) is this * 8 / 1000).",
	 k_bw},
	{"mctop_key_object_size_bytes", "gauge",
	 "The latest value size of the key (absent until one is seen).", k_size},
	{"mctop_key_latency_mean_seconds", "gauge",
	 "Mean latency of the key's commands over mctop's last interval (absent when none).", k_lat},
	{"mctop_key_clients", "gauge",
	 "Distinct connections that used the key, estimated.", k_clients},
};

/* Busiest first whatever order the UI shows; ties by key so that the
 * same keys are exported from one scrape to the next. */
static int by_calls(const void *a, const void *b)
{
	const struct mctop_key *x = *(const struct mctop_key *const *)a;
	const struct mctop_key *y = *(const struct mctop_key *const *)b;
	if (x->calls != y->calls)
		return x->calls > y->calls ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* Keys are not labelled by rank: a rank label would make a new series
 * each time two keys swap places. */
static void render_keys(FILE *f, enum fmt fmt, const struct mctop_key *const *sel, size_t n)
{
	for (size_t i = 0; i < sizeof(key_families) / sizeof(key_families[0]); i++) {
		const struct key_family *kf = &key_families[i];
		family(f, fmt, kf->name, kf->type, kf->help);
		for (size_t j = 0; j < n; j++) {
			double v;
			if (!kf->get(sel[j], &v))
				continue;
			fprintf(f, "%s%s{key=\"", kf->name, suffix(kf->type));
			put_label(f, sel[j]->key);
			fputs("\"} ", f);
			put_value(f, v);
			fputc('\n', f);
		}
	}
}

/* The whole exposition of frame fr (NULL: no frame yet) in one format. */
static void render(FILE *f, enum fmt fmt, const struct mctop_frame *fr, size_t rows,
		   const struct mctop_key *const *sel, size_t n, uint64_t bound, double now)
{
	single(f, fmt, "mctop_target_up", "gauge",
	       "1 once mctop has looked at memcached, 0 before.", fr != NULL);
	single(f, fmt, "mctop_key_rows", "gauge",
	       "The most keys exported (mctop -r): the per-key families hold at most this many series.",
	       (double)rows);
	if (fr) {
		family(f, fmt, "mctop_target", "info", "The memcached mctop is attached to.");
		fprintf(f, "mctop_target_info{pid=\"%d\",target=\"", (int)fr->pid);
		put_label(f, fr->target);
		fputs("\"} 1\n", f);
		single(f, fmt, "mctop_target_uptime_seconds", "gauge",
		       "How long memcached has been running.", fr->uptime_s);
		single(f, fmt, "mctop_last_update_timestamp_seconds", "gauge",
		       "When mctop last looked (Unix time).", now);
		single(f, fmt, "mctop_interval_seconds", "gauge",
		       "The span the per-second and mean values are over.", fr->span_s);
		single(f, fmt, "mctop_commands", "counter",
		       "Commands memcached ran since the module started counting, tracked or not.",
		       (double)fr->total);
		single(f, fmt, "mctop_commands_per_second", "gauge",
		       "Commands per second over mctop's last interval.", fr->cmds_per_s);
		single(f, fmt, "mctop_keys_tracked", "gauge",
		       "Keys holding a counter in the module's tables.", (double)fr->tracked);
		single(f, fmt, "mctop_keys_omitted", "gauge",
		       "Tracked keys not exported here plus commands no table could take.",
		       (double)(fr->omitted + (fr->nkeys - n)));
		single(f, fmt, "mctop_error_bound", "gauge",
		       "The most calls a key not exported can have had.", (double)bound);
		single(f, fmt, "mctop_memory_bytes", "gauge",
		       "Memory the module's tables use inside memcached.", (double)fr->used);
		single(f, fmt, "mctop_memory_budget_bytes", "gauge",
		       "The limit of the module's tables (mctop --budget).", (double)fr->budget);
		render_keys(f, fmt, sel, n);
	}
	if (fmt == FMT_OM)
		fputs("# EOF\n", f);
}

static void snap_free(struct snap *s)
{
	for (int i = 0; i < FMT_N; i++)
		free(s->text[i]);
	free(s);
}

/* Both formats of fr; NULL when out of memory. */
static struct snap *snap_new(const struct mctop_frame *fr, size_t rows)
{
	struct snap *s = calloc(1, sizeof(*s));
	const struct mctop_key **sel = NULL;
	size_t n = 0;
	uint64_t bound = 0;
	if (!s)
		return NULL;
	s->refs = 1;
	if (fr && fr->nkeys) {
		sel = malloc(fr->nkeys * sizeof(*sel));
		if (!sel)
			goto fail;
		for (size_t i = 0; i < fr->nkeys; i++)
			sel[i] = &fr->keys[i];
		qsort(sel, fr->nkeys, sizeof(*sel), by_calls);
		n = fr->nkeys < rows ? fr->nkeys : rows;
	}
	if (fr) {
		/* A frame may hold more keys than we export: the busiest left
		 * out raises the bound on every key not shown. */
		bound = fr->bound;
		if (n < fr->nkeys && sel[n]->calls > bound)
			bound = sel[n]->calls;
	}
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	double now = (double)wall.tv_sec + (double)(wall.tv_nsec / 1000000) / 1e3;
	for (int i = 0; i < FMT_N; i++) {
		FILE *f = open_memstream(&s->text[i], &s->len[i]);
		if (!f)
			goto fail;
		render(f, (enum fmt)i, fr, rows, sel, n, bound, now);
		if (fclose(f) != 0)
			goto fail;
	}
	free(sel);
	return s;
fail:
	free(sel);
	snap_free(s);
	return NULL;
}

static void snap_put(struct mctop_metrics *mm, struct snap *s)
{
	pthread_mutex_lock(&mm->mu);
	int last = --s->refs == 0;
	pthread_mutex_unlock(&mm->mu);
	if (last)
		snap_free(s);
}

void mctop_metrics_update(struct mctop_metrics *mm, const struct mctop_frame *f)
{
	if (!mm)
		return;
	struct snap *s = snap_new(f, mm->rows);
	if (!s)
		return; /* out of memory: scrapers keep the previous frame */
	pthread_mutex_lock(&mm->mu);
	struct snap *old = mm->cur;
	mm->cur = s;
	pthread_mutex_unlock(&mm->mu);
	snap_put(mm, old);
}

/* ---- HTTP ---- */

static const char om_type[] = "application/openmetrics-text; version=1.0.0; charset=utf-8";
static const char prom_type[] = "text/plain; version=0.0.4; charset=utf-8";
static const char index_page[] =
	"<html><head><title>mctop</title></head><body>\n"
	"<h1>mctop</h1>\n<p>memcached's hottest keys: <a href=\"/metrics\">/metrics</a></p>\n"
	"</body></html>\n";

static void conn_close(struct mctop_metrics *mm, struct conn *c)
{
	if (c->snap)
		snap_put(mm, c->snap);
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
	c->deadline = now_ms() + MM_WRITE_MS;
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
static void respond(struct mctop_metrics *mm, struct conn *c)
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
		answer(c, 200, "OK", "text/html; charset=utf-8", "", index_page,
		       sizeof(index_page) - 1, head);
	} else if (plen == 8 && !strncmp(target, "/metrics", 8)) {
		enum fmt fmt = wants_openmetrics(line_end + 1) ? FMT_OM : FMT_PROM;
		pthread_mutex_lock(&mm->mu);
		c->snap = mm->cur;
		c->snap->refs++;
		pthread_mutex_unlock(&mm->mu);
		answer(c, 200, "OK", fmt == FMT_OM ? om_type : prom_type, "",
		       c->snap->text[fmt], c->snap->len[fmt], head);
	} else {
		answer_text(c, 404, "Not Found", "", "not found: try /metrics\n", head);
	}
}

static void conn_read(struct mctop_metrics *mm, struct conn *c)
{
	ssize_t r = recv(c->fd, c->req + c->got, MM_REQ_MAX - c->got, 0);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		conn_close(mm, c); /* gone before asking anything */
		return;
	}
	c->got += (size_t)r;
	c->req[c->got] = '\0';
	if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n"))
		respond(mm, c);
	else if (c->got == MM_REQ_MAX)
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
	int64_t drain = now_ms() + MM_DRAIN_MS;
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

static void conn_drain(struct mctop_metrics *mm, struct conn *c)
{
	char buf[4096];
	ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
	if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
		conn_close(mm, c);
}

/* A free slot, or the oldest connection, closed to make room: a burst of
 * idle connections cannot keep new scrapes out. */
static struct conn *slot(struct mctop_metrics *mm)
{
	struct conn *oldest = &mm->conns[0];
	for (int i = 0; i < MM_SLOTS; i++) {
		struct conn *c = &mm->conns[i];
		if (c->state == C_FREE)
			return c;
		if (c->seq < oldest->seq)
			oldest = c;
	}
	conn_close(mm, oldest);
	return oldest;
}

static void accept_all(struct mctop_metrics *mm)
{
	for (;;) {
		int fd = accept4(mm->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				mm->rest_until = now_ms() + MM_REST_MS;
			return; /* EAGAIN, or an aborted connection: nothing to do */
		}
		struct conn *c = slot(mm);
		c->state = C_READ;
		c->fd = fd;
		c->seq = mm->accepted++;
		c->got = 0;
		c->req[0] = '\0';
		c->deadline = now_ms() + MM_READ_MS;
	}
}

static void *serve(void *arg)
{
	struct mctop_metrics *mm = arg;
	struct pollfd p[MM_SLOTS + 2];
	struct conn *pc[MM_SLOTS + 2];
	for (;;) {
		int64_t now = now_ms(), next = -1;
		int n = 0;
		p[n++] = (struct pollfd){.fd = mm->wake[0], .events = POLLIN};
		if (now >= mm->rest_until) {
			p[n++] = (struct pollfd){.fd = mm->lfd, .events = POLLIN};
		} else {
			next = mm->rest_until;
		}
		for (int i = 0; i < MM_SLOTS; i++) {
			struct conn *c = &mm->conns[i];
			if (c->state == C_FREE)
				continue;
			if (c->deadline <= now) {
				conn_close(mm, c); /* too slow: its slot goes to others */
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
			return NULL; /* mctop_metrics_stop */
		for (int i = 1; i < n; i++) {
			if (!p[i].revents)
				continue;
			if (p[i].fd == mm->lfd) {
				accept_all(mm);
				continue;
			}
			struct conn *c = pc[i];
			if (c->state == C_READ)
				conn_read(mm, c);
			else if (c->state == C_WRITE)
				conn_write(c);
			else if (c->state == C_DRAIN)
				conn_drain(mm, c);
		}
	}
}

/* ---- ADDR:PORT ---- */

/* "HOST:PORT", "[V6]:PORT" or ":PORT" (every address); 0 or -1 after a
 * message.  host is "" for every address. */
static int split_addr(const char *spec, char *host, size_t hostsz, const char **port)
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
	fprintf(stderr, "mctop: --metrics %s: expected ADDR:PORT, [IPv6]:PORT or :PORT "
		"(port 0: any free port)\n", spec);
	return -1;
}

/* The listening socket for spec; -1 after a message. */
static int listen_on(const char *spec)
{
	char host[256];
	const char *port;
	if (split_addr(spec, host, sizeof(host), &port) < 0)
		return -1;
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res;
	int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (rc) {
		fprintf(stderr, "mctop: --metrics %s: %s\n", spec, gai_strerror(rc));
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
			/* A restarted mctop rebinds despite old connections in
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
		fprintf(stderr, "mctop: --metrics %s: %s%s\n", spec, strerror(err),
			err == EADDRINUSE ? " (another program listens there: pick another port, "
					    "or port 0 for any free one)" : "");
	return fd;
}

/* Where we listen, for people and for tests that asked for port 0. */
static void announce(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN], port[8];
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV))
		return;
	int v6 = ss.ss_family == AF_INET6;
	fprintf(stderr, "mctop: metrics at http://%s%s%s:%s/metrics\n", v6 ? "[" : "", host,
		v6 ? "]" : "", port);
}

struct mctop_metrics *mctop_metrics_start(const char *addr, size_t rows)
{
	struct mctop_metrics *mm = calloc(1, sizeof(*mm));
	if (!mm) {
		fprintf(stderr, "mctop: --metrics: out of memory\n");
		return NULL;
	}
	mm->rows = rows ? rows : MM_DEFAULT_ROWS;
	mm->wake[0] = mm->wake[1] = -1;
	pthread_mutex_init(&mm->mu, NULL);
	mm->lfd = listen_on(addr);
	if (mm->lfd < 0)
		goto fail;
	mm->cur = snap_new(NULL, mm->rows);
	if (!mm->cur || pipe2(mm->wake, O_CLOEXEC) < 0) {
		fprintf(stderr, "mctop: --metrics: %s\n", strerror(mm->cur ? errno : ENOMEM));
		goto fail;
	}
	/* Signals (SIGINT, SIGWINCH) stay with mctop's main thread. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&mm->thread, NULL, serve, mm);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		fprintf(stderr, "mctop: --metrics: thread: %s\n", strerror(rc));
		goto fail;
	}
	pthread_setname_np(mm->thread, "mctop-metrics");
	announce(mm->lfd);
	return mm;
fail:
	if (mm->lfd >= 0)
		close(mm->lfd);
	for (int i = 0; i < 2; i++)
		if (mm->wake[i] >= 0)
			close(mm->wake[i]);
	if (mm->cur)
		snap_free(mm->cur);
	pthread_mutex_destroy(&mm->mu);
	free(mm);
	return NULL;
}

void mctop_metrics_stop(struct mctop_metrics *mm)
{
	if (!mm)
		return;
	while (write(mm->wake[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(mm->thread, NULL);
	for (int i = 0; i < MM_SLOTS; i++)
		if (mm->conns[i].state != C_FREE)
			conn_close(mm, &mm->conns[i]);
	close(mm->lfd);
	close(mm->wake[0]);
	close(mm->wake[1]);
	snap_free(mm->cur);
	pthread_mutex_destroy(&mm->mu);
	free(mm);
}
