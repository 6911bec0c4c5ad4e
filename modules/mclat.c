/* SPDX-License-Identifier: MIT */
/* mclat's user-space stage: when memcached started and ended
 * each batch of commands, per worker thread and connection.
 *
 *   xprobes PID load --session build/modules/mclat.so
 *   xprobes PID command mclat.so read [MAX]
 *   xprobes PID command mclat.so window open|close
 *
 * process__command__start opens a batch on the thread (a worker serves
 * one connection at a time) unless one is open on that connection
 * already: the further commands of a pipelined read buffer continue it.
 * process__command__end (memcached starts writing replies) closes it and
 * records (connid, start, end).  Times are CLOCK_MONOTONIC, the clock
 * of bpf_ktime_get_ns(), so mclat joins them with its kernel events by
 * (thread id, connid = the socket's fd) and time.  A batch with no end
 * (a noreply store) is replaced by the next start on another connection.
 *
 * Sampling (mclat's default): `window open` and `window close`
 * bracket each of mclat's windows; outside them process__command__start
 * returns after one load.  A batch opened inside a window is recorded
 * even if it ends after the window closed, so that mclat sees it and
 * counts it as cut; each window has a generation so that a batch left
 * open by the last window (a noreply store) is never continued by this
 * one.  Loaded, the module is open (mclat --all never closes it).
 *
 * Slow requests (mclat --slow, with `xprobes PID trace record --requests`
 * running): `slow NS` (0: off) makes process__command__start open the
 * tracer's recording for its thread and process__command__end close it,
 * keeping the function graph in between when it took NS or more, labelled
 * "COMMAND KEY TIME" (the key as its key text, cut to fit the tracer's
 * label; TIME as 1.234ms).  Commands with no end between them
 * on one connection (a noreply store, then the next command of the read)
 * are one request, named by its slowest command and "+N" for the N
 * others.  Independent of the windows.
 *
 * Each thread writes a ring of its own, never waits, and counts what a
 * full ring drops.  `read` (the agent's command thread, the only reader)
 * prints
 *
 *   mclat 1 now_ns=N
 *   TID CONN START_NS END_NS       (one per batch, per thread in order)
 *   end records=N dropped=N more=0|1
 *
 * now_ns is taken before the rings are looked at: every batch that ended
 * before it minus a publication's few ns is in this reply or an earlier one.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xprobes/probe.h>

#include "../tools/common/keytext_rule.h"
#include "memcached_probes.h"
#include "thread_slot.h"

#define MCLAT_THREADS 64
#define MCLAT_RING 16384 /* batches per thread (power of two): 384 KiB, 100 ms at 160k/s */
#define READ_DEFAULT 8192
#define REPLY_BUDGET ((1u << 20) - 4096) /* the agent's reply limit, less the end line */

/* The tracer keeps this much of a request's label. */
#define LABEL_MAX 49

/* A command's name and (the start of) its key, for a label. */
struct slow_cmd {
	char cmd[16];
	unsigned char key[48];
	unsigned keylen;
};

struct batch {
	uint64_t start_ns, end_ns;
	int32_t conn, pad;
};

/* One worker's ring and open batch.  head, drops and the open batch are
 * the writer's; tail is the reader's. */
struct worker {
	_Alignas(64) atomic_uint_least64_t tail;
	_Alignas(64) atomic_uint_least64_t head;
	atomic_uint_least64_t drops;
	int32_t tid;
	int open_conn; /* -1: none */
	unsigned open_gen; /* the window it was opened in */
	uint64_t open_start;
	/* --slow: the request recording open, on which connection, since
	 * when, with how many commands after the first; the command in
	 * progress and the slowest one done. */
	int req, req_conn;
	unsigned req_more;
	uint64_t req_start, cur_start, slowest_ns;
	struct slow_cmd cur, slowest;
	struct batch ring[MCLAT_RING];
};

static atomic_uintptr_t owners[MCLAT_THREADS];
static struct worker *_Atomic workers[MCLAT_THREADS];
static atomic_uint_least64_t lost; /* batches of threads past MCLAT_THREADS */
static atomic_int window_open = 1;
static atomic_uint window_gen;
static uint64_t reported_drops;    /* the reader's */
static atomic_uint_least64_t slow_ns; /* --slow's threshold; 0: off */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct worker *me(void)
{
	int i = thread_slot(owners, MCLAT_THREADS, NULL);
	if (i < 0) {
		atomic_fetch_add_explicit(&lost, 1, memory_order_relaxed);
		return NULL;
	}
	struct worker *w = atomic_load_explicit(&workers[i], memory_order_relaxed);
	if (w)
		return w;
	w = aligned_alloc(64, (sizeof(*w) + 63) & ~(size_t)63);
	if (!w)
		return NULL;
	atomic_init(&w->tail, 0);
	atomic_init(&w->head, 0);
	atomic_init(&w->drops, 0);
	w->tid = (int32_t)gettid();
	w->open_conn = -1;
	w->open_start = 0;
	w->req = 0;
	atomic_store_explicit(&workers[i], w, memory_order_release);
	return w;
}

