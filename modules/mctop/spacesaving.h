/* spacesaving.h -- a bounded heavy-hitter table (Metwally et al.'s
 * Space-Saving), one writer thread, readers on other threads.
 *
 * A table has a fixed number of counters.  A key that has one is counted
 * in it; a new key, once every counter is taken, replaces the key with the
 * smallest count m and starts at m + 1 with error bound m.  So for every
 * tracked key: count - err <= true count <= count, and every key seen more
 * than total/capacity times is tracked.
 *
 * Writer-private: the hash index (open addressing, linear probing, deletion
 * by backward shift, no tombstones) and the min-heap of counter indices.
 * Both only steer the writer; readers look at the counters alone.
 *
 * Readers: every counter carries its own sequence number (a seqlock per
 * counter, not per table).  A table-wide seqlock would make a reader
 * copying ~400 kB retry forever under load, since the writer changes the
 * table every microsecond; per counter, the writer's window is a few
 * stores and a reader's copy of one counter almost always succeeds the
 * first time.  The price: a snapshot is consistent per counter, not across
 * the table (ss_read's comment says what that means for a merge).
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

#define SS_KEY_MAX 250 /* memcached's KEY_MAX_LENGTH */

/* What happened to a key: one count per memcached command site. */
enum ss_cmd {
	SS_GET, SS_SET, SS_ADD, SS_REPLACE, SS_APPEND, SS_PREPEND, SS_CAS,
	SS_TOUCH, SS_INCR, SS_DECR, SS_DELETE, SS_NCMD
};

struct ss_counter {
	/* Read by readers, written by the writer inside its seq window.
	 * Relaxed atomics cost plain movs on x86-64 and keep the counts
	 * themselves free of data races; the key bytes are copied racily and
	 * validated by seq, as in any seqlock. */
	atomic_uint seq;              /* odd while the writer changes this counter */
	atomic_uint keylen;
	atomic_uint_least64_t count;  /* 0: unused */
	atomic_uint_least64_t err;
	atomic_uint_least64_t bytes;  /* value bytes moved, summed */
	atomic_int_least64_t objsize; /* latest value size, -1 if none seen */
	atomic_uint_least64_t ncmd[SS_NCMD];
	/* Writer-private. */
	uint64_t hash;
	uint32_t heap_pos;
	char key[SS_KEY_MAX];
};

struct ss_table {
	uint32_t cap;   /* counters */
	uint32_t used;  /* counters taken, <= cap */
	uint32_t mask;  /* index slots - 1 */
	uint32_t *heap; /* counter indices, min-heap on count */
	uint32_t *index; /* counter index + 1, 0 = empty */
	struct ss_counter *c;
};

/* A reader's consistent copy of one counter. */
struct ss_snap {
	uint64_t count, err, bytes;
	int64_t objsize;
	uint64_t ncmd[SS_NCMD];
	unsigned keylen;
	char key[SS_KEY_MAX];
};

/* Any 64-bit mix will do: the index only needs keys spread over slots.
 * Eight bytes a step, since keys are tens of bytes and this is per hit. */
static inline uint64_t ss_hash(const char *key, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, key, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
		key += 8;
		len -= 8;
	}
	uint64_t w = 0;
	memcpy(&w, key, len);
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 29);
}

/* A table of CAP counters (1 to 2^30), or NULL when out of memory. */
static inline struct ss_table *ss_create(uint32_t cap)
{
	if (cap == 0 || cap > (1u << 30))
		return NULL;
	uint32_t slots = 2;
	while (slots < 2 * cap) /* load factor <= 1/2: short probe runs */
		slots <<= 1;
	struct ss_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->cap = cap;
	t->mask = slots - 1;
	t->heap = calloc(cap, sizeof(*t->heap));
	t->index = calloc(slots, sizeof(*t->index));
	t->c = calloc(cap, sizeof(*t->c));
	if (!t->heap || !t->index || !t->c) {
		free(t->heap);
		free(t->index);
		free(t->c);
		free(t);
		return NULL;
	}
	return t;
}

