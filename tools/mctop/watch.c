/* SPDX-License-Identifier: MIT */
/* mctop on a memcached without probe sites: memcached's own `watch
 * fetchers mutations` stream (tools/common/mcwatch.c), counted here.
 *
 * A thread of ours reads the stream as fast as memcached writes it (if
 * we fell behind, memcached would skip lines; and its workers drop
 * entries when its logger thread falls behind: both are counted as lost
 * and shown) and counts every key exactly, until the budget is spent;
 * keys first seen after that are counted as untracked, as the module
 * does.  Each look renders the table in the module's raw format and
 * parses it with raw.c, so sample.c, the front ends and --metrics are the
 * probes path's, unchanged.  What the stream cannot see is absent rather
 * than zero: latency (no timestamps of the command's start and end), the
 * touch, incr, decr and delete commands (memcached logs their lookup as
 * an item_get, which counts as a get). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/common.h"
#include "core.h"

/* One key's counts. */
struct wkey {
	uint64_t calls, bytes, first_ns, cfd_bits;
	int64_t objsize;
	uint64_t ncmd[MC_NCMD];
	size_t keylen;
	unsigned char key[]; /* keylen bytes */
};

struct mctop_watch {
	struct mcwatch w;
	pthread_t thread;
	pthread_mutex_t lock;
	int started;
	volatile int stop;
	int dead;            /* the stream ended: the next look says so */
	struct wkey **slots; /* open addressing, cap a power of two */
	size_t cap, nkeys;
	size_t used, budget; /* bytes of the table and its keys */
	uint64_t total, untracked;
	uint64_t skipped, ambiguous; /* the stream's, copied under lock */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t hash(const unsigned char *k, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ k[i]) * 1099511628211ull;
	return h;
}

static int grow(struct mctop_watch *mw)
{
	size_t cap = mw->cap ? 2 * mw->cap : 1024;
	if (mw->used + cap * sizeof(void *) > mw->budget)
		return -1;
	struct wkey **slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -1;
	for (size_t i = 0; i < mw->cap; i++) {
		struct wkey *k = mw->slots[i];
		if (!k)
			continue;
		size_t j = hash(k->key, k->keylen) & (cap - 1);
		while (slots[j])
			j = (j + 1) & (cap - 1);
		slots[j] = k;
	}
	free(mw->slots);
	mw->used += (cap - mw->cap) * sizeof(void *);
	mw->slots = slots;
	mw->cap = cap;
	return 0;
}

/* The key's counter, made if the budget allows; NULL otherwise. */
static struct wkey *find(struct mctop_watch *mw, const unsigned char *key, size_t n)
{
	if (mw->nkeys * 2 >= mw->cap && grow(mw) && !mw->cap)
		return NULL;
	size_t j = hash(key, n) & (mw->cap - 1);
	for (struct wkey *k; (k = mw->slots[j]); j = (j + 1) & (mw->cap - 1))
		if (k->keylen == n && !memcmp(k->key, key, n))
			return k;
	size_t size = sizeof(struct wkey) + n;
	/* Full: a table that could not grow takes no more than 3/4 load. */
	if (mw->used + size > mw->budget || mw->nkeys * 4 >= mw->cap * 3)
		return NULL;
	struct wkey *k = calloc(1, size);
	if (!k)
		return NULL;
	k->keylen = n;
	memcpy(k->key, key, n);
	k->objsize = -1;
	k->first_ns = mono_ns();
	mw->slots[j] = k;
	mw->nkeys++;
	mw->used += size;
	return k;
}

static int command_of(const struct mcwatch_event *e)
{
	static const char *const stores[] = { [MC_SET] = "set", [MC_ADD] = "add",
					      [MC_REPLACE] = "replace", [MC_APPEND] = "append",
					      [MC_PREPEND] = "prepend", [MC_CAS] = "cas" };
	if (!e->store)
		return strcmp(e->status, "found") == 0 ? MC_GET_HIT : MC_GET_MISS;
	for (int c = MC_SET; c <= MC_CAS; c++)
		if (strcmp(e->cmd, stores[c]) == 0)
			return c;
	return MC_SET;
}

