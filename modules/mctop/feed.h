/* SPDX-License-Identifier: MIT */
/* feed.h -- what a memcached worker thread hands mctop's drainer: a
 * bounded single-writer, single-reader ring of variable-length records
 * (a key, or a command's latency), lock-free on both sides.
 *
 * Why a feed and not the table itself in the handler: memcached makes a
 * few system calls per request, and this kernel (a VM with page-table
 * isolation and no PCID) empties the TLB on every one.  A Space-Saving
 * update touches four or five pages scattered over megabytes (index,
 * counter, buckets), so inside the handler each was a page walk: +630 ns
 * per request, where the same update costs ~100 ns in a thread that does
 * thousands in a row (docs/design.md, "Why a feed").  Appending to a feed
 * touches one line of one page, written in order.
 *
 * The writer (one worker thread) never waits: a record that does not fit
 * is dropped and counted.  It may write records and publish them later
 * (feed_write, feed_publish), changing them meanwhile: the reader never
 * looks past head.  It publishes with a release store of head; the
 * reader (whoever holds the drain lock in mctop.c) takes head with an
 * acquire load, applies the records and gives the bytes back with a
 * release store of tail; the writer's acquire load of tail before reusing
 * bytes orders the reader's reads before the overwrite.  head and tail
 * are byte counts that only grow; a record never wraps: one that would
 * is preceded by padding to the end of the ring.
 *
 * Header-only so that the probe module and the unit test share it.
 */
#ifndef MCTOP_FEED_H
#define MCTOP_FEED_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum feed_kind {
	FEED_PAD,     /* nothing: skip to the end of the ring */
	FEED_KEY,     /* one command of a key: cmd, connid, value = value size (< 0: none),
		       * lat_ns = its latency if the writer wrote it in before
		       * publishing (see feed_write) */
	FEED_LATENCY, /* connid's keys since its last latency took
		       * (uint32_t)value << 32 | lat_ns ns */
	FEED_KEY_SHORT /* a FEED_KEY with the short header (feed_write_short):
			* kind, cmd, keylen, words and value, the key at byte 8 */
};

/* The kind takes the low two bits of a header's first byte; a short
 * record's other six are its writer's (feed_aux). */
#define FEED_KIND_BITS 2
#define FEED_AUX_MAX 63u

/* 16 bytes: with a key of memcached's usual tens of bytes, the header is
 * a third of what the worker writes and the drainer reads.  (It held the
 * command's start time too, 24 bytes, for a key's first-seen time: the
 * drainer's clock when the key takes a counter serves as well.)  A short
 * record (FEED_KEY_SHORT) is the first 8 bytes alone, then its key: most
 * of mctop's records have no connection nor latency to carry, and with
 * memcached's short keys a record was 32 bytes where 24 do (see
 * feed_write_short). */
struct feed_rec {
	uint8_t kind;   /* enum feed_kind, in the low FEED_KIND_BITS (feed_kind) */
	uint8_t cmd;    /* enum ss_cmd, and flags of the user's */
	uint8_t keylen; /* bytes of key following the header (<= 255) */
	uint8_t words;  /* record size in 8-byte words, header included */
	int32_t value;
	/* Not in a short record: */
	int32_t connid;
	uint32_t lat_ns;
};

#define FEED_HDR_SHORT 8u
#define FEED_HDR ((uint32_t)sizeof(struct feed_rec))
_Static_assert(sizeof(struct feed_rec) == 16, "a record's header is 16 bytes");
_Static_assert(offsetof(struct feed_rec, connid) == FEED_HDR_SHORT,
	       "a short record's header is the fields before connid");

static inline unsigned feed_kind(const struct feed_rec *r)
{
	return r->kind & ((1u << FEED_KIND_BITS) - 1);
}

/* What the writer of a short record put beside its kind (0 to FEED_AUX_MAX). */
static inline unsigned feed_aux(const struct feed_rec *r)
{
	return r->kind >> FEED_KIND_BITS;
}

/* The key bytes following a record's header. */
static inline const char *feed_key(const struct feed_rec *r)
{
	return (const char *)r + (feed_kind(r) == FEED_KEY_SHORT ? FEED_HDR_SHORT : FEED_HDR);
}

struct feed {
	_Alignas(64) atomic_uint_least64_t tail; /* reader: bytes given back */
	_Alignas(64) atomic_uint_least64_t head; /* writer: bytes published */
	atomic_uint_least64_t drops;             /* writer: records that did not fit */
	uint64_t tail_seen;                      /* writer: tail when last loaded */
	uint64_t wpos;                           /* writer: bytes written, >= head */
	uint32_t size;                           /* bytes, a power of two */
	_Alignas(64) unsigned char buf[];
};

