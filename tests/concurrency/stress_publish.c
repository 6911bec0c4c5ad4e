/* SPDX-License-Identifier: MIT */
/* Concurrency test (run under TSan by `make tsan`): 8 threads hit a site as
 * fast as they can while the main thread loads, disables, enables and
 * unloads a second module 1,000 times.  A module attached throughout must
 * count every hit exactly once; the cycling module must never see a
 * thread's sequence numbers go backwards (a double or stale dispatch). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control.h"
#include "base/base.h"

#include <xprobes/probe.h>
#include <xprobes/site.h>

#define THREADS 8
#define CYCLES 1000

static atomic_int stop;
static long hits[THREADS]; /* written by thread i only */

static __attribute__((noinline)) void hit(int tid, long seq)
{
	XPROBES_SITE(stress_hit, (int, long), (tid, seq));
}

/* Module A: always attached.  Slots are per thread: no shared writes. */
static struct {
	long count, last;
	char pad[64 - 2 * sizeof(long)];
} a_slot[THREADS];
static atomic_long a_violations;

static void a_handler(int tid, long seq)
{
	if (seq <= a_slot[tid].last)
		atomic_fetch_add(&a_violations, 1);
	a_slot[tid].last = seq;
	a_slot[tid].count++;
}

/* Module B: cycled.  Several threads update its table concurrently, so
 * atomics; it only checks ordering per thread. */
static atomic_long b_last[THREADS], b_count, b_violations, b_after_unload;
static atomic_int b_unloaded; /* set by main once unload has returned */

static void b_handler(int tid, long seq)
{
	long prev = atomic_exchange(&b_last[tid], seq);
	if (seq <= prev)
		atomic_fetch_add(&b_violations, 1);
	atomic_fetch_add(&b_count, 1);
	/* Still running after unload returned = the grace period lied. */
	if (atomic_load(&b_unloaded))
		atomic_fetch_add(&b_after_unload, 1);
}

static const struct xprobes_probe_desc a_probes[] = {
	XPROBES_PROBE("stress_hit", a_handler, (int, long)),
};
static const struct xprobes_module_desc a_desc = { XPROBES_MODULE_ABI, sizeof(struct xprobes_module_desc), 0, NULL, 1, a_probes };
static const struct xprobes_probe_desc b_probes[] = {
	XPROBES_PROBE("stress_*", b_handler, (int, long)),
};
static const struct xprobes_module_desc b_desc = { XPROBES_MODULE_ABI, sizeof(struct xprobes_module_desc), 0, NULL, 1, b_probes };

static void *hitter(void *arg)
{
	int tid = (int)(long)arg;
	long seq = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		hit(tid, ++seq);
	hits[tid] = seq;
	return NULL;
}

static void must(int ok, const char *what, struct textbuf *out)
{
	if (!ok) {
		fprintf(stderr, "stress_publish: %s failed: %s\n", what, out->data ? out->data : "");
		exit(1);
	}
}

int main(void)
{
	struct textbuf out;
	pthread_t t[THREADS];

	tb_init(&out, 1 << 16);
	pthread_mutex_lock(&xp_agent.lock);
	xp_rescan(NULL);
	must(xp_module_register("/stress/a.so", NULL, &a_desc, &out) == XP_OK, "load a", &out);
	pthread_mutex_unlock(&xp_agent.lock);

	for (long i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, hitter, (void *)i);

	for (int c = 0; c < CYCLES; c++) {
		/* B's table restarts with each load: a fresh module instance. */
		for (int i = 0; i < THREADS; i++)
			atomic_store(&b_last[i], 0);
		atomic_store(&b_unloaded, 0);
		pthread_mutex_lock(&xp_agent.lock);
		tb_reset(&out);
		must(xp_module_register("/stress/b.so", NULL, &b_desc, &out) == XP_OK, "load b", &out);
		struct xp_module *b = xp_module_find("b.so", &out);
		must(b != NULL, "find b", &out);
		xp_module_set_enabled(b, 0, NULL);
		xp_module_set_enabled(b, 1, NULL);
		xp_module_unload(b);
		atomic_store(&b_unloaded, 1);
		pthread_mutex_unlock(&xp_agent.lock);
	}

	atomic_store(&stop, 1);
	long total = 0, counted = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		total += hits[i];
		counted += a_slot[i].count;
		if (a_slot[i].count != hits[i]) {
			fprintf(stderr, "thread %d: %ld hits, module A counted %ld\n", i,
				hits[i], a_slot[i].count);
			return 1;
		}
	}
	printf("stress_publish: %d cycles, %ld hits, A counted %ld, B saw %ld; violations A=%ld B=%ld; "
	       "B ran after unload: %ld\n",
	       CYCLES, total, counted, atomic_load(&b_count), atomic_load(&a_violations),
	       atomic_load(&b_violations), atomic_load(&b_after_unload));
	if (atomic_load(&a_violations) || atomic_load(&b_violations) ||
	    atomic_load(&b_after_unload) || total == 0 ||
	    atomic_load(&b_count) == 0)
		return 1;
	printf("1 passed, 0 failed\n");
	tb_free(&out);
	return 0;
}
