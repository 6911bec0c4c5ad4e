/* SPDX-License-Identifier: MIT */
/* mctop's per-worker feed (modules/mctop/feed.h): records of any key
 * length come out whole and in order, across wrap-arounds that leave a
 * padding record or a remainder too small for one, short records
 * (feed_write_short) among long ones; a feed holding
 * unread bytes drops and counts instead of waiting, and has room again
 * once read; a key is copied by words byte for byte, never past its end
 * on either side; the writer knows when more than a given share is unread
 * (mctop wakes its drainer then).  (Both sides at once, under TSan: tests/concurrency/
 * mctop_feed.c.) */
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "../../modules/mctop/feed.h"

#define SIZE 4096

static struct feed *new_feed(void)
{
	struct feed *f = feed_create(SIZE);
	if (!f)
		abort();
	return f;
}

static void key_of(uint64_t seq, char *key, unsigned len)
{
	for (unsigned i = 0; i < len; i++)
		key[i] = (char)(seq * 31 + i);
}

/* With shorts set, every third record is a short one (feed_write_short):
 * no connid nor lat_ns, and seq's low six bits beside its kind. */
static int shorts;

static int is_short(uint64_t seq)
{
	return shorts && seq % 3 == 2;
}

static int put(struct feed *f, uint64_t seq, unsigned keylen)
{
	char key[255];
	key_of(seq, key, keylen);
	if (is_short(seq)) {
		if (!feed_write_short(f, (unsigned)(seq % 12), (unsigned)(seq & FEED_AUX_MAX),
				      (int32_t)seq * 7, key, keylen))
			return -1;
		feed_publish(f);
		return 0;
	}
	return feed_put(f, FEED_KEY, (unsigned)(seq % 12), (int32_t)seq, (int32_t)seq * 7,
			(uint32_t)(seq * 11), key, keylen);
}

/* Read every record; each must be the next seq, whole.  Returns how many. */
static unsigned take(struct feed *f, uint64_t *next_seq)
{
	uint64_t pos = feed_tail(f), head = feed_head(f);
	const struct feed_rec *r;
	unsigned n = 0;
	while ((r = feed_next(f, &pos, head))) {
		uint64_t seq = *next_seq;
		char key[255];
		key_of(seq, key, r->keylen);
		assert_int_equal(r->cmd, seq % 12);
		assert_int_equal(r->value, (int64_t)seq * 7);
		if (is_short(seq)) {
			assert_int_equal(feed_kind(r), FEED_KEY_SHORT);
			assert_int_equal(feed_aux(r), seq & FEED_AUX_MAX);
			assert_ptr_equal(feed_key(r), (const char *)r + FEED_HDR_SHORT);
			/* 8 bytes of header, the key, rounded up to words: 16 at least. */
			unsigned bytes = FEED_HDR_SHORT + r->keylen;
			assert_int_equal(r->words * 8u, bytes < 16 ? 16 : (bytes + 7) & ~7u);
		} else {
			assert_int_equal(r->kind, FEED_KEY);
			assert_int_equal(r->connid, (int32_t)seq);
			assert_int_equal(r->lat_ns, (uint32_t)(seq * 11));
			assert_ptr_equal(feed_key(r), (const char *)(r + 1));
		}
		assert_memory_equal(feed_key(r), key, r->keylen);
		(*next_seq)++;
		n++;
	}
	assert_int_equal(pos, head);
	feed_consume(f, pos);
	return n;
}

static void test_records_whole_and_in_order_across_wraps(void **state)
{
	(void)state;
	struct feed *f = new_feed();
	uint64_t next = 0, want = 0;
	/* Key lengths 0..255 in turn: record sizes 16..272 bytes, so the
	 * wrap point lands everywhere, the 8-byte remainder included; short
	 * records (16..264 bytes) among them shift it by 8 more. */
	shorts = 1;
	for (unsigned round = 0; round < 3000; round++) {
		unsigned batch = 1 + round % 9;
		for (unsigned i = 0; i < batch; i++, next++)
			assert_int_equal(put(f, next, (unsigned)(next % 256)), 0);
		assert_int_equal(take(f, &want), batch);
	}
	shorts = 0;
	assert_int_equal(want, next);
	assert_true(feed_head(f) > 20 * SIZE); /* it wrapped many times */
	assert_int_equal(feed_drops(f), 0);
	feed_destroy(f);
}