/* A feed of SIZE bytes (a power of two, at least 4096), or NULL. */
static inline struct feed *feed_create(uint32_t size)
{
	if (size < 4096 || (size & (size - 1)))
		return NULL;
	struct feed *f = aligned_alloc(64, sizeof(struct feed) + size);
	if (!f)
		return NULL;
	atomic_init(&f->tail, 0);
	atomic_init(&f->head, 0);
	atomic_init(&f->drops, 0);
	f->tail_seen = 0;
	f->wpos = 0;
	f->size = size;
	return f;
}

static inline size_t feed_bytes(uint32_t size)
{
	return sizeof(struct feed) + size;
}

static inline void feed_destroy(struct feed *f)
{
	free(f);
}

/* ---- Writer ---- */

/* KEYLEN bytes of KEY to DST by words, never reading past the key: a key
 * is tens of bytes, for which memcpy was a `rep movsq` (a sixth of the
 * handler that writes it, perf) or a call through the PLT. */
static inline void feed_copy_key(unsigned char *dst, const char *key, unsigned keylen)
{
	uint64_t w;
	uint32_t h;
	if (keylen >= 8) {
		unsigned i = 0;
		for (; i + 8 < keylen; i += 8) {
			memcpy(&w, key + i, 8);
			memcpy(dst + i, &w, 8);
		}
		memcpy(&w, key + keylen - 8, 8); /* the last word, overlapping */
		memcpy(dst + keylen - 8, &w, 8);
	} else if (keylen >= 4) {
		memcpy(&h, key, 4);
		memcpy(dst, &h, 4);
		memcpy(&h, key + keylen - 4, 4);
		memcpy(dst + keylen - 4, &h, 4);
	} else {
		for (unsigned i = 0; i < keylen; i++)
			dst[i] = (unsigned char)key[i];
	}
}

/* Room for a record of NEED bytes (a multiple of 8) at the write
 * position, past padding to the end of the ring if it would wrap; NULL
 * when the ring is full (counted in drops).  wpos moves past it. */
static inline struct feed_rec *feed_reserve(struct feed *f, uint32_t need)
{
	uint64_t pos = f->wpos;
	uint32_t off = (uint32_t)pos & (f->size - 1);
	uint32_t pad = off + need > f->size ? f->size - off : 0;
	if (pos + pad + need - f->tail_seen > f->size) {
		f->tail_seen = atomic_load_explicit(&f->tail, memory_order_acquire);
		if (pos + pad + need - f->tail_seen > f->size) {
			atomic_store_explicit(&f->drops,
					      atomic_load_explicit(&f->drops, memory_order_relaxed) + 1,
					      memory_order_relaxed);
			return NULL;
		}
	}
	if (pad) {
		/* The rest of the ring is padding: marked when a header fits
		 * there; less, the reader skips without looking. */
		if (pad >= FEED_HDR)
			((struct feed_rec *)(f->buf + off))->kind = FEED_PAD;
		off = 0;
	}
	f->wpos = pos + pad + need;
	return (struct feed_rec *)(f->buf + off);
}

/* Write one record with KEYLEN bytes of KEY (may be NULL when 0) without
 * publishing it: the reader sees nothing of it until feed_publish, so the
 * writer may still change it (mctop writes a command's latency into its
 * keys' records when the command ends).  The record, or NULL when the
 * ring is full (counted in drops). */
static inline struct feed_rec *feed_write(struct feed *f, unsigned kind, unsigned cmd,
					  int32_t connid, int32_t value, uint32_t lat_ns,
					  const char *key, unsigned keylen)
{
	uint32_t need = (FEED_HDR + keylen + 7) & ~7u;
	struct feed_rec *r = feed_reserve(f, need);
	if (!r)
		return NULL;
	r->kind = (uint8_t)kind;
	r->cmd = (uint8_t)cmd;
	r->keylen = (uint8_t)keylen;
	r->words = (uint8_t)(need / 8);
	r->connid = connid;
	r->value = value;
	r->lat_ns = lat_ns;
	feed_copy_key((unsigned char *)(r + 1), key, keylen);
	return r;
}

/* feed_write of a FEED_KEY_SHORT: no connid nor lat_ns, and AUX (at most
 * FEED_AUX_MAX) beside the kind.  Eight bytes less than a FEED_KEY: with
 * a key of 1 to 8 bytes, 16 bytes instead of 24; 9 to 16, 24 instead of
 * 32. */
