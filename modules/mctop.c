/* mctop: memcached's hottest keys, counted inside memcached (issue 10).
 *
 *   xprobes PID load build/modules/mctop.so
 *   xprobes PID command mctop.so top [N] [json]   busiest N keys (default 20)
 *   xprobes PID command mctop.so reset            forget every key
 *
 * Handlers on every command__* site memcached's dtrace build has (get is
 * per key of a multi-get, hits and misses), typed as memcached_dtrace.d
 * declares them.  Keys are read by keylen, never as C strings.
 *
 * Hot path: each worker thread counts into its own Space-Saving table
 * (modules/mctop/spacesaving.h, MCTOP_COUNTERS counters), found by its
 * pthread_self() in a fixed array and allocated on the thread's first hit.
 * No lock, no shared write: threads never contend.  Memory is bounded:
 * at most MCTOP_THREADS tables (hits of further threads are only counted
 * as "untracked").
 *
 * Reading (top): tables are read counter by counter under each counter's
 * own seqlock while handlers keep running (see spacesaving.h for why not a
 * table-wide seqlock or a copy published by the writer: the first starves
 * the reader under load, the second costs the hot path a copy).  The
 * per-thread tables are then merged as mergeable Space-Saving summaries:
 * for a key, a thread that tracks it adds its count and error; a thread
 * that does not adds its smallest count (0 if it has a free counter) to
 * both, since the key can have been seen at most that often there.  So
 * the merged count is an upper bound and count - err a lower bound.
 *
 * Reset: the reader may not write a table its writer is changing, so it
 * bumps a generation; each thread clears its own table at its next hit,
 * and readers skip tables of an older generation meanwhile.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xprobes/probe.h>

#include "mctop/spacesaving.h"

#define MCTOP_COUNTERS 1024 /* per thread: ~420 kB */
#define MCTOP_THREADS 64

struct thread_table {
	atomic_uintptr_t owner;     /* pthread_self() of its writer, 0 = free */
	struct ss_table *_Atomic ss; /* published once allocated */
	atomic_uint gen;            /* generation the table was last cleared for */
	atomic_uint_least64_t hits; /* since that clear */
};

static struct thread_table threads[MCTOP_THREADS];
static atomic_uint generation;
static atomic_uint_least64_t untracked; /* hits no table could take */

/* The calling thread's table: its slot is claimed once, by CAS, then found
 * again by a few loads of owner words that never change afterwards (so
 * they stay shared in every core's cache).  A thread id reused after its
 * thread exited takes over that table, which keeps one writer per table. */
static struct thread_table *my_table(void)
{
	uintptr_t self = (uintptr_t)pthread_self();
	unsigned start = (unsigned)((self >> 12) ^ (self >> 21)) % MCTOP_THREADS;
	for (unsigned n = 0; n < MCTOP_THREADS; n++) {
		struct thread_table *t = &threads[(start + n) % MCTOP_THREADS];
		uintptr_t owner = atomic_load_explicit(&t->owner, memory_order_acquire);
		if (owner == self)
			return t;
		if (owner == 0) {
			uintptr_t expected = 0;
			if (atomic_compare_exchange_strong(&t->owner, &expected, self))
				return t;
			if (expected == self)
				return t;
		}
	}
	return NULL;
}