static void test_full_feed_drops_and_counts(void **state)
{
	(void)state;
	struct feed *f = new_feed();
	uint64_t seq = 0, want = 0;
	/* 32-byte records (16 of header): 128 fit in 4096 bytes. */
	while (put(f, seq, 16) == 0)
		seq++;
	assert_int_equal(FEED_HDR, 16);
	assert_int_equal(seq, SIZE / 32);
	assert_int_equal(feed_drops(f), 1);
	assert_int_equal(put(f, 999, 0), -1); /* even the smallest: no wait, no room */
	assert_int_equal(feed_drops(f), 2);
	assert_int_equal(take(f, &want), seq);
	assert_int_equal(put(f, seq, 16), 0); /* read: room again */
	assert_int_equal(feed_drops(f), 2);
	feed_destroy(f);
}

/* A short record is 8 bytes less than a long one of the same key, 16 at
 * least (the reader takes less at the ring's end for padding), and a full
 * feed drops it as it drops a long one. */
static void test_short_records_are_smaller_and_drop_alike(void **state)
{
	(void)state;
	struct feed *f = new_feed();
	static const unsigned keylen[] = { 0, 1, 8, 9, 16, 17, 250 };
	static const unsigned bytes[] = { 16, 16, 16, 24, 24, 32, 264 };
	char key[255] = { 0 };
	for (unsigned i = 0; i < sizeof(keylen) / sizeof(keylen[0]); i++) {
		uint64_t before = f->wpos;
		struct feed_rec *r = feed_write_short(f, 3, FEED_AUX_MAX, 5, key, keylen[i]);
		assert_non_null(r);
		assert_int_equal(f->wpos - before, bytes[i]);
		assert_int_equal(feed_aux(r), FEED_AUX_MAX);
		assert_int_equal(feed_kind(r), FEED_KEY_SHORT);
	}
	feed_publish(f);
	uint64_t pos = feed_tail(f), head = feed_head(f);
	while (feed_next(f, &pos, head))
		;
	feed_consume(f, pos);
	unsigned n = 0;
	while (feed_write_short(f, 0, 0, -1, key, 9))
		n++;
	/* From byte 392 (the sizes above): 154 records to 4088, 8 bytes of
	 * padding, then 16 more before the reader's 392. */
	assert_int_equal(head, 392);
	assert_int_equal(n, 154 + 16);
	assert_int_equal(feed_drops(f), 1);
	feed_destroy(f);
}

static void test_a_record_never_wraps(void **state)
{
	(void)state;
	struct feed *f = new_feed();
	uint64_t seq = 0, want = 0;
	/* Fill to a header's 16 bytes short of the end, read it all, then a
	 * record of 272 bytes: it must start at 0, after padding, in one
	 * piece. */
	while (feed_head(f) + 32 <= SIZE - 16)
		assert_int_equal(put(f, seq++, 16), 0);
	while (feed_head(f) < SIZE - 16)
		assert_int_equal(put(f, seq++, 0), 0);
	take(f, &want);
	assert_int_equal(put(f, seq++, 255), 0);
	assert_int_equal(feed_head(f), SIZE + 272);
	assert_int_equal(take(f, &want), 1);
	assert_int_equal(want, seq);
	feed_destroy(f);
}

/* feed_over: whether more than LIMIT bytes are unread, as the writer
 * sees it.  It must notice the reader's progress (or the drainer would be
 * woken once and never again) and count held-back records too. */
