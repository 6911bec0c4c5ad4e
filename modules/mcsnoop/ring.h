/* SPDX-License-Identifier: MIT */
/* A bounded single-writer, single-reader ring of mcsnoop events
 * (mcsnoop), lock-free on both sides.
 *
 * The writer is one memcached worker thread; it never waits: when the
 * ring is full the event is dropped and the ring's drop counter bumped.
 * Events are written in place and published later, all at once: a
 * command's latency is known only at the end of its batch, so
 * ring_reserve() hands out slots past the published head and
 * ring_publish() makes everything reserved so far visible to the reader
 * (a release store of head).  The reader (the module's `read` command,
 * one at a time) takes head with an acquire load, copies the slots out
 * and gives them back with a release store of tail; the writer's acquire
 * load of tail before reusing a slot orders the reader's copy before the
 * overwrite.
 *
 * Only the writer writes head, next, tail_seen and drops; only the
 * reader writes tail.  head and tail live on cache lines of their own so
 * the two sides do not bounce one line on every event.
 */
#ifndef MCSNOOP_RING_H
#define MCSNOOP_RING_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "event.h"

struct mcsnoop_ring {
	_Alignas(64) atomic_uint_least64_t tail; /* reader: events taken */
	_Alignas(64) atomic_uint_least64_t head; /* writer: events published */
	atomic_uint_least64_t drops;             /* writer: events dropped, full */
	uint64_t next;                           /* writer: reserved, >= head */
	uint64_t tail_seen;                      /* writer: tail when last loaded */
	uint32_t mask;                           /* capacity - 1 */
	_Alignas(64) struct mcsnoop_event slot[];
};

/* capacity: a power of two.  NULL if out of memory. */
static inline struct mcsnoop_ring *ring_create(uint32_t capacity)
{
	/* aligned_alloc wants a multiple of the alignment. */
	size_t size = (sizeof(struct mcsnoop_ring) + capacity * sizeof(struct mcsnoop_event) + 63) &
		      ~(size_t)63;
	struct mcsnoop_ring *r = aligned_alloc(64, size);
	if (!r)
		return NULL;
	atomic_init(&r->tail, 0);
	atomic_init(&r->head, 0);
	atomic_init(&r->drops, 0);
	r->next = r->tail_seen = 0;
	r->mask = capacity - 1;
	return r;
}

static inline void ring_destroy(struct mcsnoop_ring *r)
{
	free(r);
}

/* ---- Writer side ---- */

/* A slot for one more event, or NULL (counted as a drop) when the ring
 * holds capacity events the reader has not taken, published or not. */
static inline struct mcsnoop_event *ring_reserve(struct mcsnoop_ring *r)
{
	if (r->next - r->tail_seen > r->mask) {
		r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
		if (r->next - r->tail_seen > r->mask) {
			atomic_store_explicit(&r->drops,
					      atomic_load_explicit(&r->drops, memory_order_relaxed) + 1,
					      memory_order_relaxed);
			return NULL;
		}
	}
	return &r->slot[r->next++ & r->mask];
}

/* Reserved and not yet published. */
static inline uint32_t ring_unpublished(const struct mcsnoop_ring *r)
{
	return (uint32_t)(r->next - atomic_load_explicit(&r->head, memory_order_relaxed));
}

/* The i-th unpublished event (i < ring_unpublished), to finish it. */
static inline struct mcsnoop_event *ring_unpublished_at(struct mcsnoop_ring *r, uint32_t i)
{
	return &r->slot[(atomic_load_explicit(&r->head, memory_order_relaxed) + i) & r->mask];
}

static inline void ring_publish(struct mcsnoop_ring *r)
{
	atomic_store_explicit(&r->head, r->next, memory_order_release);
}

/* ---- Reader side ---- */

/* Published events not taken yet: [*from, *from + return). */
static inline uint64_t ring_readable(struct mcsnoop_ring *r, uint64_t *from)
{
	*from = atomic_load_explicit(&r->tail, memory_order_relaxed);
	return atomic_load_explicit(&r->head, memory_order_acquire) - *from;
}

static inline const struct mcsnoop_event *ring_at(const struct mcsnoop_ring *r, uint64_t pos)
{
	return &r->slot[pos & r->mask];
}

/* Give back every slot before pos, once copied out. */
static inline void ring_consume(struct mcsnoop_ring *r, uint64_t pos)
{
	atomic_store_explicit(&r->tail, pos, memory_order_release);
}

static inline uint64_t ring_drops(struct mcsnoop_ring *r)
{
	return atomic_load_explicit(&r->drops, memory_order_relaxed);
}

#endif