/* The command's first two words (a text-protocol command ends its line;
 * memcached has put a NUL there). */
static void parse_command(struct slow_cmd *c, const char *request, int size)
{
	const char *p = request, *end = request + (size > 0 ? size : 0);
	size_t n = 0;
	if (p < end && (unsigned char)*p == 0x80) { /* the binary protocol's magic */
		strcpy(c->cmd, "binary");
		c->keylen = 0;
		return;
	}
	while (p < end && *p && *p != ' ' && *p != '\r' && *p != '\n') {
		if (n < sizeof(c->cmd) - 1)
			c->cmd[n++] = *p;
		p++;
	}
	c->cmd[n] = '\0';
	while (p < end && *p == ' ')
		p++;
	for (n = 0; p < end && *p && *p != ' ' && *p != '\r' && *p != '\n'; p++)
		if (n < sizeof(c->key))
			c->key[n++] = (unsigned char)*p;
	c->keylen = (unsigned)n;
}

/* The command in progress ends now: the slowest so far of the request? */
static void command_done(struct worker *w, uint64_t now)
{
	if (now - w->cur_start >= w->slowest_ns) {
		w->slowest_ns = now - w->cur_start;
		w->slowest = w->cur;
	}
}

/* A command starts.  Commands with no end between them on a connection
 * (a noreply store has none) are one request, named by the one that took
 * longest (from its start to the next one's). */
static void slow_begin(struct worker *w, int connid, const char *request, int size)
{
	uint64_t now = now_ns();
	if (w->req && w->req_conn == connid) {
		command_done(w, now);
		w->req_more++;
	} else {
		/* A request left open (a noreply store) is dropped by this begin. */
		w->req = xprobes_trace_request_begin() == 0;
		w->req_conn = connid;
		w->req_start = now;
		w->req_more = 0;
		w->slowest_ns = 0;
	}
	w->cur_start = now;
	parse_command(&w->cur, request, size);
}

static void slow_end(struct worker *w)
{
	uint64_t now = now_ns(), took = now - w->req_start,
		 min = atomic_load_explicit(&slow_ns, memory_order_relaxed);
	w->req = 0;
	if (!min || took < min) {
		xprobes_trace_request_end(0, NULL);
		return;
	}
	command_done(w, now);
	/* The tracer keeps 49 bytes of a label: the time always, the key
	 * cut (whole characters) to what is left.  The key text as the
	 * tools show it, UTF-8 and all: the recording names the request's
	 * call by it (a symbol, whose name may hold any character). */
	char t[48], key[49], label[112];
	int tn = snprintf(t, sizeof(t), " %llu.%03llums", (unsigned long long)(took / 1000000),
			  (unsigned long long)(took / 1000 % 1000));
	if (w->req_more)
		tn = snprintf(t, sizeof(t), " +%u %llu.%03llums", w->req_more,
			      (unsigned long long)(took / 1000000),
			      (unsigned long long)(took / 1000 % 1000));
	size_t used = strlen(w->slowest.cmd) + 1 + (size_t)tn,
	       room = used < LABEL_MAX ? LABEL_MAX - used : 0;
	keytext_rule_from_bytes(w->slowest.key, w->slowest.keylen, key,
				room < sizeof(key) ? room + 1 : sizeof(key), 0);
	snprintf(label, sizeof(label), "%s%s%s%s", w->slowest.cmd, key[0] ? " " : "", key, t);
	xprobes_trace_request_end(1, label);
}

static void on_start(int connid, const void *request, int size)
{
	if (atomic_load_explicit(&slow_ns, memory_order_relaxed)) {
		struct worker *w = me();
		if (w)
			slow_begin(w, connid, request, size);
	}
	if (!atomic_load_explicit(&window_open, memory_order_relaxed))
		return;
	unsigned gen = atomic_load_explicit(&window_gen, memory_order_relaxed);
	struct worker *w = me();
	if (w && (w->open_conn != connid || w->open_gen != gen)) {
		w->open_conn = connid;
		w->open_gen = gen;
		w->open_start = now_ns();
	}
}

