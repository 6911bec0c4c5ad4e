/* SPDX-License-Identifier: MIT */
/* spacesaving.h -- a bounded heavy-hitter table (Metwally et al.'s
 * Space-Saving with its "stream summary"), one writer thread, readers on
 * other threads.
 *
 * A table has a number of counters.  A key that has one is counted in it;
 * a new key, once every counter is taken, replaces a key with the smallest
 * count m and starts at m + 1 with error bound m.  So for every tracked
 * key: count - err <= true count <= count, and every key seen more than
 * total/counters times is tracked.
 *
 * Why a stream summary and not a min-heap: the first version kept a heap.
 * Under a long tail almost every counter holds the minimum, so a key that
 * takes the minimum's counter (m + 1) sifted down through every level of
 * a plateau of equal counts: ~20 cache misses per command, +650 ns per
 * memcached request (bench/memcached_paired.py --mctop-pairs).  Here the
 * counters of equal count hang off one bucket, buckets are a list sorted
 * by count, and +1 moves a counter to the next bucket: O(1), three or four
 * lines touched.
 *
 * The index is open addressing over 64-bit entries: a 32-bit fingerprint
 * of the key's hash beside the counter number, so a lookup touches a
 * counter only when the fingerprints agree (a miss touches none).  The
 * home slot is taken from the fingerprint, so deletion by backward shift
 * needs nothing but the index.
 *
 * Once full, a filter in front of the evictions (Filtered Space-Saving,
 * see ss_filter_absorbs) keeps cold keys out of the counters with the
 * same guarantees.
 *
 * Growth: counters come in chunks that never move (readers hold no lock),
 * allocated while the key set grows and a budget shared by all tables
 * (a count of counters) allows.  A table that cannot grow evicts.
 *
 * Writer-private: index, buckets, list links.  Readers look at the
 * counters alone, each under its own sequence number (a seqlock per
 * counter: a table-wide one would make a reader copying megabytes retry
 * forever under load).  The price: a snapshot is consistent per counter,
 * not across the table (ss_read's comment says what that means).
 *
 * Header-only so that the probe module and the unit test share it.
 */
#ifndef MCTOP_SPACESAVING_H
#define MCTOP_SPACESAVING_H

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SS_KEY_MAX 250   /* memcached's KEY_MAX_LENGTH */
#define SS_HIST 32       /* log2 ns latency buckets: 1 ns .. 4 s and more */
#define SS_MAX_CHUNKS 4096
/* Filter cells per counter, a power of two.  With 4, a cell stood for ~60
 * of a million Zipf keys and 3.75% of updates still evicted; with 16,
 * 0.38% (docs/design.md, "A filter in front of the evictions"). */
#define SS_FILTER_CELLS 16
#define SS_UNTRACKED UINT32_MAX /* ss_add: counted in the filter, not a counter */

/* What happened to a key: one count per memcached command (a get split
 * into hits and misses). */
enum ss_cmd {
	SS_GET_HIT, SS_GET_MISS, SS_SET, SS_ADD, SS_REPLACE, SS_APPEND, SS_PREPEND, SS_CAS,
	SS_TOUCH, SS_INCR, SS_DECR, SS_DELETE, SS_NCMD
};

/* Laid out by what a command touches: a hit of a tracked key reads and
 * writes line 0 (sequence, count, hash, the per-key sums) and line 1
 * (per-command counts) and compares the key from line 2 on; its latency
 * later writes line 1 and one line of the histogram.  The stream
 * summary's links are not here but in the table's compact link array
 * (struct ss_link): moving a counter between buckets then touches its
 * neighbours' links, a few bytes each in an array that stays in cache,
 * not their counters. */
struct ss_counter {
	/* Read by readers, written by the writer inside its seq window.
	 * Relaxed atomics cost plain movs on x86-64 and keep the numbers
	 * free of data races; the key bytes are copied racily and validated
	 * by seq, as in any seqlock. */
	atomic_uint seq;              /* odd while the writer changes this counter */
	atomic_uint keylen;
	atomic_uint_least64_t count;  /* 0: unused */
	atomic_uint_least64_t err;
	uint64_t hash;     /* writer-private */
	uint32_t tenure;   /* writer-private: bumped when the key changes (see ss_latency) */
	atomic_uint_least64_t clients;  /* bitmap of hashed connection ids */
	atomic_int_least64_t objsize; /* latest value size, -1 if none seen */
	atomic_uint_least64_t bytes;  /* value bytes moved, summed */
	/* line 1 */
	atomic_uint ncmd[SS_NCMD];
	atomic_uint_least64_t lat_sum;  /* ns, over lat_n commands */
	atomic_uint_least64_t lat_n;
	/* line 2 on */
	char key[SS_KEY_MAX];
	atomic_uint_least64_t first_ns; /* when this key took the counter */
	atomic_uint hist[SS_HIST];
} __attribute__((aligned(64)));