static void count(const char *key, int keylen, unsigned cmd, int64_t size)
{
	struct thread_table *t = my_table();
	if (!t || keylen <= 0) {
		atomic_fetch_add_explicit(&untracked, 1, memory_order_relaxed);
		return;
	}
	struct ss_table *ss = atomic_load_explicit(&t->ss, memory_order_relaxed);
	unsigned gen = atomic_load_explicit(&generation, memory_order_relaxed);
	if (!ss) { /* first hit of this thread */
		ss = ss_create(MCTOP_COUNTERS);
		if (!ss) {
			atomic_fetch_add_explicit(&untracked, 1, memory_order_relaxed);
			return;
		}
		atomic_store_explicit(&t->gen, gen, memory_order_relaxed);
		atomic_store_explicit(&t->ss, ss, memory_order_release);
	} else if (atomic_load_explicit(&t->gen, memory_order_relaxed) != gen) {
		ss_clear(ss);
		atomic_store_explicit(&t->hits, 0, memory_order_relaxed);
		atomic_store_explicit(&t->gen, gen, memory_order_release);
	}
	atomic_store_explicit(&t->hits, atomic_load_explicit(&t->hits, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	ss_add(ss, key, (size_t)keylen, cmd, size);
}

/* memcached's size is the item's nbytes, the value plus its "\r\n"; -1 on
 * a miss or a failed store. */
static int64_t value_size(int size)
{
	return size >= 2 ? size - 2 : -1;
}

#define SIZED_HANDLER(name, cmd)                                                          \
	static void on_##name(int connid, const char *key, int keylen, int size,          \
			      int64_t casid)                                              \
	{                                                                                 \
		(void)connid, (void)casid;                                                \
		count(key, keylen, cmd, value_size(size));                                \
	}
SIZED_HANDLER(get, SS_GET)
SIZED_HANDLER(set, SS_SET)
SIZED_HANDLER(add, SS_ADD)
SIZED_HANDLER(replace, SS_REPLACE)
SIZED_HANDLER(append, SS_APPEND)
SIZED_HANDLER(prepend, SS_PREPEND)
SIZED_HANDLER(cas, SS_CAS)
SIZED_HANDLER(touch, SS_TOUCH)

static void on_incr(int connid, const char *key, int keylen, int64_t val)
{
	(void)connid, (void)val;
	count(key, keylen, SS_INCR, -1);
}

static void on_decr(int connid, const char *key, int keylen, int64_t val)
{
	(void)connid, (void)val;
	count(key, keylen, SS_DECR, -1);
}

static void on_delete(int connid, const char *key, int keylen)
{
	(void)connid;
	count(key, keylen, SS_DELETE, -1);
}

/* ---- Reading: merge the threads' tables ---- */

struct merged {
	struct ss_snap s;
	uint64_t mins;   /* sum of the smallest counts of the threads tracking it */
	unsigned thread; /* last thread that added to it, +1 */
	uint32_t hash;
};

struct merge {
	struct merged *e;
	uint32_t *index; /* entry + 1, open addressing */
	uint32_t n, mask;
	uint64_t total, all_mins;
};

static struct merged *merge_find(struct merge *m, const struct ss_snap *s)
{
	uint32_t h = (uint32_t)ss_hash(s->key, s->keylen);
	for (uint32_t i = h & m->mask;; i = (i + 1) & m->mask) {
		if (m->index[i] == 0) {
			struct merged *e = &m->e[m->n++];
			memset(e, 0, sizeof(*e));
			e->hash = h;
			e->s.objsize = -1; /* until some thread saw a value */
			e->s.keylen = s->keylen;
			memcpy(e->s.key, s->key, s->keylen);
			m->index[i] = m->n;
			return e;
		}
		struct merged *e = &m->e[m->index[i] - 1];
		if (e->hash == h && e->s.keylen == s->keylen && memcmp(e->s.key, s->key, s->keylen) == 0)
			return e;
	}
}

static void merge_add(struct merged *e, const struct ss_snap *s)
{
	e->s.count += s->count;
	e->s.err += s->err;
	e->s.bytes += s->bytes;
	if (s->objsize >= 0)
		e->s.objsize = s->objsize; /* any thread's latest: good enough */
	for (unsigned k = 0; k < SS_NCMD; k++)
		e->s.ncmd[k] += s->ncmd[k];
}

static void merge_sub(struct merged *e, const struct ss_snap *s)
{
	e->s.count -= s->count;
	e->s.err -= s->err;
	e->s.bytes -= s->bytes;
	for (unsigned k = 0; k < SS_NCMD; k++)
		e->s.ncmd[k] -= s->ncmd[k];
}

/* One thread's table into the merge.  A key copied twice from one table
 * (evicted and taken again while we read) keeps its larger copy, so it is
 * counted once.  The copies of this thread are kept until the end so a
 * replaced copy can be taken out again. */
static void merge_table(struct merge *m, unsigned tno, const struct ss_table *ss,
			struct ss_snap *snaps, struct merged **where)
{
	uint32_t got = 0;
	uint64_t min = UINT64_MAX;
	for (uint32_t i = 0; i < ss->cap; i++) {
		if (!ss_read(ss, i, &snaps[got]))
			continue;
		if (snaps[got].count < min)
			min = snaps[got].count;
		struct merged *e = merge_find(m, &snaps[got]);
		if (e->thread == tno + 1) {
			uint32_t prev = 0;
			while (where[prev] != e)
				prev++;
			if (snaps[prev].count >= snaps[got].count)
				continue;
			merge_sub(e, &snaps[prev]);
			where[prev] = NULL;
		}
		e->thread = tno + 1;
		merge_add(e, &snaps[got]);
		where[got++] = e;
	}
	if (got < ss->cap)
		min = 0; /* a free counter: an untracked key was never seen here */
	m->all_mins += min;
	for (uint32_t i = 0; i < got; i++)
		if (where[i])
			where[i]->mins += min;
}

static int busiest_first(const void *a, const void *b)
{
	const struct merged *x = *(struct merged *const *)a, *y = *(struct merged *const *)b;
	if (x->s.count != y->s.count)
		return x->s.count < y->s.count ? 1 : -1;
	if (x->s.keylen != y->s.keylen)
		return x->s.keylen < y->s.keylen ? -1 : 1;
	return memcmp(x->s.key, y->s.key, x->s.keylen);
}

/* KEY escaped: JSON (\u00NN for bytes outside printable ASCII) or, for the
 * text table, \xNN. */
static void escape(char *out, const char *key, unsigned len, int json)
{
	for (unsigned i = 0; i < len; i++) {
		unsigned char c = (unsigned char)key[i];
		if (c == '"' || c == '\\')
			out += sprintf(out, "\\%c", c);
		else if (c >= 0x20 && c < 0x7f)
			*out++ = (char)c;
		else
			out += sprintf(out, json ? "\\u%04x" : "\\x%02x", c);
	}
	*out = '\0';
}

static const char *const cmd_names[SS_NCMD] = {
	"gets", "sets", "adds", "replaces", "appends", "prepends", "cas",
	"touches", "incrs", "decrs", "deletes",
};

static void print_top(struct merge *m, unsigned long want, int json, int (*out)(const char *))
{
	struct merged **order = malloc((m->n ? m->n : 1) * sizeof(*order));
	if (!order) {
		out("mctop: out of memory\n");
		return;
	}
	/* The threads that did not track a key add their minimum to both. */
	for (uint32_t i = 0; i < m->n; i++) {
		struct merged *e = &m->e[i];
		e->s.count += m->all_mins - e->mins;
		e->s.err += m->all_mins - e->mins;
		order[i] = e;
	}
	qsort(order, m->n, sizeof(*order), busiest_first);
	if (want > m->n)
		want = m->n;
	char line[6 * SS_KEY_MAX + 512], key[6 * SS_KEY_MAX + 1];
	unsigned long long untr = atomic_load(&untracked);
	if (json)
		snprintf(line, sizeof(line), "{\"total\":%llu,\"tracked\":%u,\"untracked\":%llu,\"keys\":[",
			 (unsigned long long)m->total, m->n, untr);
	else
		snprintf(line, sizeof(line),
			 "total %llu tracked %u untracked %llu\n%12s %10s %8s %12s  KEY\n",
			 (unsigned long long)m->total, m->n, untr, "CALLS", "ERR", "OBJSIZE", "TOTAL");
	out(line);
	for (unsigned long i = 0; i < want; i++) {
		const struct ss_snap *s = &order[i]->s;
		escape(key, s->key, s->keylen, json);
		if (json) {
			int n = snprintf(line, sizeof(line),
					 "%s{\"key\":\"%s\",\"calls\":%llu,\"err\":%llu,\"objsize\":%lld,\"total\":%llu",
					 i ? "," : "", key, (unsigned long long)s->count,
					 (unsigned long long)s->err, (long long)s->objsize,
					 (unsigned long long)s->bytes);
			for (unsigned k = 0; k < SS_NCMD; k++)
				n += snprintf(line + n, sizeof(line) - (size_t)n, ",\"%s\":%llu",
					      cmd_names[k], (unsigned long long)s->ncmd[k]);
			snprintf(line + n, sizeof(line) - (size_t)n, "}");
		} else {
			snprintf(line, sizeof(line), "%12llu %10llu %8lld %12llu  %s\n",
				 (unsigned long long)s->count, (unsigned long long)s->err,
				 (long long)s->objsize, (unsigned long long)s->bytes, key);
		}
		if (out(line) < 0)
			break;
	}
	if (json)
		out("]}\n");
	free(order);
}

static void top(unsigned long want, int json, int (*out)(const char *))
{
	struct merge m = {0};
	unsigned gen = atomic_load(&generation), live = 0;
	for (unsigned i = 0; i < MCTOP_THREADS; i++)
		live += atomic_load_explicit(&threads[i].ss, memory_order_acquire) != NULL;
	/* Room for every counter of the tables seen now; one published later
	 * is left for the next look (handlers keep running). */
	uint32_t cap = (live ? live : 1) * MCTOP_COUNTERS, slots = 2;
	while (slots < 2 * cap)
		slots <<= 1;
	m.mask = slots - 1;
	m.e = malloc(cap * sizeof(*m.e));
	m.index = calloc(slots, sizeof(*m.index));
	struct ss_snap *snaps = malloc(MCTOP_COUNTERS * sizeof(*snaps));
	struct merged **where = malloc(MCTOP_COUNTERS * sizeof(*where));
	if (!m.e || !m.index || !snaps || !where) {
		out("mctop: out of memory\n");
		goto done;
	}
	for (unsigned i = 0; i < MCTOP_THREADS && live; i++) {
		struct ss_table *ss = atomic_load_explicit(&threads[i].ss, memory_order_acquire);
		if (!ss)
			continue;
		live--;
		if (atomic_load_explicit(&threads[i].gen, memory_order_acquire) != gen)
			continue; /* not cleared since a reset yet */
		m.total += atomic_load_explicit(&threads[i].hits, memory_order_relaxed);
		merge_table(&m, i, ss, snaps, where);
	}
	print_top(&m, want, json, out);
done:
	free(m.e);
	free(m.index);
	free(snaps);
	free(where);
}

static void command(const char *args, int (*out)(const char *))
{
	char word[16] = "";
	unsigned long want = 20;
	int json = 0, n = 0;

	if (sscanf(args, "%15s%n", word, &n) == 1 && strcmp(word, "top") == 0) {
		for (const char *p = args + n;;) {
			char arg[24];
			int used;
			if (sscanf(p, "%23s%n", arg, &used) != 1)
				break;
			p += used;
			if (strcmp(arg, "json") == 0)
				json = 1;
			else if (arg[0] >= '0' && arg[0] <= '9')
				want = strtoul(arg, NULL, 10);
			else
				goto usage;
		}
		top(want, json, out);
		return;
	}
	if (strcmp(word, "reset") == 0) {
		atomic_fetch_add(&generation, 1);
		atomic_store(&untracked, 0);
		out("reset\n");
		return;
	}
usage:
	out("usage: command mctop.so top [N] [json] | reset\n");
}

/* Unload: the agent runs no handler or command any more; free the tables. */
__attribute__((destructor)) static void free_tables(void)
{
	for (unsigned i = 0; i < MCTOP_THREADS; i++)
		ss_destroy(atomic_load(&threads[i].ss));
}

/* Types written out: XPROBES_PROBE keeps them as text for the agent's
 * check against the site's, so a macro name would not match. */
XPROBES_MODULE(command, 0,
	XPROBES_PROBE("memcached:command__get", on_get,
		      (int, const char *, int, int, int64_t)),
	XPROBES_PROBE("memcached:command__set", on_set,
		      (int, const char *, int, int, int64_t)),
	XPROBES_PROBE("memcached:command__add", on_add,
		      (int, const char *, int, int, int64_t)),
	XPROBES_PROBE("memcached:command__replace", on_replace,
		      (int, const char *, int, int, int64_t)),
	XPROBES_PROBE("memcached:command__append", on_append,
		      (int, const char *, int, int, int64_t)),
	XPROBES_PROBE("memcached:command__prepend", on_prepend,
		      (int, const char *, int, int, int64_t)),
	XPROBES_PROBE("memcached:command__cas", on_cas,
		      (int, const char *, int, int, int64_t)),
	XPROBES_PROBE("memcached:command__touch", on_touch,
		      (int, const char *, int, int, int64_t)),
	XPROBES_PROBE("memcached:command__incr", on_incr, (int, const char *, int, int64_t)),
	XPROBES_PROBE("memcached:command__decr", on_decr, (int, const char *, int, int64_t)),
	XPROBES_PROBE("memcached:command__delete", on_delete, (int, const char *, int)));