static void count(struct mctop_watch *mw, const struct mcwatch_event *e)
{
	pthread_mutex_lock(&mw->lock);
	mw->skipped = mw->w.skipped;
	mw->ambiguous = mw->w.ambiguous;
	mw->total++;
	struct wkey *k = find(mw, e->key, e->keylen);
	if (!k) {
		mw->untracked++;
	} else {
		int c = command_of(e);
		k->calls++;
		k->ncmd[c]++;
		if (c != MC_GET_MISS) {
			k->objsize = e->size;
			k->bytes += (uint64_t)e->size;
		}
		if (e->cfd >= 0) /* a 64-bit linear counter of the connections */
			k->cfd_bits |= 1ull << (hash((const unsigned char *)&e->cfd,
						     sizeof(e->cfd)) & 63);
	}
	pthread_mutex_unlock(&mw->lock);
}

static void *reader(void *arg)
{
	struct mctop_watch *mw = arg;
	struct mcwatch_event e;
	while (!mw->stop) {
		int rc = mcwatch_next(&mw->w, &e, 100, "mctop");
		if (rc < 0) {
			pthread_mutex_lock(&mw->lock);
			mw->dead = 1;
			pthread_mutex_unlock(&mw->lock);
			break;
		}
		if (rc == 1) {
			count(mw, &e);
		} else if (mw->skipped != mw->w.skipped || mw->ambiguous != mw->w.ambiguous) {
			pthread_mutex_lock(&mw->lock); /* a skipped= line, then quiet */
			mw->skipped = mw->w.skipped;
			mw->ambiguous = mw->w.ambiguous;
			pthread_mutex_unlock(&mw->lock);
		}
	}
	return NULL;
}

struct mctop_watch *mctop_watch_start(pid_t pid, unsigned port, size_t budget)
{
	struct mctop_watch *mw = calloc(1, sizeof(*mw));
	if (!mw) {
		fprintf(stderr, "mctop: out of memory\n");
		return NULL;
	}
	mw->budget = budget ? budget : MCTOP_DEFAULT_BUDGET;
	pthread_mutex_init(&mw->lock, NULL);
	if (mcwatch_open(&mw->w, pid, port, "mctop") != 0) {
		mctop_watch_stop(mw);
		return NULL;
	}
	if (pthread_create(&mw->thread, NULL, reader, mw) != 0) {
		fprintf(stderr, "mctop: cannot start the thread that reads memcached's watch\n");
		mctop_watch_stop(mw);
		return NULL;
	}
	mw->started = 1;
	return mw;
}

static void clear(struct mctop_watch *mw)
{
	for (size_t i = 0; i < mw->cap; i++)
		free(mw->slots[i]);
	free(mw->slots);
	mw->slots = NULL;
	mw->cap = mw->nkeys = mw->used = 0;
	mw->total = mw->untracked = 0;
}

void mctop_watch_stop(struct mctop_watch *mw)
{
	if (!mw)
		return;
	mw->stop = 1;
	if (mw->started)
		pthread_join(mw->thread, NULL);
	/* Closing is what makes memcached drop the watcher (its next write
	 * fails), so its logger stops formatting lines for us. */
	mcwatch_close(&mw->w);
	clear(mw);
	pthread_mutex_destroy(&mw->lock);
	free(mw);
}

void mctop_watch_reset(struct mctop_watch *mw)
{
	pthread_mutex_lock(&mw->lock);
	clear(mw);
	pthread_mutex_unlock(&mw->lock);
}

static uint64_t weight(const struct wkey *k, unsigned mask)
{
	if (!mask)
		return k->calls;
	uint64_t n = 0;
	for (int c = 0; c < MC_NCMD; c++)
		if (mask & (1u << c))
			n += k->ncmd[c];
	return n;
}

static unsigned sort_mask;
static int busiest(const void *a, const void *b)
{
	uint64_t x = weight(*(struct wkey *const *)a, sort_mask);
	uint64_t y = weight(*(struct wkey *const *)b, sort_mask);
	return x < y ? 1 : x > y ? -1 : 0;
}