/* A counter's place in the stream summary (writer-private). */
struct ss_link {
	uint32_t bucket;     /* its bucket */
	uint32_t prev, next; /* counters of that bucket, index + 1, 0 = none */
};

struct ss_bucket {
	uint64_t count;
	uint32_t first;      /* counter index + 1 */
	uint32_t prev, next; /* bucket index + 1, 0 = none; sorted by count */
};

struct ss_table {
	uint32_t chunk;            /* counters per chunk */
	uint32_t chunk_shift;      /* counter ci is in chunk ci >> chunk_shift, */
	uint32_t chunk_mask;       /* at ci & chunk_mask (no division per update) */
	_Atomic uint32_t cap;      /* counters allocated (readers: acquire) */
	uint32_t used;             /* counters taken, <= cap */
	uint32_t mask;             /* index slots - 1 */
	uint64_t *index;           /* fingerprint << 32 | counter + 1; 0 = empty */
	struct ss_bucket *b;       /* cap of them: at most one per counter */
	struct ss_link *l;         /* cap of them: counter i's is l[i] */
	uint32_t min;              /* bucket + 1 with the smallest count */
	uint32_t max;              /* bucket + 1 with the largest count */
	uint32_t free_bucket;      /* free list through .next, + 1 */
	atomic_long *budget;       /* counters left to all tables; NULL: no limit */
	uint32_t max_chunks;
	int full;                  /* growth failed: evict until ss_clear (the
				    * shared budget is not asked on every new key) */
	uint32_t *filter;          /* once full: SS_FILTER_CELLS per counter (ss_filter) */
	uint32_t fmask;            /* filter cells - 1 */
	int nofilter;              /* its allocation failed: plain Space-Saving */
	struct ss_counter *_Atomic chunks[SS_MAX_CHUNKS];
};

/* A reader's consistent copy of one counter. */
struct ss_snap {
	uint64_t count, err, bytes, first_ns, clients, lat_sum, lat_n;
	int64_t objsize;
	uint32_t ncmd[SS_NCMD];
	uint32_t hist[SS_HIST];
	unsigned keylen;
	char key[SS_KEY_MAX];
};

/* Any 64-bit mix will do: the index only needs keys spread over slots.
 * Eight bytes a step, since keys are tens of bytes and this is per hit.
 * The last step reads whole words that may overlap the one before (a
 * short key: two halves, or three bytes), never byte by byte into a word
 * on the stack: that was a rep movs and a failed store forwarding, a
 * sixth of the drainer's time (perf). */
static inline uint64_t ss_hash(const char *key, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len, w;
	if (len >= 8) {
		const char *last = key + len - 8;
		while (key < last) {
			memcpy(&w, key, 8);
			h = (h ^ w) * 0xff51afd7ed558ccdull;
			h ^= h >> 32;
			key += 8;
		}
		memcpy(&w, last, 8);
	} else if (len >= 4) {
		uint32_t lo, hi;
		memcpy(&lo, key, 4);
		memcpy(&hi, key + len - 4, 4);
		w = (uint64_t)hi << 32 | lo;
	} else if (len) {
		w = (uint64_t)(unsigned char)key[0] | (uint64_t)(unsigned char)key[len / 2] << 8 |
		    (uint64_t)(unsigned char)key[len - 1] << 16;
	} else {
		w = 0;
	}
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ull; /* then murmur3's finalizer: */
	h ^= h >> 33;                         /* every bit of the last word */
	h *= 0xff51afd7ed558ccdull;           /* reaches every bit of h */
	h ^= h >> 33;
	return h;
}

static inline struct ss_counter *ss_at(const struct ss_table *t, uint32_t ci)
{
	return &atomic_load_explicit(&t->chunks[ci >> t->chunk_shift],
				     memory_order_relaxed)[ci & t->chunk_mask];
}

/* The index, sized for cap counters at load factor <= 1/2, rebuilt from
 * the taken counters.  0, or -1 (out of memory: the old one stays). */
