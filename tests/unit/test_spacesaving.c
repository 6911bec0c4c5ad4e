/* mctop's Space-Saving table (modules/mctop/spacesaving.h): exact while
 * keys fit, the Space-Saving bounds once they do not, binary-safe keys, a
 * consistent index and heap through many evictions, and readers on another
 * thread never seeing a torn counter. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "unit.h"
#include "../../modules/mctop/spacesaving.h"

/* Deterministic stream: xorshift64*. */
static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

/* Key i's bytes: binary, with NULs, of a length depending on i. */
static size_t make_key(uint32_t i, char *out)
{
	size_t len = 5 + i % 9; /* the last byte is not one of i's */
	memset(out, 0, len);
	memcpy(out, &i, sizeof(i));
	out[len - 1] = (char)(i * 7);
	return len;
}

/* Skewed, about 1/(i+1) (log-uniform): a scale nkeys >> j with j uniform,
 * then a key uniform below it.  No libm needed. */
static uint32_t skewed(uint32_t nkeys)
{
	uint32_t top = nkeys >> (next_rand() % 13);
	uint32_t k = (uint32_t)(next_rand() % ((uint64_t)top + 1));
	return k < nkeys ? k : nkeys - 1;
}

/* Every taken counter is found through the index, the index holds exactly
 * the taken counters, and the heap is a min-heap. */
static void check_structure(const struct ss_table *t)
{
	uint32_t indexed = 0;
	for (uint32_t i = 0; i <= t->mask; i++)
		indexed += t->index[i] != 0;
	assert_int_equal(indexed, t->used);
	for (uint32_t ci = 0; ci < t->used; ci++) {
		const struct ss_counter *c = &t->c[ci];
		uint32_t slot = ss_find(t, c->key, c->keylen, c->hash);
		assert_int_equal(t->index[slot], ci + 1);
		assert_int_equal(t->heap[c->heap_pos], ci);
	}
	for (uint32_t p = 1; p < t->used; p++)
		assert_true(ss_count(t, t->heap[(p - 1) / 2]) <= ss_count(t, t->heap[p]));
}

static void test_exact_while_keys_fit(void **state)
{
	(void)state;
	struct ss_table *t = ss_create(100);
	assert_non_null(t);
	uint64_t truth[100] = {0};
	char key[16];
	for (int n = 0; n < 20000; n++) {
		uint32_t k = skewed(100);
		truth[k]++;
		ss_add(t, key, make_key(k, key), SS_GET, -1);
	}
	check_structure(t);
	struct ss_snap s;
	uint32_t seen = 0;
	for (uint32_t i = 0; i < t->cap; i++) {
		if (!ss_read(t, i, &s))
			continue;
		uint32_t k;
		memcpy(&k, s.key, sizeof(k));
		assert_true(k < 100);
		assert_int_equal(s.keylen, make_key(k, key));
		assert_int_equal(s.count, truth[k]);
		assert_int_equal(s.err, 0);
		assert_int_equal(s.ncmd[SS_GET], truth[k]);
		seen++;
	}
	for (uint32_t k = 0; k < 100; k++)
		seen -= truth[k] != 0;
	assert_int_equal(seen, 0);
	ss_destroy(t);
}

static void test_bounds_hold_past_capacity(void **state)
{
	(void)state;
	enum { CAP = 64, KEYS = 5000, N = 200000 };
	static uint64_t truth[KEYS];
	struct ss_table *t = ss_create(CAP);
	assert_non_null(t);
	char key[16];
	for (int n = 0; n < N; n++) {
		uint32_t k = skewed(KEYS);
		truth[k]++;
		ss_add(t, key, make_key(k, key), SS_GET, -1);
		if (n % 9973 == 0)
			check_structure(t);
	}
	check_structure(t);
	static int tracked[KEYS];
	uint64_t sum = 0;
	struct ss_snap s;
	for (uint32_t i = 0; i < CAP; i++) {
		assert_true(ss_read(t, i, &s));
		uint32_t k;
		memcpy(&k, s.key, sizeof(k));
		assert_true(k < KEYS);
		/* count - err <= true <= count */
		assert_true(s.count - s.err <= truth[k]);
		assert_true(truth[k] <= s.count);
		assert_int_equal(s.count - s.err, s.ncmd[SS_GET]);
		tracked[k] = 1;
		sum += s.count;
	}
	/* Every increment adds one to some counter, evictions included. */
	assert_int_equal(sum, N);
	/* Whatever was seen more than N/CAP times has a counter. */
	for (uint32_t k = 0; k < KEYS; k++)
		if (truth[k] > N / CAP)
			assert_true(tracked[k]);
	ss_destroy(t);
}

