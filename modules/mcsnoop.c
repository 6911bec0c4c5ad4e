/* SPDX-License-Identifier: MIT */
/* mcsnoop: every memcached command as it happens.
 *
 *   xprobes PID load --session build/modules/mcsnoop.so
 *   xprobes PID command mcsnoop.so read [MAX]   take up to MAX events (default 4096)
 *   xprobes PID command mcsnoop.so stats        totals per thread
 *
 * Handlers on memcached's command__* sites record one fixed-size event per
 * command (per key of a multi-get) into a ring of the worker thread's own
 * (modules/mcsnoop/ring.h): no lock, no write shared between workers, and
 * never a wait.  A full ring drops the event and counts it.
 *
 * Latency.  memcached fires process__command__start for every command it
 * parses and process__command__end whenever it starts writing replies
 * (text, meta and binary alike): after every get, and for other commands
 * once the read buffer is used up, a noreply command's skipped reply
 * included.  So a pipelined batch of stores has several starts and one
 * end.  Each thread keeps one open batch (a worker serves one connection
 * at a time): its connection, the time of its first start, and where the
 * last start's request was.  A command's event is reserved in the ring
 * but published only when the batch ends, with the latency from the
 * batch's first start to its end (so every command of a pipelined batch
 * gets the batch's latency).  A start continues the open batch when it is
 * on the same connection and further on in the same read buffer (request
 * higher, request + size unchanged: memcached advances rcurr and shrinks
 * rbytes as it parses); anything else (another connection, a new read)
 * closes the open batch first: its events are published with latency
 * unknown (-1).  That happens to a batch memcached ended without writing
 * anything at all, and to a command seen without a start of its batch
 * (the module was loaded mid-batch); the first events of a batch longer
 * than half a ring are published early, with latency unknown, to leave
 * room.
 *
 * Reading: `read` runs on the agent's command thread, one at a time, and
 * is each ring's only reader.  It merges the rings by time and prints
 *
 *   mcsnoop 1 now_ns=N
 *   TIME_NS TID CONN CMD RESULT SIZE LAT_NS KEYLEN KEY     (one per event)
 *   end events=N dropped=N more=0|1
 *
 * TIME_NS: CLOCK_MONOTONIC at the command__* site; TID: the worker's
 * kernel thread id; CONN: memcached's connid (the client socket's fd);
 * CMD: get set add replace append prepend cas touch incr decr delete;
 * RESULT: hit miss stored not_stored unknown; SIZE: value bytes, -1 none;
 * LAT_NS: -1 unknown; KEY: escaped (bytes outside 0x21..0x7e and '\' as
 * \xNN, so it holds no space), empty when KEYLEN is 0.  dropped: events
 * lost since the previous read (full rings, or a thread past
 * MCSNOOP_THREADS).  more=1: events were left for the next read (MAX, or
 * the agent's 1 MiB reply limit).
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memcached_probes.h"
#include "mcsnoop/ring.h"
#include "thread_slot.h"

#define MCSNOOP_THREADS 64
#define MCSNOOP_RING 4096 /* events per thread: 1.2 MB */
#define READ_DEFAULT 4096
#define REPLY_BUDGET ((1u << 20) - 8192) /* the agent's reply limit, less room for the end line */

/* One worker thread's state.  Everything but ring and tid is the writer's
 * own; the reader uses only ring and tid, which never change. */
struct snooper {
	struct mcsnoop_ring *ring;
	int32_t tid;
	int batch_conn;       /* connection of the open batch, -1 none */
	uint64_t batch_start; /* its first start, 0 unknown */
	uintptr_t batch_req;  /* request of its last start */
	uintptr_t batch_end;  /* request + size of its starts */
};

/* Slot i: owners[i] claims it (modules/thread_slot.h), snoopers[i] is its
 * state once made. */
static atomic_uintptr_t owners[MCSNOOP_THREADS];
static struct snooper *_Atomic snoopers[MCSNOOP_THREADS];
static atomic_uint_least64_t lost; /* events of threads that got no ring */
/* The reader's own: drops already reported, per slot and of `lost`. */
static uint64_t reported[MCSNOOP_THREADS], lost_reported;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The calling thread's snooper, made on its first hit; NULL (the event
 * counted as lost) if there is no slot or memory for it. */