static inline struct feed_rec *feed_write_short(struct feed *f, unsigned cmd, unsigned aux,
						int32_t value, const char *key, unsigned keylen)
{
	/* At least a long header's bytes: the reader takes fewer at the end
	 * of the ring for padding. */
	uint32_t need = keylen > FEED_HDR_SHORT ? (FEED_HDR_SHORT + keylen + 7) & ~7u : FEED_HDR;
	struct feed_rec *r = feed_reserve(f, need);
	if (!r)
		return NULL;
	r->kind = (uint8_t)(FEED_KEY_SHORT | aux << FEED_KIND_BITS);
	r->cmd = (uint8_t)cmd;
	r->keylen = (uint8_t)keylen;
	r->words = (uint8_t)(need / 8);
	r->value = value;
	feed_copy_key((unsigned char *)r + FEED_HDR_SHORT, key, keylen);
	return r;
}

/* Whether more than LIMIT bytes are written and not yet given back by the
 * reader.  The reader's position is loaded only when the writer's last
 * view of it (tail_seen) is over LIMIT: not at all while the reader keeps
 * up, then at every call until it catches up (a load of a line the
 * reader writes once per pass, so one that mostly hits). */
static inline int feed_over(struct feed *f, uint32_t limit)
{
	if (f->wpos - f->tail_seen <= limit)
		return 0;
	f->tail_seen = atomic_load_explicit(&f->tail, memory_order_acquire);
	return f->wpos - f->tail_seen > limit;
}

/* The writer's view of what it has published: records from here to wpos
 * are written and held back (head is the writer's own to store). */
static inline uint64_t feed_published(struct feed *f)
{
	return atomic_load_explicit(&f->head, memory_order_relaxed);
}

/* Hand every record written so far to the reader. */
static inline void feed_publish(struct feed *f)
{
	atomic_store_explicit(&f->head, f->wpos, memory_order_release);
}

/* The record at *pos or after it (past padding) and before END, or NULL;
 * *pos moves past it.  The reader's and the writer's walks both. */
static inline struct feed_rec *feed_walk(struct feed *f, uint64_t *pos, uint64_t end)
{
	while (*pos < end) {
		uint32_t off = (uint32_t)*pos & (f->size - 1);
		if (f->size - off < FEED_HDR) { /* too little room for a header: padding */
			*pos += f->size - off;
			continue;
		}
		struct feed_rec *r = (struct feed_rec *)(f->buf + off);
		if (feed_kind(r) == FEED_PAD) {
			*pos += f->size - off;
			continue;
		}
		*pos += (uint64_t)r->words * 8;
		return r;
	}
	return NULL;
}

/* Records written and not published yet, for the writer to change: the
 * next one after *pos (start it at feed_published()), or NULL past the
 * last. */
static inline struct feed_rec *feed_unpublished(struct feed *f, uint64_t *pos)
{
	return feed_walk(f, pos, f->wpos);
}

/* Write and publish one record.  0, or -1 when the ring is full. */
static inline int feed_put(struct feed *f, unsigned kind, unsigned cmd, int32_t connid,
			   int32_t value, uint32_t lat_ns, const char *key, unsigned keylen)
{
	if (!feed_write(f, kind, cmd, connid, value, lat_ns, key, keylen))
		return -1;
	feed_publish(f);
	return 0;
}

/* ---- Reader ---- */

/* The next published record, or NULL when none is waiting.  *pos is the
 * reader's position (start it at feed_tail()); feed_next advances it past
 * padding and past the record returned. */
static inline const struct feed_rec *feed_next(struct feed *f, uint64_t *pos, uint64_t head)
{
	return feed_walk(f, pos, head);
}

static inline uint64_t feed_tail(struct feed *f)
{
	return atomic_load_explicit(&f->tail, memory_order_relaxed);
}

/* Published bytes end here (acquire: the records before it are whole). */
static inline uint64_t feed_head(struct feed *f)
{
	return atomic_load_explicit(&f->head, memory_order_acquire);
}

/* Give back everything before pos. */
static inline void feed_consume(struct feed *f, uint64_t pos)
{
	atomic_store_explicit(&f->tail, pos, memory_order_release);
}

static inline uint64_t feed_drops(struct feed *f)
{
	return atomic_load_explicit(&f->drops, memory_order_relaxed);
}

#endif /* MCTOP_FEED_H */