static void test_binary_keys_and_sizes(void **state)
{
	(void)state;
	struct ss_table *t = ss_create(8);
	char long_key[SS_KEY_MAX];
	memset(long_key, 0xff, sizeof(long_key));
	ss_add(t, "a\0b", 3, SS_SET, 10);
	ss_add(t, "a\0c", 3, SS_GET, 10);
	ss_add(t, "a\0b", 3, SS_GET, -1); /* a miss: no size */
	ss_add(t, "a\0b", 3, SS_GET, 7);
	ss_add(t, "a", 1, SS_DELETE, -1);
	ss_add(t, long_key, sizeof(long_key), SS_INCR, -1);
	check_structure(t);
	struct ss_snap s;
	int found = 0;
	for (uint32_t i = 0; i < t->used; i++) {
		assert_true(ss_read(t, i, &s));
		if (s.keylen == 3 && memcmp(s.key, "a\0b", 3) == 0) {
			assert_int_equal(s.count, 3);
			assert_int_equal(s.ncmd[SS_SET], 1);
			assert_int_equal(s.ncmd[SS_GET], 2);
			assert_int_equal(s.objsize, 7);
			assert_int_equal(s.bytes, 17);
			found |= 1;
		} else if (s.keylen == 3) {
			assert_memory_equal(s.key, "a\0c", 3);
			assert_int_equal(s.count, 1);
			found |= 2;
		} else if (s.keylen == 1) {
			assert_int_equal(s.objsize, -1);
			assert_int_equal(s.ncmd[SS_DELETE], 1);
			found |= 4;
		} else {
			assert_int_equal(s.keylen, SS_KEY_MAX);
			assert_memory_equal(s.key, long_key, SS_KEY_MAX);
			found |= 8;
		}
	}
	assert_int_equal(found, 15);
	ss_clear(t);
	assert_int_equal(t->used, 0);
	for (uint32_t i = 0; i < t->cap; i++)
		assert_false(ss_read(t, i, &s));
	ss_add(t, "a\0c", 3, SS_GET, 1);
	check_structure(t);
	assert_true(ss_read(t, 0, &s));
	assert_int_equal(s.count, 1);
	assert_int_equal(s.err, 0);
	ss_destroy(t);
}

/* A reader copying counters while the writer evicts and counts.  A torn
 * copy would break the two invariants a counter keeps between windows:
 * count - err equals its per-command counts, and the key's bytes are the
 * pattern its length and first byte say. */
static struct ss_table *shared;
static atomic_int writer_done;

static size_t pattern_key(uint32_t k, char *out)
{
	size_t len = 1 + k % SS_KEY_MAX;
	memset(out, (char)k, len);
	return len;
}

static void *writer(void *arg)
{
	(void)arg;
	char key[SS_KEY_MAX];
	for (int n = 0; n < 1000000; n++) {
		uint32_t k = skewed(2000);
		ss_add(shared, key, pattern_key(k, key), (unsigned)n % SS_NCMD, n % 3 ? 5 : -1);
	}
	atomic_store(&writer_done, 1);
	return NULL;
}

static void test_readers_never_see_torn_counters(void **state)
{
	(void)state;
	shared = ss_create(32);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, writer, NULL), 0);
	struct ss_snap s;
	unsigned long copies = 0;
	do {
		for (uint32_t i = 0; i < shared->cap; i++) {
			if (!ss_read(shared, i, &s))
				continue;
			uint64_t per_cmd = 0;
			for (unsigned k = 0; k < SS_NCMD; k++)
				per_cmd += s.ncmd[k];
			assert_int_equal(s.count - s.err, per_cmd);
			char want[SS_KEY_MAX];
			assert_true(s.keylen >= 1);
			memset(want, s.key[0], s.keylen);
			assert_memory_equal(s.key, want, s.keylen);
			/* Some key number below 2000 gives both the length and the byte. */
			int ok = 0;
			for (uint32_t k = (unsigned char)s.key[0]; k < 2000 && !ok; k += 256)
				ok = 1 + k % SS_KEY_MAX == s.keylen;
			assert_true(ok);
			copies++;
		}
	} while (!atomic_load(&writer_done));
	pthread_join(th, NULL);
	assert_true(copies > 0);
	check_structure(shared);
	ss_destroy(shared);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_while_keys_fit),
		cmocka_unit_test(test_bounds_hold_past_capacity),
		cmocka_unit_test(test_binary_keys_and_sizes),
		cmocka_unit_test(test_readers_never_see_torn_counters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