static inline void ss_destroy(struct ss_table *t)
{
	if (!t)
		return;
	free(t->heap);
	free(t->index);
	free(t->c);
	free(t);
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

static inline uint64_t ss_count(const struct ss_table *t, uint32_t ci)
{
	return atomic_load_explicit(&t->c[ci].count, memory_order_relaxed);
}

static inline void ss_heap_set(struct ss_table *t, uint32_t pos, uint32_t ci)
{
	t->heap[pos] = ci;
	t->c[ci].heap_pos = pos;
}

/* A count only grows, so a counter only ever moves down the min-heap.  Hot
 * keys settle near the leaves, where this loop stops at once. */
static inline void ss_sift_down(struct ss_table *t, uint32_t pos)
{
	uint32_t ci = t->heap[pos];
	uint64_t n = ss_count(t, ci);
	for (;;) {
		uint32_t l = 2 * pos + 1, m = pos;
		uint64_t mn = n;
		if (l < t->used && ss_count(t, t->heap[l]) < mn)
			m = l, mn = ss_count(t, t->heap[l]);
		if (l + 1 < t->used && ss_count(t, t->heap[l + 1]) < mn)
			m = l + 1;
		if (m == pos)
			break;
		ss_heap_set(t, pos, t->heap[m]);
		pos = m;
	}
	ss_heap_set(t, pos, ci);
}

/* A new counter at the heap's end holds the smallest count there is, 1:
 * it moves up past every larger parent. */
static inline void ss_sift_up(struct ss_table *t, uint32_t pos)
{
	uint32_t ci = t->heap[pos];
	uint64_t n = ss_count(t, ci);
	while (pos > 0 && ss_count(t, t->heap[(pos - 1) / 2]) > n) {
		ss_heap_set(t, pos, t->heap[(pos - 1) / 2]);
		pos = (pos - 1) / 2;
	}
	ss_heap_set(t, pos, ci);
}

/* Slot of KEY in the index, or of the empty slot where it would go. */
static inline uint32_t ss_find(const struct ss_table *t, const char *key, size_t len,
			       uint64_t h)
{
	for (uint32_t i = (uint32_t)h & t->mask;; i = (i + 1) & t->mask) {
		uint32_t v = t->index[i];
		if (v == 0)
			return i;
		const struct ss_counter *c = &t->c[v - 1];
		if (c->hash == h && atomic_load_explicit(&c->keylen, memory_order_relaxed) == len &&
		    memcmp(c->key, key, len) == 0)
			return i;
	}
}

/* Remove index slot I, shifting later entries of its run back so lookups
 * never need tombstones. */
static inline void ss_unindex(struct ss_table *t, uint32_t i)
{
	for (uint32_t j = (i + 1) & t->mask; t->index[j]; j = (j + 1) & t->mask) {
		uint32_t home = (uint32_t)t->c[t->index[j] - 1].hash & t->mask;
		/* The entry at j may fill i if i lies on its probe path
		 * (cyclically between its home slot and j). */
		if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
			t->index[i] = t->index[j];
			i = j;
		}
	}
	t->index[i] = 0;
}

/* Count one CMD of KEY (LEN bytes, 1 to SS_KEY_MAX; longer keys are cut).
 * VALUE_SIZE: bytes of the value moved, or negative when none (a miss, a
 * delete).  Writer thread only. */
static inline void ss_add(struct ss_table *t, const char *key, size_t len, unsigned cmd,
			  int64_t value_size)
{
	if (len > SS_KEY_MAX)
		len = SS_KEY_MAX;
	uint64_t h = ss_hash(key, len);
	uint32_t slot = ss_find(t, key, len, h);
	struct ss_counter *c;
	uint32_t ci;
	int appended = 0;

	if (t->index[slot]) { /* tracked: one more */
		ci = t->index[slot] - 1;
		c = &t->c[ci];
		ss_write_begin(c);
		atomic_store_explicit(&c->count, atomic_load_explicit(&c->count, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	} else {
		uint64_t floor = 0;
		if (t->used < t->cap) { /* a free counter, at the heap's end */
			ci = t->used++;
			ss_heap_set(t, ci, ci);
			appended = 1;
		} else { /* evict the minimum: its count becomes the new key's error */
			ci = t->heap[0];
			floor = ss_count(t, ci);
			ss_unindex(t, ss_find(t, t->c[ci].key,
					      atomic_load_explicit(&t->c[ci].keylen, memory_order_relaxed),
					      t->c[ci].hash));
			slot = ss_find(t, key, len, h); /* the shift may have moved it */
		}
		c = &t->c[ci];
		ss_write_begin(c);
		c->hash = h;
		memcpy(c->key, key, len);
		atomic_store_explicit(&c->keylen, (unsigned)len, memory_order_relaxed);
		atomic_store_explicit(&c->count, floor + 1, memory_order_relaxed);
		atomic_store_explicit(&c->err, floor, memory_order_relaxed);
		atomic_store_explicit(&c->bytes, 0, memory_order_relaxed);
		atomic_store_explicit(&c->objsize, -1, memory_order_relaxed);
		for (unsigned k = 0; k < SS_NCMD; k++)
			atomic_store_explicit(&c->ncmd[k], 0, memory_order_relaxed);
		t->index[slot] = ci + 1;
	}
	if (cmd < SS_NCMD)
		atomic_store_explicit(&c->ncmd[cmd],
				      atomic_load_explicit(&c->ncmd[cmd], memory_order_relaxed) + 1,
				      memory_order_relaxed);
	if (value_size >= 0) {
		atomic_store_explicit(&c->objsize, value_size, memory_order_relaxed);
		atomic_store_explicit(&c->bytes,
				      atomic_load_explicit(&c->bytes, memory_order_relaxed) +
					      (uint64_t)value_size,
				      memory_order_relaxed);
	}
	ss_write_end(c);
	if (appended)
		ss_sift_up(t, c->heap_pos);
	else
		ss_sift_down(t, c->heap_pos);
}

/* Forget every key.  Writer thread only; readers see counts of 0. */
static inline void ss_clear(struct ss_table *t)
{
	for (uint32_t i = 0; i < t->used; i++) {
		struct ss_counter *c = &t->c[i];
		ss_write_begin(c);
		atomic_store_explicit(&c->count, 0, memory_order_relaxed);
		ss_write_end(c);
	}
	t->used = 0;
	memset(t->index, 0, ((size_t)t->mask + 1) * sizeof(*t->index));
}

/* Copy counter I consistently (any thread).  Returns 0 when it holds no
 * key.  Counters are copied one at a time, so while the writer runs, a
 * key evicted and taken again during a pass over the table can show up in
 * two counters of one snapshot: a merge keeps the larger of the two. */
static inline int ss_read(const struct ss_table *t, uint32_t i, struct ss_snap *out)
{
	const struct ss_counter *c = &t->c[i];
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
		for (unsigned k = 0; k < SS_NCMD; k++)
			out->ncmd[k] = atomic_load_explicit(&c->ncmd[k], memory_order_relaxed);
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
