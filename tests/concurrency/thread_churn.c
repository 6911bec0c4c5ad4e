/* SPDX-License-Identifier: MIT */
/* Concurrency test (TSan in `make tsan`): threads are born, hit a site and
 * exit while the main thread runs grace periods.  A thread's first hit
 * registers its reader and its exit unregisters it; neither may race with
 * a grace period that is looking at the registry.  A module attached
 * throughout must count every hit exactly. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "control/control.h"
#include "base/base.h"

#include <xprobes/probe.h>
#include <xprobes/site.h>

#define SPAWNERS 4
#define HITS_PER_THREAD 100
#define CYCLES 300
#define MIN_THREADS 2000 /* keep cycling until this many have come and gone */

static atomic_int stop;
static atomic_long hits_done, counted, b_count;

static __attribute__((noinline)) void hit(long n)
{
	XPROBES_SITE(churn_hit, (long), (n));
}

static void a_handler(long n)
{
	(void)n;
	atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed);
}

static void b_handler(long n)
{
	(void)n;
	atomic_fetch_add_explicit(&b_count, 1, memory_order_relaxed);
}

static const struct xprobes_probe_desc a_probes[] = {
	XPROBES_PROBE("churn_hit", a_handler, (long)),
};
static const struct xprobes_module_desc a_desc = { XPROBES_MODULE_ABI, sizeof(struct xprobes_module_desc), 0, NULL, 1, a_probes };
static const struct xprobes_probe_desc b_probes[] = {
	XPROBES_PROBE("churn_*", b_handler, (long)),
};
static const struct xprobes_module_desc b_desc = { XPROBES_MODULE_ABI, sizeof(struct xprobes_module_desc), 0, NULL, 1, b_probes };

static void *short_lived(void *arg)
{
	(void)arg;
	for (long i = 0; i < HITS_PER_THREAD; i++)
		hit(i);
	atomic_fetch_add(&hits_done, HITS_PER_THREAD);
	return NULL;
}

static void *spawner(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		pthread_t t;
		if (pthread_create(&t, NULL, short_lived, NULL) == 0)
			pthread_join(t, NULL);
	}
	return NULL;
}

int main(void)
{
	struct textbuf out;
	pthread_t sp[SPAWNERS];

	tb_init(&out, 1 << 16);
	pthread_mutex_lock(&xp_agent.lock);
	xp_rescan(NULL);
	if (xp_module_register("/churn/a.so", NULL, &a_desc, &out) != XP_OK)
		return 1;
	pthread_mutex_unlock(&xp_agent.lock);

	for (int i = 0; i < SPAWNERS; i++)
		pthread_create(&sp[i], NULL, spawner, NULL);
	int c;
	for (c = 0; c < 1000000 && (c < CYCLES || atomic_load(&hits_done) <
						     (long)MIN_THREADS * HITS_PER_THREAD);
	     c++) {
		pthread_mutex_lock(&xp_agent.lock);
		tb_reset(&out);
		if (xp_module_register("/churn/b.so", NULL, &b_desc, &out) != XP_OK)
			return 1;
		struct xp_module *b = xp_module_find("b.so", &out);
		xp_module_set_enabled(b, 0, NULL);
		xp_module_unload(b);
		pthread_mutex_unlock(&xp_agent.lock);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < SPAWNERS; i++)
		pthread_join(sp[i], NULL);

	long done = atomic_load(&hits_done), seen = atomic_load(&counted);
	printf("thread_churn: %d cycles, %ld threads, %ld hits, A counted %ld, B saw %ld\n", c,
	       done / HITS_PER_THREAD, done, seen, atomic_load(&b_count));
	if (done == 0 || seen != done)
		return 1;
	tb_free(&out);
	printf("1 passed, 0 failed\n");
	return 0;
}
