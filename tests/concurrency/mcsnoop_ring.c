/* SPDX-License-Identifier: MIT */
/* Concurrency test (run under TSan by `make tsan`): mcsnoop's ring
 * (modules/mcsnoop/ring.h) with its real two sides at once.  A writer
 * thread reserves events, finishes them in place (as the module fills in
 * a batch's latency at its end) and publishes them in batches, never
 * waiting; the main thread reads as fast as it can.  The reader must see
 * every event it gets complete (no torn key or latency), in order, and
 * what it read plus what was dropped must be exactly what was written. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../../modules/mcsnoop/ring.h"

#define EVENTS 300000
#define CAP 64 /* small: the writer overruns the reader often */

static struct mcsnoop_ring *ring;
static atomic_int done, reading;

static void fill_key(uint64_t seq, char *key, uint16_t *len)
{
	*len = (uint16_t)(8 + seq % 64);
	for (unsigned i = 0; i < *len; i++)
		key[i] = (char)(seq >> (8 * (i % 8)));
}

static void *writer(void *arg)
{
	(void)arg;
	uint64_t seq = 0;
	/* Test pacing only (the module's writer never waits): start once the
	 * reader runs, and let it run after a batch that dropped, so the two
	 * sides really overlap instead of the writer finishing first. */
	while (!atomic_load(&reading))
		sched_yield();
	while (seq < EVENTS) {
		unsigned batch = 1 + (unsigned)(seq % 7);
		uint64_t drops = ring_drops(ring);
		for (unsigned i = 0; i < batch && seq < EVENTS; i++, seq++) {
			struct mcsnoop_event *e = ring_reserve(ring);
			if (!e)
				continue; /* dropped: counted by the ring */
			e->time_ns = seq;
			e->latency_ns = -1;
			fill_key(seq, e->key, &e->keylen);
		}
		/* The batch's end: its latency, then visible at once. */
		for (uint32_t i = 0; i < ring_unpublished(ring); i++)
			ring_unpublished_at(ring, i)->latency_ns =
				(int64_t)ring_unpublished_at(ring, i)->time_ns * 3;
		ring_publish(ring);
		if (ring_drops(ring) != drops)
			sched_yield();
	}
	atomic_store(&done, 1);
	return NULL;
}

int main(void)
{
	pthread_t t;
	ring = ring_create(CAP);
	if (!ring || pthread_create(&t, NULL, writer, NULL) != 0) {
		fprintf(stderr, "mcsnoop_ring: setup failed\n");
		return 1;
	}
	uint64_t got = 0, last = 0, bad = 0;
	int finished = 0;
	atomic_store(&reading, 1);
	while (!finished) {
		finished = atomic_load(&done); /* one more pass after the writer ends */
		uint64_t from, n = ring_readable(ring, &from);
		for (uint64_t i = 0; i < n; i++) {
			struct mcsnoop_event e = *ring_at(ring, from + i);
			char key[MCSNOOP_KEY_MAX];
			uint16_t len;
			fill_key(e.time_ns, key, &len);
			if ((got && e.time_ns <= last) || e.keylen != len ||
			    memcmp(e.key, key, len) != 0 || e.latency_ns != (int64_t)e.time_ns * 3)
				bad++;
			last = e.time_ns;
			got++;
		}
		ring_consume(ring, from + n);
	}
	pthread_join(t, NULL);
	uint64_t drops = ring_drops(ring);
	printf("mcsnoop_ring: %llu read, %llu dropped, %llu bad\n", (unsigned long long)got,
	       (unsigned long long)drops, (unsigned long long)bad);
	ring_destroy(ring);
	if (bad || got + drops != EVENTS || got == 0) {
		fprintf(stderr, "mcsnoop_ring: FAILED (read + dropped must be %d, none bad)\n", EVENTS);
		return 1;
	}
	return 0;
}
