/* SPDX-License-Identifier: MIT */
/* Concurrency test (run under TSan by `make tsan`): mctop's feed
 * (modules/mctop/feed.h) with its real two sides at once.  A writer
 * thread appends records of every key length, long and short in turn,
 * never waiting; the main
 * thread drains as fast as it can, as mctop's drainer does.  Every record
 * read must be whole (header and key bytes) and in order, and what was
 * read plus what was dropped must be exactly what was written. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../../modules/mctop/feed.h"

#define RECORDS 300000
#define SIZE 4096 /* small: the writer overruns the reader often */

static struct feed *feed;
static atomic_int done, reading;

static void key_of(uint64_t seq, char *key, unsigned len)
{
	for (unsigned i = 0; i < len; i++)
		key[i] = (char)(seq >> (8 * (i % 8)));
}

static void *writer(void *arg)
{
	(void)arg;
	/* Test pacing only (the module's writer never waits): start once the
	 * reader runs, and let it run after a drop, so the two sides overlap
	 * instead of the writer finishing first. */
	while (!atomic_load(&reading))
		sched_yield();
	char key[255];
	for (uint64_t seq = 0; seq < RECORDS; seq++) {
		unsigned len = (unsigned)(seq % 256);
		key_of(seq, key, len);
		/* Every other record short (no connid nor lat_ns): its
		 * number in value alone. */
		int full;
		if (seq % 2) {
			full = !feed_write_short(feed, 1, (unsigned)(seq & FEED_AUX_MAX), (int32_t)seq,
						 key, len);
			if (!full)
				feed_publish(feed);
		} else {
			full = feed_put(feed, FEED_KEY, 1, (int32_t)seq, (int32_t)seq, (uint32_t)seq,
					key, len) != 0;
		}
		if (full)
			sched_yield();
	}
	atomic_store(&done, 1);
	return NULL;
}

int main(void)
{
	pthread_t t;
	feed = feed_create(SIZE);
	if (!feed || pthread_create(&t, NULL, writer, NULL) != 0) {
		fprintf(stderr, "mctop_feed: setup failed\n");
		return 1;
	}
	uint64_t got = 0, last = 0, bad = 0;
	int finished = 0;
	atomic_store(&reading, 1);
	while (!finished) {
		finished = atomic_load(&done); /* one more pass after the writer ends */
		uint64_t pos = feed_tail(feed), head = feed_head(feed);
		const struct feed_rec *r;
		while ((r = feed_next(feed, &pos, head))) {
			uint64_t seq = (uint32_t)r->value; /* the writer numbers its records there */
			int is_short = feed_kind(r) == FEED_KEY_SHORT;
			char key[255];
			key_of(seq, key, r->keylen);
			if ((got && seq <= last) || r->keylen != seq % 256 || is_short != (int)(seq % 2) ||
			    (is_short ? feed_aux(r) != (seq & FEED_AUX_MAX)
				      : r->connid != (int32_t)seq || r->lat_ns != (uint32_t)seq) ||
			    memcmp(feed_key(r), key, r->keylen) != 0)
				bad++;
			last = seq;
			got++;
		}
		feed_consume(feed, pos);
	}
	pthread_join(t, NULL);
	uint64_t drops = feed_drops(feed);
	printf("mctop_feed: %llu read, %llu dropped, %llu bad\n", (unsigned long long)got,
	       (unsigned long long)drops, (unsigned long long)bad);
	feed_destroy(feed);
	if (bad || got + drops != RECORDS || got == 0) {
		fprintf(stderr, "mctop_feed: FAILED (read + dropped must be %d, none bad)\n", RECORDS);
		return 1;
	}
	return 0;
}