static inline int ss_reindex(struct ss_table *t, uint32_t cap)
{
	uint32_t slots = 2;
	while (slots < 2 * cap)
		slots <<= 1;
	if (t->index && slots - 1 == t->mask)
		return 0;
	uint64_t *index = calloc(slots, sizeof(*index));
	if (!index)
		return -1;
	uint32_t mask = slots - 1;
	for (uint32_t i = 0; t->index && i <= t->mask; i++) {
		uint64_t e = t->index[i];
		if (!e)
			continue;
		uint32_t s = (uint32_t)(e >> 32) & mask;
		while (index[s])
			s = (s + 1) & mask;
		index[s] = e;
	}
	free(t->index);
	t->index = index;
	t->mask = mask;
	return 0;
}

/* One more chunk of counters, if the budget and memory allow.  0 or -1. */
static inline int ss_grow(struct ss_table *t)
{
	uint32_t cap = atomic_load_explicit(&t->cap, memory_order_relaxed);
	uint32_t n = cap / t->chunk;
	if (t->full || n >= t->max_chunks) {
		t->full = 1;
		return -1;
	}
	if (t->budget) {
		long left = atomic_fetch_sub(t->budget, (long)t->chunk);
		if (left < (long)t->chunk) {
			atomic_fetch_add(t->budget, (long)t->chunk);
			t->full = 1;
			return -1;
		}
	}
	struct ss_counter *c = calloc(t->chunk, sizeof(*c));
	struct ss_bucket *b = realloc(t->b, (size_t)(cap + t->chunk) * sizeof(*b));
	if (b)
		t->b = b;
	struct ss_link *l = realloc(t->l, (size_t)(cap + t->chunk) * sizeof(*l));
	if (l)
		t->l = l;
	if (!c || !b || !l || ss_reindex(t, cap + t->chunk)) {
		free(c);
		if (t->budget)
			atomic_fetch_add(t->budget, (long)t->chunk);
		t->full = 1;
		return -1;
	}
	for (uint32_t i = cap; i < cap + t->chunk; i++) { /* new buckets: free */
		b[i].next = t->free_bucket;
		t->free_bucket = i + 1;
	}
	atomic_store_explicit(&t->chunks[n], c, memory_order_release);
	atomic_store_explicit(&t->cap, cap + t->chunk, memory_order_release);
	return 0;
}

/* A table growing CHUNK counters at a time up to MAX_CHUNKS chunks while
 * *BUDGET (counters, shared; NULL: no limit but MAX_CHUNKS) allows; the
 * first chunk comes from the budget too.  CHUNK is a power of two unless
 * MAX_CHUNKS is 1.  NULL when out of memory or budget. */
static inline struct ss_table *ss_create(uint32_t chunk, uint32_t max_chunks, atomic_long *budget)
{
	if (chunk == 0 || chunk > (1u << 20) || max_chunks == 0 || max_chunks > SS_MAX_CHUNKS ||
	    (max_chunks > 1 && (chunk & (chunk - 1))))
		return NULL;
	struct ss_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->chunk = chunk;
	if (chunk & (chunk - 1)) { /* one chunk: every ci is below 2^20 */
		t->chunk_shift = 31;
		t->chunk_mask = UINT32_MAX;
	} else {
		t->chunk_shift = (uint32_t)__builtin_ctz(chunk);
		t->chunk_mask = chunk - 1;
	}
	t->max_chunks = max_chunks;
	t->budget = budget;
	if (ss_grow(t)) {
		free(t);
		return NULL;
	}
	return t;
}

static inline void ss_destroy(struct ss_table *t)
{
	if (!t)
		return;
	uint32_t cap = atomic_load(&t->cap);
	for (uint32_t i = 0; i < cap / t->chunk; i++)
		free(atomic_load(&t->chunks[i]));
	if (t->budget)
		atomic_fetch_add(t->budget, (long)cap);
	free(t->index);
	free(t->b);
	free(t->l);
	free(t->filter);
	free(t);
}

/* Bytes a table of CAP counters uses, all told (for budgets). */
static inline size_t ss_bytes_per_counter(void)
{
	return sizeof(struct ss_counter) + sizeof(struct ss_bucket) + sizeof(struct ss_link) +
	       2 * sizeof(uint64_t) + SS_FILTER_CELLS * sizeof(uint32_t);
}

/* The writer's seq window around changes to one counter.  The release
 * fence keeps the changes after the odd seq; the release store keeps them
 * before the even one. */
