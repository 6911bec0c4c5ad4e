/* SPDX-License-Identifier: MIT */
/* Test fixture for mclat --slow: memcached's gets of keys that begin with
 * "slow" made slow, from inside memcached, between process__command__start
 * and _end: the worker sleeps SLOW_NS (a sleep, not a spin: the request
 * takes at least that long whatever the scheduler does, and the busy
 * machine keeps its core).  Every other get is left alone. */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "memcached_probes.h"

#define SLOW_NS 250000000l

static void on_get(int connid, const char *key, int keylen, int size, int64_t casid)
{
	(void)connid, (void)size, (void)casid;
	if (keylen < 4 || memcmp(key, "slow", 4) != 0)
		return;
	struct timespec ts = { 0, SLOW_NS };
	while (nanosleep(&ts, &ts) != 0) {
	}
}

XPROBES_MODULE(NULL, 0, XPROBES_PROBE("memcached:command__get", on_get,
				      (int, const char *, int, int, int64_t)));