static struct snooper *me(void)
{
	int i = thread_slot(owners, MCSNOOP_THREADS, NULL);
	if (i < 0)
		return NULL;
	struct snooper *s = atomic_load_explicit(&snoopers[i], memory_order_relaxed);
	if (s)
		return s;
	/* A cache line of its own: no false sharing with another writer's. */
	s = aligned_alloc(64, (sizeof(*s) + 63) & ~(size_t)63);
	if (!s)
		return NULL;
	s->ring = ring_create(MCSNOOP_RING);
	if (!s->ring) {
		free(s);
		return NULL;
	}
	s->tid = (int32_t)gettid();
	s->batch_conn = -1;
	s->batch_start = 0;
	s->batch_req = s->batch_end = 0;
	atomic_store_explicit(&snoopers[i], s, memory_order_release);
	return s;
}

/* Publish the open batch's events so far with the latency they have. */
static void publish(struct snooper *s, int64_t latency)
{
	uint32_t n = ring_unpublished(s->ring);
	for (uint32_t i = 0; i < n; i++)
		ring_unpublished_at(s->ring, i)->latency_ns = latency;
	if (n)
		ring_publish(s->ring);
}

static void close_batch(struct snooper *s, int64_t latency)
{
	publish(s, latency);
	s->batch_conn = -1;
}

static void on_start(int connid, const void *request, int size)
{
	struct snooper *s = me();
	if (!s)
		return;
	uintptr_t req = (uintptr_t)request, end = req + (uintptr_t)(size > 0 ? size : 0);
	if (s->batch_conn == connid && s->batch_start && req > s->batch_req && end == s->batch_end) {
		s->batch_req = req; /* the next command of a pipelined batch */
		return;
	}
	if (s->batch_conn != -1)
		close_batch(s, -1); /* it never ended: nothing written, or a yield */
	s->batch_conn = connid;
	s->batch_start = now_ns();
	s->batch_req = req;
	s->batch_end = end;
}

static void on_end(int connid, const void *response, int size)
{
	(void)response, (void)size;
	struct snooper *s = me();
	if (!s || s->batch_conn != connid)
		return;
	close_batch(s, s->batch_start ? (int64_t)(now_ns() - s->batch_start) : -1);
}

static void record(int connid, const char *key, int keylen, unsigned cmd, unsigned result,
		   int size)
{
	struct snooper *s = me();
	if (!s) {
		atomic_fetch_add_explicit(&lost, 1, memory_order_relaxed);
		return;
	}
	if (s->batch_conn != connid) { /* no start seen for this batch */
		if (s->batch_conn != -1)
			close_batch(s, -1);
		s->batch_conn = connid;
		s->batch_start = 0;
		s->batch_req = s->batch_end = 0;
	}
	/* A batch of thousands of commands (a long pipeline) must not fill
	 * the ring with events the reader cannot take: past half the ring,
	 * its first events go out with latency unknown. */
	if (ring_unpublished(s->ring) >= MCSNOOP_RING / 2)
		publish(s, -1);
	struct mcsnoop_event *e = ring_reserve(s->ring);
	if (!e)
		return; /* full: counted as the ring's drop */
	size_t len = keylen <= 0 ? 0 : keylen > MCSNOOP_KEY_MAX ? MCSNOOP_KEY_MAX : (size_t)keylen;
	e->time_ns = now_ns();
	e->latency_ns = -1;
	e->tid = s->tid;
	e->connid = connid;
	e->size = size >= 2 ? size - 2 : -1; /* memcached's nbytes holds "\r\n" */
	e->cmd = (uint8_t)cmd;
	e->result = (uint8_t)result;
	e->keylen = (uint16_t)len;
	memcpy(e->key, key, len);
}