static inline void ss_write_begin(struct ss_counter *c)
{
	unsigned s = atomic_load_explicit(&c->seq, memory_order_relaxed);
	atomic_store_explicit(&c->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static inline void ss_write_end(struct ss_counter *c)
{
	unsigned s = atomic_load_explicit(&c->seq, memory_order_relaxed);
	atomic_store_explicit(&c->seq, s + 1, memory_order_release);
}

#define SS_BUMP(field, by)                                                                 \
	atomic_store_explicit(&(field), atomic_load_explicit(&(field), memory_order_relaxed) + \
						(by),                                          \
			      memory_order_relaxed)

/* ---- Index ---- */

static inline uint32_t ss_fingerprint(uint64_t h)
{
	return (uint32_t)(h >> 32);
}

/* memcmp(a, b, len) == 0, inline and eight bytes a step like ss_hash
 * (the last word may overlap the one before): memcmp was a call into
 * libc per update, a twentieth of the drainer's time (perf). */
static inline int ss_key_equal(const char *a, const char *b, size_t len)
{
	uint64_t x, y;
	if (len >= 8) {
		for (size_t i = 0; i + 8 < len; i += 8) {
			memcpy(&x, a + i, 8);
			memcpy(&y, b + i, 8);
			if (x != y)
				return 0;
		}
		memcpy(&x, a + len - 8, 8);
		memcpy(&y, b + len - 8, 8);
		return x == y;
	}
	if (len >= 4) {
		uint32_t p, q, r, u;
		memcpy(&p, a, 4);
		memcpy(&q, b, 4);
		memcpy(&r, a + len - 4, 4);
		memcpy(&u, b + len - 4, 4);
		return p == q && r == u;
	}
	return len == 0 || (a[0] == b[0] && a[len / 2] == b[len / 2] && a[len - 1] == b[len - 1]);
}

/* Slot of KEY in the index, or of the empty slot where it would go. */
static inline uint32_t ss_find(const struct ss_table *t, const char *key, size_t len, uint64_t h)
{
	uint32_t fp = ss_fingerprint(h);
	for (uint32_t i = fp & t->mask;; i = (i + 1) & t->mask) {
		uint64_t e = t->index[i];
		if (e == 0)
			return i;
		if ((uint32_t)(e >> 32) != fp)
			continue;
		const struct ss_counter *c = ss_at(t, (uint32_t)e - 1);
		if (atomic_load_explicit(&c->keylen, memory_order_relaxed) == len &&
		    ss_key_equal(c->key, key, len))
			return i;
	}
}

/* Remove index slot I, shifting later entries of its run back so lookups
 * never need tombstones. */
static inline void ss_unindex(struct ss_table *t, uint32_t i)
{
	for (uint32_t j = (i + 1) & t->mask; t->index[j]; j = (j + 1) & t->mask) {
		uint32_t home = (uint32_t)(t->index[j] >> 32) & t->mask;
		/* The entry at j may fill i if i lies on its probe path
		 * (cyclically between its home slot and j). */
		if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
			t->index[i] = t->index[j];
			i = j;
		}
	}
	t->index[i] = 0;
}

/* The slot holding counter CI, whose key hashed to H. */
static inline uint32_t ss_slot_of(const struct ss_table *t, uint32_t ci, uint64_t h)
{
	uint64_t want = (uint64_t)ss_fingerprint(h) << 32 | (ci + 1);
	uint32_t i = ss_fingerprint(h) & t->mask;
	while (t->index[i] != want)
		i = (i + 1) & t->mask;
	return i;
}

/* ---- Stream summary: buckets of equal counts ---- */

static inline uint32_t ss_bucket_new(struct ss_table *t, uint64_t count, uint32_t after)
{
	uint32_t bi = t->free_bucket - 1; /* never empty: one bucket per counter */
	struct ss_bucket *b = &t->b[bi];
	t->free_bucket = b->next;
	b->count = count;
	b->first = 0;
	b->prev = after;
	b->next = after ? t->b[after - 1].next : t->min;
	if (b->next)
		t->b[b->next - 1].prev = bi + 1;
	else
		t->max = bi + 1;
	if (after)
		t->b[after - 1].next = bi + 1;
	else
		t->min = bi + 1;
	return bi;
}

static inline void ss_bucket_free(struct ss_table *t, uint32_t bi)
{
	struct ss_bucket *b = &t->b[bi];
	if (b->prev)
		t->b[b->prev - 1].next = b->next;
	else
		t->min = b->next;
	if (b->next)
		t->b[b->next - 1].prev = b->prev;
	else
		t->max = b->prev;
	b->next = t->free_bucket;
	t->free_bucket = bi + 1;
}

static inline void ss_push(struct ss_table *t, uint32_t ci, uint32_t bi)
{
	struct ss_bucket *b = &t->b[bi];
	struct ss_link *l = &t->l[ci];
	l->bucket = bi;
	l->prev = 0;
	l->next = b->first;
	if (b->first)
		t->l[b->first - 1].prev = ci + 1;
	b->first = ci + 1;
}

static inline void ss_unlink(struct ss_table *t, uint32_t ci)
{
	struct ss_link *l = &t->l[ci];
	struct ss_bucket *b = &t->b[l->bucket];
	if (l->prev)
		t->l[l->prev - 1].next = l->next;
	else
		b->first = l->next;
	if (l->next)
		t->l[l->next - 1].prev = l->prev;
}

/* Counter ci (in a bucket) gets one more: the bucket's count + 1.
 * Returns the new count. */
static inline uint64_t ss_increment(struct ss_table *t, uint32_t ci)
{
	uint32_t bi = t->l[ci].bucket;
	uint64_t n = t->b[bi].count + 1;
	uint32_t nb = t->b[bi].next;
	if (t->b[bi].first == ci + 1 && !t->l[ci].next && (!nb || t->b[nb - 1].count != n)) {
		t->b[bi].count = n; /* alone in its bucket: the bucket moves */
		return n;
	}
	ss_unlink(t, ci);
	uint32_t after = bi + 1;
	if (!t->b[bi].first) {
		after = t->b[bi].prev;
		ss_bucket_free(t, bi);
	}
	if (nb && t->b[nb - 1].count == n)
		ss_push(t, ci, nb - 1);
	else
		ss_push(t, ci, ss_bucket_new(t, n, after));
	return n;
}

/* A free counter enters with count 1: the smallest there is. */
static inline void ss_enter(struct ss_table *t, uint32_t ci)
{
	if (t->min && t->b[t->min - 1].count == 1)
		ss_push(t, ci, t->min - 1);
	else
		ss_push(t, ci, ss_bucket_new(t, 1, 0));
}

/* What one command did to a key. */
struct ss_event {
	unsigned cmd;       /* enum ss_cmd */
	int64_t value_size; /* bytes of the value moved, < 0: none (a miss, a delete) */
	uint64_t now_ns;    /* for first_ns of a key new to the table; 0: read the clock */
	uint64_t client;    /* a bit for the connection (see ss_client_bit) */
	int has_lat;        /* lat_ns is the command's latency: counted in the same
			     * seq window (ss_latency is for one that comes later) */
	uint64_t lat_ns;
};

/* Which of the 64 bits of a key's clients bitmap a connection sets. */
static inline unsigned ss_client_index(int connid)
{
	uint64_t h = (uint64_t)(unsigned)connid * 0x9e3779b97f4a7c15ull;
	return (unsigned)(h >> 58);
}

static inline uint64_t ss_client_bit(int connid)
{
	return 1ull << ss_client_index(connid);
}

/* Count one event E of KEY (LEN bytes, 1 to SS_KEY_MAX; longer keys are
 * cut).  Returns the counter now holding the key, or SS_UNTRACKED when
 * the filter took the event instead.  Writer thread only. */
static inline uint32_t ss_add_hashed(struct ss_table *t, const char *key, size_t len, uint64_t h,
				     const struct ss_event *e);

static inline uint32_t ss_add(struct ss_table *t, const char *key, size_t len,
			      const struct ss_event *e)
{
	if (len > SS_KEY_MAX)
		len = SS_KEY_MAX;
	return ss_add_hashed(t, key, len, ss_hash(key, len), e);
}

/* A writer applying many updates in a row can overlap their cache misses:
 * ss_prefetch_slot(h) for an update a few ahead brings in its index slot,
 * ss_prefetch_counter(h, lat_ns) for a nearer one (its slot already in)
 * its counter, its place in the stream summary and, for an update that
 * comes with a latency (lat_ns, 0: none), the histogram bucket it goes
 * to (a fifth of the drainer's time waited on that line, perf). */
static inline void ss_prefetch_slot(const struct ss_table *t, uint64_t h)
{
	__builtin_prefetch(&t->index[ss_fingerprint(h) & t->mask]);
}

/* The histogram bucket of a latency: log2 ns, the last one open. */
static inline unsigned ss_hist_bucket(uint64_t lat_ns)
{
	unsigned b = lat_ns ? 63u - (unsigned)__builtin_clzll(lat_ns) : 0;
	return b < SS_HIST ? b : SS_HIST - 1;
}

/* One command's latency into counter c: its sum and its histogram.
 * Inside the writer's seq window (ss_add_hashed's, or ss_latency's). */
static inline void ss_count_latency(struct ss_counter *c, uint64_t lat_ns)
{
	SS_BUMP(c->lat_sum, lat_ns);
	SS_BUMP(c->lat_n, 1);
	SS_BUMP(c->hist[ss_hist_bucket(lat_ns)], 1);
}

static inline void ss_prefetch_counter(const struct ss_table *t, uint64_t h, uint64_t lat_ns)
{
	uint32_t fp = ss_fingerprint(h);
	for (uint32_t i = fp & t->mask;; i = (i + 1) & t->mask) {
		uint64_t e = t->index[i];
		if (!e) { /* most likely a key without a counter: its filter cell */
			if (t->filter)
				__builtin_prefetch(&t->filter[(uint32_t)h & t->fmask], 1);
			return;
		}
		if ((uint32_t)(e >> 32) == fp) {
			uint32_t ci = (uint32_t)e - 1;
			const struct ss_counter *c = ss_at(t, ci);
			__builtin_prefetch(c, 1);
			__builtin_prefetch(&c->ncmd, 1);
			__builtin_prefetch(c->key);
			__builtin_prefetch(&t->l[ci], 1);
			if (lat_ns)
				__builtin_prefetch(&c->hist[ss_hist_bucket(lat_ns)], 1);
			return;
		}
	}
}

/* Once full, the next key to take a counter takes the first counter of
 * the smallest bucket and writes all of it: fetched ahead, after each
 * eviction, for the next one. */
static inline void ss_prefetch_victim(const struct ss_table *t)
{
	if (!t->min)
		return;
	const struct ss_counter *c = ss_at(t, t->b[t->min - 1].first - 1);
	for (size_t off = 0; off < sizeof(*c); off += 64)
		__builtin_prefetch((const char *)c + off, 1);
}

/* ---- The filter (Homem and Carvalho's Filtered Space-Saving) ----
 *
 * Once the table is full, a key without a counter would take the
 * minimum's: its key copied in, its statistics zeroed, two index runs
 * changed, five to ten cache lines, and under a long tail that is most
 * updates.  Instead it first adds one to a filter cell chosen by its hash,
 * and takes a counter only when that cell has reached the table's minimum
 * count m; it then starts at m + 1 with error m, as in plain Space-Saving.
 * A key leaving the table leaves its count in its cell (the larger of the
 * two).  So a cell is always at least the count of any key of its cells
 * not in the table, and never more than m: the guarantees are unchanged
 * (count - err <= true <= count for a tracked key, and no untracked key
 * above m), while a cold key costs one cell.  The filter's size is in the
 * budget (ss_bytes_per_counter); allocated when the table stops growing.
 * Without it (out of memory), plain Space-Saving. */
static inline int ss_filter_absorbs(struct ss_table *t, uint64_t h, uint64_t min)
{
	if (!t->filter && !t->nofilter) {
		/* A power of two, within the budget's SS_FILTER_CELLS a counter. */
		uint64_t most = (uint64_t)SS_FILTER_CELLS *
				atomic_load_explicit(&t->cap, memory_order_relaxed);
		uint32_t cells = SS_FILTER_CELLS;
		while ((uint64_t)cells * 2 <= most)
			cells <<= 1;
		t->filter = calloc(cells, sizeof(*t->filter));
		t->nofilter = !t->filter;
		t->fmask = cells - 1;
	}
	if (!t->filter || min >= UINT32_MAX)
		return 0;
	uint32_t *cell = &t->filter[(uint32_t)h & t->fmask];
	if (*cell >= min)
		return 0;
	(*cell)++;
	return 1;
}

static inline void ss_filter_leave(struct ss_table *t, uint64_t h, uint64_t count)
{
	if (!t->filter)
		return;
	uint32_t *cell = &t->filter[(uint32_t)h & t->fmask];
	if (count > *cell)
		*cell = count < UINT32_MAX ? (uint32_t)count : UINT32_MAX;
}

/* ss_add of a key whose ss_hash (of at most SS_KEY_MAX bytes) is H. */
static inline uint32_t ss_add_hashed(struct ss_table *t, const char *key, size_t len, uint64_t h,
				     const struct ss_event *e)
{
	uint32_t slot = ss_find(t, key, len, h);
	struct ss_counter *c;
	uint32_t ci;

	if (t->index[slot]) { /* tracked: one more */
		ci = (uint32_t)t->index[slot] - 1;
		c = ss_at(t, ci);
		uint64_t n = ss_increment(t, ci);
		ss_write_begin(c);
		atomic_store_explicit(&c->count, n, memory_order_relaxed);
	} else {
		uint64_t floor = 0;
		if (!t->full && t->used == atomic_load_explicit(&t->cap, memory_order_relaxed) &&
		    ss_grow(t) == 0)
			slot = ss_find(t, key, len, h); /* a new index */
		if (t->used < atomic_load_explicit(&t->cap, memory_order_relaxed)) {
			ci = t->used++;
			c = ss_at(t, ci);
			ss_enter(t, ci);
		} else { /* take a minimum's counter: its count becomes the new key's error */
			struct ss_bucket *b = &t->b[t->min - 1];
			if (ss_filter_absorbs(t, h, b->count))
				return SS_UNTRACKED;
			ci = b->first - 1;
			c = ss_at(t, ci);
			floor = b->count;
			ss_filter_leave(t, c->hash, floor);
			ss_unindex(t, ss_slot_of(t, ci, c->hash));
			slot = ss_find(t, key, len, h); /* the shift may have moved it */
			ss_increment(t, ci);
			ss_prefetch_victim(t);
		}
		c->tenure++;
		c->hash = h;
		ss_write_begin(c);
		memcpy(c->key, key, len);
		atomic_store_explicit(&c->keylen, (unsigned)len, memory_order_relaxed);
		atomic_store_explicit(&c->count, floor + 1, memory_order_relaxed);
		atomic_store_explicit(&c->err, floor, memory_order_relaxed);
		atomic_store_explicit(&c->bytes, 0, memory_order_relaxed);
		atomic_store_explicit(&c->objsize, -1, memory_order_relaxed);
		uint64_t first = e->now_ns;
		if (!first) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			first = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		}
		atomic_store_explicit(&c->first_ns, first, memory_order_relaxed);
		atomic_store_explicit(&c->clients, 0, memory_order_relaxed);
		atomic_store_explicit(&c->lat_sum, 0, memory_order_relaxed);
		atomic_store_explicit(&c->lat_n, 0, memory_order_relaxed);
		for (unsigned k = 0; k < SS_NCMD; k++)
			atomic_store_explicit(&c->ncmd[k], 0, memory_order_relaxed);
		for (unsigned k = 0; k < SS_HIST; k++)
			atomic_store_explicit(&c->hist[k], 0, memory_order_relaxed);
		t->index[slot] = (uint64_t)ss_fingerprint(h) << 32 | (ci + 1);
	}
	if (e->cmd < SS_NCMD)
		SS_BUMP(c->ncmd[e->cmd], 1);
	if (e->value_size >= 0) {
		atomic_store_explicit(&c->objsize, e->value_size, memory_order_relaxed);
		SS_BUMP(c->bytes, (uint64_t)e->value_size);
	}
	uint64_t cl = atomic_load_explicit(&c->clients, memory_order_relaxed);
	if (!(cl & e->client))
		atomic_store_explicit(&c->clients, cl | e->client, memory_order_relaxed);
	if (e->has_lat)
		ss_count_latency(c, e->lat_ns);
	ss_write_end(c);
	return ci;
}

