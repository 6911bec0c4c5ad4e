/* SPDX-License-Identifier: MIT */
/* Test fixture for mclat: memcached's gets made slow, from
 * inside memcached, between process__command__start and _end.
 *
 *   get of any key but "hold"   spins 2 ms on the clock (a sleep would let
 *                               the scheduler blur what is measured)
 *   get hold                    spins until `command mod_delay.so release`
 *                               (at most 10 s): the worker is busy for as
 *                               long as the test wants
 *   command mod_delay.so holding  "holding 1" while a get hold spins
 *   command mod_delay.so spins  each spin's CLOCK_MONOTONIC start and end,
 *                               one "START END" line each (first 4096)
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "memcached_probes.h"

#define DELAY_NS 2000000ll
#define HOLD_MAX_NS 10000000000ll
#define SPINS 4096

static atomic_int released, holding;
static atomic_uint nspins;
static long long spins[SPINS][2];

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void on_get(int connid, const char *key, int keylen, int size, int64_t casid)
{
	(void)connid, (void)size, (void)casid;
	int hold = keylen == 4 && memcmp(key, "hold", 4) == 0;
	long long start = now_ns(), end = start;
	if (hold)
		atomic_store(&holding, 1);
	while (hold ? !atomic_load(&released) && end - start < HOLD_MAX_NS : end - start < DELAY_NS)
		end = now_ns();
	atomic_store(&holding, 0);
	unsigned i = atomic_fetch_add(&nspins, 1);
	if (i < SPINS) {
		spins[i][0] = start;
		spins[i][1] = end;
	}
}

static void command(const char *args, int (*out)(const char *))
{
	char line[64];
	if (strcmp(args, "release") == 0) {
		atomic_store(&released, 1);
		out("released\n");
	} else if (strcmp(args, "holding") == 0) {
		out(atomic_load(&holding) ? "holding 1\n" : "holding 0\n");
	} else if (strcmp(args, "spins") == 0) {
		unsigned n = atomic_load(&nspins);
		for (unsigned i = 0; i < n && i < SPINS; i++) {
			snprintf(line, sizeof(line), "%lld %lld\n", spins[i][0], spins[i][1]);
			out(line);
		}
	} else {
		out("usage: command mod_delay.so release | holding | spins\n");
	}
}

XPROBES_MODULE(command, 0, XPROBES_PROBE("memcached:command__get", on_get,
					 (int, const char *, int, int, int64_t)));