/* Append to a growing string; -1 when out of memory. */
static int put(char **s, size_t *len, size_t *cap, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int put(char **s, size_t *len, size_t *cap, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(*s + *len, *cap - *len, fmt, ap);
		va_end(ap);
		if (n < 0)
			return -1;
		if ((size_t)n < *cap - *len) {
			*len += (size_t)n;
			return 0;
		}
		char *grown = realloc(*s, *cap * 2 + (size_t)n);
		if (!grown)
			return -1;
		*s = grown;
		*cap = *cap * 2 + (size_t)n;
	}
}

/* The table as the module's "top N raw" would answer; malloc'd, or NULL. */
static char *render(struct mctop_watch *mw, size_t rows, unsigned mask)
{
	struct wkey **all = malloc((mw->nkeys ? mw->nkeys : 1) * sizeof(*all));
	size_t cap = 4096, len = 0, n = 0;
	char *s = malloc(cap);
	if (!all || !s)
		goto fail;
	for (size_t i = 0; i < mw->cap; i++)
		if (mw->slots[i])
			all[n++] = mw->slots[i];
	sort_mask = mask; /* qsort has no argument; set and used under mw->lock */
	qsort(all, n, sizeof(*all), busiest);
	size_t shown = n < rows ? n : rows;
	/* Counts are exact: a key not shown has at most the last shown's
	 * count, or, if it was never tracked, all the untracked commands. */
	uint64_t bound = shown < n ? all[shown]->calls : 0;
	if (mw->untracked > bound)
		bound = mw->untracked;
	if (put(&s, &len, &cap, "mctop 1 now_ns=%llu total=%llu tracked=%zu untracked=%llu "
				"threads=0 counters=%zu bytes=%zu budget=%zu bound=%llu\n",
		(unsigned long long)mono_ns(), (unsigned long long)mw->total, n,
		(unsigned long long)mw->untracked, n, mw->used, mw->budget,
		(unsigned long long)bound))
		goto fail;
	for (size_t i = 0; i < shown; i++) {
		const struct wkey *k = all[i];
		char key[MCTOP_KEY_ESCAPED];
		mcwatch_escape(k->key, k->keylen, key, sizeof(key));
		if (put(&s, &len, &cap, "%s\t%llu\t0\t%lld\t%llu\t0\t0\t%llu\t%d", key,
			(unsigned long long)k->calls, (long long)k->objsize,
			(unsigned long long)k->bytes, (unsigned long long)k->first_ns,
			__builtin_popcountll(k->cfd_bits)))
			goto fail;
		for (int c = 0; c < MC_NCMD; c++)
			if (put(&s, &len, &cap, "\t%llu", (unsigned long long)k->ncmd[c]))
				goto fail;
		if (put(&s, &len, &cap, "\t0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
					"0,0,0,0,0,0\n"))
			goto fail;
	}
	if (put(&s, &len, &cap, "end\n"))
		goto fail;
	free(all);
	return s;
fail:
	free(all);
	free(s);
	return NULL;
}

int mctop_watch_look(struct mctop_watch *mw, size_t rows, unsigned mask, struct mctop_raw *r)
{
	pthread_mutex_lock(&mw->lock);
	int dead = mw->dead;
	char *text = dead ? NULL : render(mw, rows, mask);
	uint64_t skipped = mw->skipped, ambiguous = mw->ambiguous;
	pthread_mutex_unlock(&mw->lock);
	if (dead)
		return -1; /* the reader said why */
	if (!text) {
		fprintf(stderr, "mctop: out of memory\n");
		return -1;
	}
	/* Lines memcached's workers dropped never reach any watcher: lost too;
	 * and lines it skipped are in its statistics before the stream says
	 * so (if it ever does).  Asked outside the lock: the reader thread
	 * never touches the statistics' fields. */
	unsigned long long dropped = 0, stat_skipped = 0;
	mcwatch_stats(&mw->w, MCWATCH_STATS_MS, &dropped, &stat_skipped);
	uint64_t lost = (stat_skipped > skipped ? stat_skipped : skipped) + ambiguous + dropped;
	char why[256];
	int rc = mctop_raw_parse(text, r, why, sizeof(why));
	free(text);
	if (rc) {
		fprintf(stderr, "mctop: %s\n", why);
		return -1;
	}
	r->lat_every = 0; /* no latency at all */
	r->lost = lost;
	return 0;
}