/* The tenure of counter ci: a latency measured later is the key's only if
 * the counter still has the same tenure (the key was not replaced). */
static inline uint32_t ss_tenure(const struct ss_table *t, uint32_t ci)
{
	return ss_at(t, ci)->tenure;
}

/* Add a latency of LAT_NS to counter ci if it still holds the key it held
 * at TENURE.  Writer thread only. */
static inline void ss_latency(struct ss_table *t, uint32_t ci, uint32_t tenure, uint64_t lat_ns)
{
	struct ss_counter *c = ss_at(t, ci);
	if (c->tenure != tenure)
		return;
	ss_write_begin(c);
	ss_count_latency(c, lat_ns);
	ss_write_end(c);
}

/* Forget every key.  Writer thread only; readers see counts of 0.  The
 * chunks stay (the budget they took stays taken). */
static inline void ss_clear(struct ss_table *t)
{
	for (uint32_t i = 0; i < t->used; i++) {
		struct ss_counter *c = ss_at(t, i);
		c->tenure++;
		ss_write_begin(c);
		atomic_store_explicit(&c->count, 0, memory_order_relaxed);
		ss_write_end(c);
	}
	t->used = 0;
	t->full = 0;
	free(t->filter); /* made again, for the new size, when the table is full */
	t->filter = NULL;
	t->nofilter = 0;
	memset(t->index, 0, ((size_t)t->mask + 1) * sizeof(*t->index));
	uint32_t cap = atomic_load_explicit(&t->cap, memory_order_relaxed);
	t->min = 0;
	t->max = 0;
	t->free_bucket = 0;
	for (uint32_t i = 0; i < cap; i++) {
		t->b[i].next = t->free_bucket;
		t->free_bucket = i + 1;
	}
}