/* Reads: hit or miss by the size memcached passes (-1 on a miss). */
#define READ_HANDLER(name, cmd)                                                              \
	static void on_##name(int connid, const char *key, int keylen, int size, int64_t casid) \
	{                                                                                    \
		(void)casid;                                                                 \
		record(connid, key, keylen, cmd, size < 0 ? MCS_MISS : MCS_HIT, size);       \
	}
/* Stores: -1 when the item was not stored. */
#define STORE_HANDLER(name, cmd)                                                             \
	static void on_##name(int connid, const char *key, int keylen, int size, int64_t casid) \
	{                                                                                    \
		(void)casid;                                                                 \
		record(connid, key, keylen, cmd, size < 0 ? MCS_NOT_STORED : MCS_STORED, size); \
	}
READ_HANDLER(get, MCS_GET)
READ_HANDLER(touch, MCS_TOUCH)
STORE_HANDLER(set, MCS_SET)
STORE_HANDLER(add, MCS_ADD)
STORE_HANDLER(replace, MCS_REPLACE)
STORE_HANDLER(append, MCS_APPEND)
STORE_HANDLER(prepend, MCS_PREPEND)

/* Text cas passes the item's size whether or not the cas matched. */
static void on_cas(int connid, const char *key, int keylen, int size, int64_t casid)
{
	(void)casid;
	record(connid, key, keylen, MCS_CAS, MCS_UNKNOWN, size);
}

/* incr, decr and delete fire on hits only. */
static void on_incr(int connid, const char *key, int keylen, int64_t val)
{
	(void)val;
	record(connid, key, keylen, MCS_INCR, MCS_HIT, -1);
}

static void on_decr(int connid, const char *key, int keylen, int64_t val)
{
	(void)val;
	record(connid, key, keylen, MCS_DECR, MCS_HIT, -1);
}

static void on_delete(int connid, const char *key, int keylen)
{
	record(connid, key, keylen, MCS_DELETE, MCS_HIT, -1);
}

/* ---- The reader: `read` and `stats` ---- */

/* Bytes outside 0x21..0x7e and '\' as \xNN; returns the length written
 * (out holds 4 * MCSNOOP_KEY_MAX + 1). */
static size_t escape_key(char *out, const char *key, unsigned len)
{
	static const char hex[] = "0123456789abcdef";
	char *o = out;
	for (unsigned i = 0; i < len; i++) {
		unsigned char c = (unsigned char)key[i];
		if (c > 0x20 && c < 0x7f && c != '\\') {
			*o++ = (char)c;
		} else {
			*o++ = '\\';
			*o++ = 'x';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o = '\0';
	return (size_t)(o - out);
}

struct cursor {
	struct mcsnoop_ring *ring;
	uint64_t pos, end;
};

/* Drops of every ring and lost events since the previous read. */
static uint64_t new_drops(void)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < MCSNOOP_THREADS; i++) {
		struct snooper *s = atomic_load_explicit(&snoopers[i], memory_order_acquire);
		if (!s)
			continue;
		uint64_t d = ring_drops(s->ring);
		n += d - reported[i];
		reported[i] = d;
	}
	uint64_t l = atomic_load_explicit(&lost, memory_order_relaxed);
	n += l - lost_reported;
	lost_reported = l;
	return n;
}

