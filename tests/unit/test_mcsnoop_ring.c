/* SPDX-License-Identifier: MIT */
/* mcsnoop's per-thread event ring (modules/mcsnoop/ring.h): events become
 * visible only when published, in order; a ring full of unread events,
 * published or not, drops and counts instead of waiting; slots come back
 * once read, across many wrap-arounds.  (Two threads at once, under
 * TSan: tests/concurrency/mcsnoop_ring.c.) */
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "../../modules/mcsnoop/ring.h"

#define CAP 8

/* abort(), which the compiler knows does not return, rather than an
 * assert it would think may let a NULL ring through. */
static struct mcsnoop_ring *new_ring(void)
{
	struct mcsnoop_ring *r = ring_create(CAP);
	if (!r)
		abort();
	return r;
}

static struct mcsnoop_event *push(struct mcsnoop_ring *r, uint64_t seq)
{
	struct mcsnoop_event *e = ring_reserve(r);
	if (e) {
		e->time_ns = seq;
		e->keylen = 1;
		e->key[0] = (char)('a' + seq % 26);
	}
	return e;
}

/* Take every readable event; their sequence numbers into seqs. */
static uint64_t drain(struct mcsnoop_ring *r, uint64_t *seqs)
{
	uint64_t from, n = ring_readable(r, &from);
	for (uint64_t i = 0; i < n; i++)
		seqs[i] = ring_at(r, from + i)->time_ns;
	ring_consume(r, from + n);
	return n;
}

static void test_published_events_only_in_order(void **state)
{
	(void)state;
	struct mcsnoop_ring *r = new_ring();
	uint64_t seqs[CAP], from;
	assert_int_equal(ring_readable(r, &from), 0);
	assert_non_null(push(r, 1));
	assert_non_null(push(r, 2));
	assert_int_equal(ring_unpublished(r), 2);
	assert_int_equal(ring_readable(r, &from), 0); /* reserved is not readable */
	/* The writer finishes its unpublished events in place. */
	ring_unpublished_at(r, 1)->latency_ns = 42;
	ring_publish(r);
	assert_int_equal(ring_unpublished(r), 0);
	assert_int_equal(drain(r, seqs), 2);
	assert_int_equal(seqs[0], 1);
	assert_int_equal(seqs[1], 2);
	assert_int_equal(ring_at(r, 1)->latency_ns, 42);
	assert_int_equal(ring_readable(r, &from), 0);
	assert_int_equal(from, 2);
	ring_destroy(r);
}

static void test_full_ring_drops_and_counts(void **state)
{
	(void)state;
	struct mcsnoop_ring *r = new_ring();
	uint64_t seqs[CAP];
	for (uint64_t i = 0; i < CAP; i++)
		assert_non_null(push(r, i));
	/* Full of unpublished events: no room, and no wait. */
	assert_null(push(r, 100));
	assert_null(push(r, 101));
	assert_int_equal(ring_drops(r), 2);
	ring_publish(r);
	assert_null(push(r, 102)); /* published but unread is still full */
	assert_int_equal(ring_drops(r), 3);
	/* Reading frees the slots. */
	assert_int_equal(drain(r, seqs), CAP);
	for (uint64_t i = 0; i < CAP; i++)
		assert_int_equal(seqs[i], i);
	assert_non_null(push(r, 103));
	assert_int_equal(ring_drops(r), 3);
	ring_destroy(r);
}

static void test_wraps_around_many_times(void **state)
{
	(void)state;
	struct mcsnoop_ring *r = new_ring();
	uint64_t seqs[CAP], next = 0, expect = 0;
	/* Batches of 1..CAP events published together, read in between. */
	for (unsigned round = 0; round < 1000; round++) {
		unsigned batch = 1 + round % CAP;
		for (unsigned i = 0; i < batch; i++)
			assert_non_null(push(r, next++));
		ring_publish(r);
		uint64_t n = drain(r, seqs);
		assert_int_equal(n, batch);
		for (uint64_t i = 0; i < n; i++)
			assert_int_equal(seqs[i], expect++);
	}
	assert_int_equal(ring_drops(r), 0);
	ring_destroy(r);
}

static void test_key_bytes_kept(void **state)
{
	(void)state;
	struct mcsnoop_ring *r = new_ring();
	struct mcsnoop_event *e = ring_reserve(r);
	static const char key[] = { 'k', 0, (char)0xff, ' ', '\\' };
	e->keylen = sizeof(key);
	memcpy(e->key, key, sizeof(key));
	ring_publish(r);
	uint64_t from;
	assert_int_equal(ring_readable(r, &from), 1);
	assert_int_equal(ring_at(r, from)->keylen, sizeof(key));
	assert_memory_equal(ring_at(r, from)->key, key, sizeof(key));
	ring_destroy(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_published_events_only_in_order),
		cmocka_unit_test(test_full_ring_drops_and_counts),
		cmocka_unit_test(test_wraps_around_many_times),
		cmocka_unit_test(test_key_bytes_kept),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