/* The WANT counters of the largest counts (fewer if fewer are taken),
 * busiest bucket first, into OUT.  Returns how many.  Of counters tied
 * at the last count taken, any will do: they are equally busy, and a
 * flat table (just after a reset, or uniform keys) would otherwise give
 * all of its smallest bucket.  It walks the stream summary, which only
 * the writer may do while it writes: the writer, or a reader that keeps
 * the writer out.  Its cost is the counters it takes, not the table:
 * `top 200` of an 8 MiB table reads 200 counters instead of ~11,000. */
static inline uint32_t ss_busiest(const struct ss_table *t, uint32_t want, uint32_t *out)
{
	uint32_t n = 0;
	for (uint32_t b = t->max; b && n < want; b = t->b[b - 1].prev)
		for (uint32_t c = t->b[b - 1].first; c && n < want; c = t->l[c - 1].next)
			out[n++] = c - 1;
	return n;
}

/* The smallest count of a full table: the most a key without a counter
 * can have had.  0 while a counter is free (no key was ever turned away).
 * Writer, or a reader that keeps the writer out. */
static inline uint64_t ss_bound(const struct ss_table *t)
{
	if (t->used < atomic_load_explicit(&t->cap, memory_order_relaxed) || !t->min)
		return 0;
	return t->b[t->min - 1].count;
}

