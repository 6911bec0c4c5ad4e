/* Test fixture for mclat (issue 12): every get waits 2 ms inside
 * memcached, between process__command__start and _end, on the worker
 * thread, so mclat's memcached stage must grow by 2 ms and no other.
 * Spinning on the clock, not sleeping: a sleep would let the scheduler
 * run another thread and blur what is measured. */
#define _GNU_SOURCE
#include <time.h>

#include "memcached_probes.h"

#define DELAY_NS 2000000ll

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void on_get(int connid, const char *key, int keylen, int size, int64_t casid)
{
	(void)connid, (void)key, (void)keylen, (void)size, (void)casid;
	long long until = now_ns() + DELAY_NS;
	while (now_ns() < until)
		;
}

XPROBES_MODULE(NULL, 0, XPROBES_PROBE("memcached:command__get", on_get,
				      (int, const char *, int, int, int64_t)));