static void on_end(int connid, const void *response, int size)
{
	(void)response, (void)size;
	struct worker *w = me();
	if (w && w->req)
		slow_end(w);
	if (!w || w->open_conn != connid)
		return;
	w->open_conn = -1;
	uint64_t head = atomic_load_explicit(&w->head, memory_order_relaxed);
	if (head - atomic_load_explicit(&w->tail, memory_order_acquire) >= MCLAT_RING) {
		atomic_store_explicit(&w->drops,
				      atomic_load_explicit(&w->drops, memory_order_relaxed) + 1,
				      memory_order_relaxed);
		return;
	}
	struct batch *b = &w->ring[head % MCLAT_RING];
	b->start_ns = w->open_start;
	b->end_ns = now_ns();
	b->conn = connid;
	atomic_store_explicit(&w->head, head + 1, memory_order_release);
}

static void cmd_read(unsigned long max, int (*out)(const char *))
{
	char line[128];
	snprintf(line, sizeof(line), "mclat 1 now_ns=%llu\n", (unsigned long long)now_ns());
	out(line);
	size_t bytes = strlen(line);
	unsigned long taken = 0;
	uint64_t drops = atomic_load_explicit(&lost, memory_order_relaxed);
	int more = 0;
	for (unsigned i = 0; i < MCLAT_THREADS; i++) {
		struct worker *w = atomic_load_explicit(&workers[i], memory_order_acquire);
		if (!w)
			continue;
		drops += atomic_load_explicit(&w->drops, memory_order_relaxed);
		uint64_t pos = atomic_load_explicit(&w->tail, memory_order_relaxed);
		uint64_t head = atomic_load_explicit(&w->head, memory_order_acquire);
		for (; pos != head; pos++) {
			if (taken == max || bytes + sizeof(line) > REPLY_BUDGET) {
				more = 1;
				break;
			}
			struct batch b = w->ring[pos % MCLAT_RING];
			int n = snprintf(line, sizeof(line), "%d %d %llu %llu\n", w->tid, b.conn,
					 (unsigned long long)b.start_ns, (unsigned long long)b.end_ns);
			bytes += (size_t)n;
			taken++;
			out(line);
		}
		atomic_store_explicit(&w->tail, pos, memory_order_release);
	}
	snprintf(line, sizeof(line), "end records=%lu dropped=%llu more=%d\n", taken,
		 (unsigned long long)(drops - reported_drops), more);
	reported_drops = drops;
	out(line);
}

static void command(const char *args, int (*out)(const char *))
{
	char word[16] = "", extra[2];
	unsigned long max = READ_DEFAULT;
	int n = 0;
	if (sscanf(args, "%15s%n", word, &n) == 1 && strcmp(word, "window") == 0) {
		char how[8] = "";
		if (sscanf(args + n, "%7s%1s", how, extra) == 1 &&
		    (strcmp(how, "open") == 0 || strcmp(how, "close") == 0)) {
			int open = how[0] == 'o';
			if (open)
				atomic_fetch_add_explicit(&window_gen, 1, memory_order_relaxed);
			atomic_store_explicit(&window_open, open, memory_order_relaxed);
			out(open ? "window open\n" : "window closed\n");
			return;
		}
	} else if (sscanf(args, "%15s%n", word, &n) == 1 && strcmp(word, "slow") == 0) {
		unsigned long long ns;
		char line[48];
		if (sscanf(args + n, "%llu%1s", &ns, extra) == 1 && args[n + strspn(args + n, " ")] != '-') {
			atomic_store_explicit(&slow_ns, ns, memory_order_relaxed);
			snprintf(line, sizeof(line), "slow %llu\n", ns);
			out(line);
			return;
		}
	} else if (sscanf(args, "%15s%n", word, &n) == 1 && strcmp(word, "read") == 0) {
		const char *p = args + n;
		char *end;
		while (*p == ' ')
			p++;
		if (!*p) {
			cmd_read(max, out);
			return;
		}
		max = strtoul(p, &end, 10);
		if (end != p && *p != '-' && sscanf(end, "%1s", extra) != 1 && max) {
			cmd_read(max, out);
			return;
		}
	}
	out("usage: command mclat.so read [MAX] | window open|close | slow NS\n");
}

/* Unload: no handler or command runs any more. */
__attribute__((destructor)) static void free_workers(void)
{
	for (unsigned i = 0; i < MCLAT_THREADS; i++)
		free(atomic_load(&workers[i]));
}

XPROBES_MODULE(command, 0, MEMCACHED_BATCH_PROBES(on_));