/* Copy counter I consistently (any thread).  Returns 0 when it holds no
 * key.  Counters are copied one at a time, so while the writer runs, a
 * key evicted and taken again during a pass over the table can show up in
 * two counters of one snapshot: a merge keeps the larger of the two.
 * FULL: also the per-command counts and the histogram. */
static inline int ss_read(const struct ss_table *t, uint32_t i, struct ss_snap *out, int full)
{
	const struct ss_counter *c = ss_at(t, i);
	for (unsigned tries = 0;; tries++) {
		unsigned s = atomic_load_explicit(&c->seq, memory_order_acquire);
		if (s & 1) {
			if (tries > 1000)
				sched_yield(); /* the writer was preempted mid-window */
			continue;
		}
		out->count = atomic_load_explicit(&c->count, memory_order_relaxed);
		out->err = atomic_load_explicit(&c->err, memory_order_relaxed);
		out->bytes = atomic_load_explicit(&c->bytes, memory_order_relaxed);
		out->objsize = atomic_load_explicit(&c->objsize, memory_order_relaxed);
		out->first_ns = atomic_load_explicit(&c->first_ns, memory_order_relaxed);
		out->clients = atomic_load_explicit(&c->clients, memory_order_relaxed);
		out->lat_sum = atomic_load_explicit(&c->lat_sum, memory_order_relaxed);
		out->lat_n = atomic_load_explicit(&c->lat_n, memory_order_relaxed);
		for (unsigned k = 0; k < SS_NCMD; k++)
			out->ncmd[k] = atomic_load_explicit(&c->ncmd[k], memory_order_relaxed);
		if (full)
			for (unsigned k = 0; k < SS_HIST; k++)
				out->hist[k] = atomic_load_explicit(&c->hist[k], memory_order_relaxed);
		out->keylen = atomic_load_explicit(&c->keylen, memory_order_relaxed);
		if (out->keylen > SS_KEY_MAX)
			out->keylen = SS_KEY_MAX;
		memcpy(out->key, c->key, out->keylen);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&c->seq, memory_order_relaxed) == s)
			return out->count != 0;
	}
}

#endif /* MCTOP_SPACESAVING_H */