static void test_over_a_limit_follows_the_reader(void **state)
{
	(void)state;
	struct feed *f = new_feed();
	uint64_t seq = 0, next = 0;
	assert_false(feed_over(f, SIZE / 2));
	while (!feed_over(f, SIZE / 2))
		assert_int_equal(put(f, seq++, 48), 0);
	/* 48 bytes of key, 16 of header: the first record past half. */
	assert_int_equal(seq, SIZE / 2 / 64 + 1);
	assert_true(feed_over(f, SIZE / 2)); /* still, until read */
	assert_int_equal(take(f, &next), seq);
	assert_false(feed_over(f, SIZE / 2)); /* it sees the reader gave all back */
	assert_false(feed_over(f, 0));
	/* Written and not published counts: the bytes are taken all the same. */
	char key[48] = { 0 };
	for (unsigned i = 0; i < SIZE / 2 / 64; i++)
		assert_non_null(feed_write(f, FEED_KEY, 0, 0, 0, 0, key, sizeof(key)));
	assert_false(feed_over(f, SIZE / 2));
	assert_non_null(feed_write(f, FEED_KEY, 0, 0, 0, 0, key, sizeof(key)));
	assert_true(feed_over(f, SIZE / 2));
	feed_destroy(f);
}

static void test_bad_sizes_refused(void **state)
{
	(void)state;
	assert_null(feed_create(1000));  /* not a power of two */
	assert_null(feed_create(2048));  /* too small */
}

#define HELD "held-key-0123456789abcd" /* 24 bytes: 40-byte records */

/* Records written and not yet published are the writer's: the reader
 * sees none of them, the writer walks them (across the ring's end, past
 * its padding) and changes them, and publishing hands them over changed. */
static void test_unpublished_records_wait_and_can_be_changed(void **state)
{
	(void)state;
	struct feed *f = new_feed();
	uint64_t seq = 0, next = 0;
	while (f->wpos < SIZE - 100) /* 64-byte records: to 64 short of the end */
		assert_int_equal(put(f, seq++, 48), 0);
	assert_int_equal(take(f, &next), seq);
	uint64_t from = f->wpos;
	for (unsigned i = 0; i < 4; i++) /* 40 bytes each: the second one wraps */
		assert_non_null(feed_write(f, FEED_KEY, 3, 77, (int32_t)i, 5, HELD, 24));
	assert_int_equal(f->wpos - from, 4 * 40 + 24); /* padding before the one that wrapped */
	assert_true(feed_head(f) == from); /* none visible */
	uint64_t pos = feed_tail(f);
	assert_null(feed_next(f, &pos, feed_head(f)));
	pos = from;
	struct feed_rec *r;
	unsigned n = 0;
	while ((r = feed_unpublished(f, &pos))) {
		assert_int_equal(r->value, (int32_t)n);
		r->lat_ns = 1000 + n++;
	}
	assert_int_equal(n, 4);
	assert_true(pos == f->wpos);
	feed_publish(f);
	pos = feed_tail(f);
	const struct feed_rec *c;
	n = 0;
	while ((c = feed_next(f, &pos, feed_head(f)))) {
		assert_int_equal(c->connid, 77);
		assert_int_equal(c->value, (int32_t)n);
		assert_int_equal(c->lat_ns, 1000 + n);
		assert_memory_equal(c + 1, HELD, 24);
		n++;
	}
	assert_int_equal(n, 4);
	feed_destroy(f);
}

/* feed_copy_key: every length from 0 to 255 copies exactly the key, from
 * a key that ends where its buffer ends (ASan catches a read past it), and
 * leaves the bytes after it as they were. */
static void test_key_copy_exact_at_every_length(void **state)
{
	(void)state;
	for (unsigned len = 0; len < 256; len++) {
		char *key = malloc(len ? len : 1);
		unsigned char dst[272];
		assert_non_null(key);
		key_of(len, key, len);
		memset(dst, 0xa5, sizeof(dst));
		feed_copy_key(dst, key, len);
		if (len)
			assert_memory_equal(dst, key, len);
		for (unsigned i = len; i < sizeof(dst); i++)
			assert_int_equal(dst[i], 0xa5);
		free(key);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unpublished_records_wait_and_can_be_changed),
		cmocka_unit_test(test_records_whole_and_in_order_across_wraps),
		cmocka_unit_test(test_full_feed_drops_and_counts),
		cmocka_unit_test(test_a_record_never_wraps),
		cmocka_unit_test(test_short_records_are_smaller_and_drop_alike),
		cmocka_unit_test(test_bad_sizes_refused),
		cmocka_unit_test(test_key_copy_exact_at_every_length),
		cmocka_unit_test(test_over_a_limit_follows_the_reader),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
