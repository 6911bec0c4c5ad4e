/* SPDX-License-Identifier: MIT */
/* mc_count: count memcached GETs and SETs, per key, through the typed sites
 * that xprobes-dtrace gives a `--enable-dtrace` memcached build.
 *
 *   xprobes PID load build/modules/mc_count.so
 *   xprobes PID command mc_count.so totals    -> "get N" / "set N" / "keys N"
 *   xprobes PID command mc_count.so keys      -> "COUNT_GET COUNT_SET KEY", busiest first
 *   xprobes PID command mc_count.so reset
 *
 * Keys are not NUL-terminated in memcached: they are read with keylen.
 * The table is fixed-size and lock-free (handlers run on every worker
 * thread and must not block); keys beyond its capacity are counted in the
 * totals and in "dropped", never silently lost.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xprobes/probe.h>

#define SLOTS 8192 /* power of two */
#define MAX_PROBES 32 /* bounded work per hit, even when the table is full */
#define MAX_KEY 250 /* memcached's KEY_MAX_LENGTH */

enum { EMPTY, FILLING, READY };

struct slot {
	atomic_int state;
	int len;
	atomic_ulong gets, sets;
	char key[MAX_KEY];
};

static struct slot table[SLOTS];
/* Each slot's key hash, apart from the slots: a probe sequence reads a few
 * cache lines of hashes and compares keys only on a match. */
static atomic_uint_least64_t hashes[SLOTS];
static atomic_ulong total_gets, total_sets, dropped, nkeys;

static uint64_t hash(const char *k, int len)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (int i = 0; i < len; i++)
		h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
	return h;
}

/* Find or claim the slot of a key; NULL when its neighbourhood is full. */
static struct slot *lookup(const char *key, int len)
{
	if (len <= 0 || len > MAX_KEY)
		return NULL;
	uint64_t h = hash(key, len) | 1; /* 0 marks a hash not yet written */
	for (unsigned probe = 0; probe < MAX_PROBES; probe++) {
		size_t i = (h + probe) & (SLOTS - 1);
		uint64_t seen = atomic_load_explicit(&hashes[i], memory_order_relaxed);
		if (seen && seen != h)
			continue; /* another key's slot */
		struct slot *s = &table[i];
		int st = atomic_load_explicit(&s->state, memory_order_acquire);
		if (st == EMPTY) {
			int expected = EMPTY;
			if (atomic_compare_exchange_strong(&s->state, &expected, FILLING)) {
				memcpy(s->key, key, (size_t)len);
				s->len = len;
				atomic_store_explicit(&hashes[i], h, memory_order_relaxed);
				atomic_store_explicit(&s->state, READY, memory_order_release);
				atomic_fetch_add(&nkeys, 1);
				return s;
			}
			st = expected;
		}
		while (st == FILLING) /* another thread is writing this key: brief */
			st = atomic_load_explicit(&s->state, memory_order_acquire);
		if (s->len == len && memcmp(s->key, key, (size_t)len) == 0)
			return s;
	}
	return NULL;
}

/* One GET or SET of a key: its total, and its key's count (or "dropped"). */
static void count_key(const char *key, int keylen, int is_set)
{
	atomic_fetch_add_explicit(is_set ? &total_sets : &total_gets, 1, memory_order_relaxed);
	struct slot *s = lookup(key, keylen);
	if (s)
		atomic_fetch_add_explicit(is_set ? &s->sets : &s->gets, 1, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
}

static void on_get(int connid, const char *key, int keylen, int size, int64_t casid)
{
	(void)connid, (void)size, (void)casid;
	count_key(key, keylen, 0);
}

static void on_set(int connid, const char *key, int keylen, int size, int64_t casid)
{
	(void)connid, (void)size, (void)casid;
	count_key(key, keylen, 1);
}

static int busiest_first(const void *a, const void *b)
{
	const struct slot *x = *(struct slot *const *)a, *y = *(struct slot *const *)b;
	unsigned long nx = atomic_load(&x->gets) + atomic_load(&x->sets);
	unsigned long ny = atomic_load(&y->gets) + atomic_load(&y->sets);
	if (nx != ny)
		return nx < ny ? 1 : -1;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return memcmp(x->key, y->key, (size_t)x->len);
}

static void print_keys(int (*out)(const char *))
{
	static struct slot *ready[SLOTS];
	size_t n = 0;
	char line[MAX_KEY + 64];

	for (size_t i = 0; i < SLOTS; i++)
		if (atomic_load_explicit(&table[i].state, memory_order_acquire) == READY)
			ready[n++] = &table[i];
	qsort(ready, n, sizeof(ready[0]), busiest_first);
	for (size_t i = 0; i < n; i++) {
		snprintf(line, sizeof(line), "%lu %lu %.*s\n", atomic_load(&ready[i]->gets),
			 atomic_load(&ready[i]->sets), ready[i]->len, ready[i]->key);
		if (out(line) < 0)
			break;
	}
}

static void command(const char *args, int (*out)(const char *))
{
	char line[160];

	if (strcmp(args, "totals") == 0 || *args == '\0') {
		snprintf(line, sizeof(line), "get %lu\nset %lu\nkeys %lu\ndropped %lu\n",
			 atomic_load(&total_gets), atomic_load(&total_sets), atomic_load(&nkeys),
			 atomic_load(&dropped));
		out(line);
	} else if (strcmp(args, "keys") == 0) {
		print_keys(out);
	} else if (strcmp(args, "reset") == 0) {
		/* Counts only: claimed keys stay (a handler may be using them). */
		for (size_t i = 0; i < SLOTS; i++) {
			atomic_store(&table[i].gets, 0);
			atomic_store(&table[i].sets, 0);
		}
		atomic_store(&total_gets, 0);
		atomic_store(&total_sets, 0);
		atomic_store(&dropped, 0);
		out("reset\n");
	} else {
		out("usage: command mc_count.so totals|keys|reset\n");
	}
}

XPROBES_MODULE(command, 0,
	XPROBES_PROBE("memcached:command__get", on_get,
		      (int, const char *, int, int, int64_t)),
	XPROBES_PROBE("memcached:command__set", on_set,
		      (int, const char *, int, int, int64_t)));