static void cmd_read(unsigned long max, int (*out)(const char *))
{
	struct cursor cur[MCSNOOP_THREADS];
	unsigned ncur = 0;
	char line[4 * MCSNOOP_KEY_MAX + 256];
	/* Drops first: an event dropped after this look shows in the next read. */
	uint64_t dropped = new_drops();
	for (unsigned i = 0; i < MCSNOOP_THREADS; i++) {
		struct snooper *s = atomic_load_explicit(&snoopers[i], memory_order_acquire);
		if (!s)
			continue;
		cur[ncur].ring = s->ring;
		cur[ncur].end = ring_readable(s->ring, &cur[ncur].pos);
		cur[ncur].end += cur[ncur].pos;
		ncur++;
	}
	snprintf(line, sizeof(line), "mcsnoop 1 now_ns=%llu\n", (unsigned long long)now_ns());
	out(line);
	size_t bytes = strlen(line);
	unsigned long taken = 0;
	int more = 0;
	for (;;) {
		/* The oldest next event of all rings: each ring is in time order. */
		struct cursor *c = NULL;
		for (unsigned i = 0; i < ncur; i++)
			if (cur[i].pos != cur[i].end &&
			    (!c || ring_at(cur[i].ring, cur[i].pos)->time_ns <
					   ring_at(c->ring, c->pos)->time_ns))
				c = &cur[i];
		if (!c)
			break;
		if (taken == max || bytes + sizeof(line) > REPLY_BUDGET) {
			more = 1;
			break;
		}
		struct mcsnoop_event e = *ring_at(c->ring, c->pos++);
		int n = snprintf(line, sizeof(line), "%llu %d %d %s %s %d %lld %u ",
				 (unsigned long long)e.time_ns, e.tid, e.connid,
				 e.cmd < MCS_NCMD ? mcsnoop_cmd_names[e.cmd] : "?",
				 e.result < MCS_NRESULT ? mcsnoop_result_names[e.result] : "?",
				 e.size, (long long)e.latency_ns, e.keylen);
		n += (int)escape_key(line + n, e.key, e.keylen);
		line[n++] = '\n';
		line[n] = '\0';
		bytes += (size_t)n;
		taken++;
		out(line);
	}
	for (unsigned i = 0; i < ncur; i++)
		ring_consume(cur[i].ring, cur[i].pos);
	snprintf(line, sizeof(line), "end events=%lu dropped=%llu more=%d\n", taken,
		 (unsigned long long)dropped, more);
	out(line);
}

static void cmd_stats(int (*out)(const char *))
{
	char line[160];
	uint64_t events = 0, unread = 0, drops = 0;
	unsigned threads = 0;
	for (unsigned i = 0; i < MCSNOOP_THREADS; i++) {
		struct snooper *s = atomic_load_explicit(&snoopers[i], memory_order_acquire);
		if (!s)
			continue;
		uint64_t from, n = ring_readable(s->ring, &from), d = ring_drops(s->ring);
		threads++;
		events += from + n;
		unread += n;
		drops += d;
		snprintf(line, sizeof(line), "thread %d events %llu unread %llu dropped %llu\n",
			 s->tid, (unsigned long long)(from + n), (unsigned long long)n,
			 (unsigned long long)d);
		out(line);
	}
	uint64_t l = atomic_load_explicit(&lost, memory_order_relaxed);
	snprintf(line, sizeof(line),
		 "total threads %u events %llu unread %llu dropped %llu capacity %u\n", threads,
		 (unsigned long long)events, (unsigned long long)unread,
		 (unsigned long long)(drops + l), MCSNOOP_RING);
	out(line);
}

static void command(const char *args, int (*out)(const char *))
{
	char word[16] = "", extra[2];
	unsigned long max = READ_DEFAULT;
	int n = 0;
	if (sscanf(args, "%15s%n", word, &n) != 1)
		goto usage;
	if (strcmp(word, "read") == 0) {
		const char *p = args + n;
		char *end;
		while (*p == ' ')
			p++;
		if (*p) {
			max = strtoul(p, &end, 10);
			if (end == p || *p == '-' || sscanf(end, "%1s", extra) == 1 || max == 0)
				goto usage;
		}
		cmd_read(max, out);
		return;
	}
	if (strcmp(word, "stats") == 0 && sscanf(args + n, "%1s", extra) != 1) {
		cmd_stats(out);
		return;
	}
usage:
	out("usage: command mcsnoop.so read [MAX] | stats\n");
}

/* Unload: no handler or command runs any more; free the rings. */
__attribute__((destructor)) static void free_rings(void)
{
	for (unsigned i = 0; i < MCSNOOP_THREADS; i++) {
		struct snooper *s = atomic_load(&snoopers[i]);
		if (s) {
			ring_destroy(s->ring);
			free(s);
		}
	}
}

XPROBES_MODULE(command, 0, MEMCACHED_BATCH_PROBES(on_), MEMCACHED_KEY_PROBES(on_));
