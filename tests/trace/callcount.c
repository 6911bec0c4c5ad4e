/* SPDX-License-Identifier: MIT */
/* Counting, independently of the tracer, the records it should write:
 * linked into a test build of memcached compiled with
 * -finstrument-functions (scripts/build-memcached.sh traced), whose every
 * function then calls these two around its body.
 *
 * A call counts when its function's patch site is, at its entry, a call
 * to the trampoline (0xe8): tracing is on for it, so the tracer records
 * its entry, and its exit whenever it returns.  Each counted call is two
 * records, counted at enter and at exit.  Per-thread counters (no shared
 * line on the hot path), listed for the total; at exit the total goes to
 * the file XP_CALLCOUNT_FILE names, as "records=N".
 *
 * Compiled without -finstrument-functions and without patchable entries. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_DEPTH 65536

struct counts {
	uint64_t records;
	uint32_t depth;
	uint64_t counted[MAX_DEPTH / 64]; /* per open call: was it counted */
	struct counts *next;
};

static struct counts *_Atomic all;
static __thread struct counts *mine;

void __cyg_profile_func_enter(void *fn, void *site) __attribute__((no_instrument_function));
void __cyg_profile_func_exit(void *fn, void *site) __attribute__((no_instrument_function));

static __attribute__((no_instrument_function)) struct counts *me(void)
{
	if (!mine) {
		struct counts *c = calloc(1, sizeof(*c));
		if (!c)
			abort();
		c->next = atomic_load(&all);
		while (!atomic_compare_exchange_weak(&all, &c->next, c))
			;
		mine = c;
	}
	return mine;
}

void __cyg_profile_func_enter(void *fn, void *site)
{
	(void)site;
	struct counts *c = me();
	uint32_t d = c->depth++;
	int on = *(volatile const uint8_t *)fn == 0xe8;
	if (d < MAX_DEPTH) {
		uint64_t bit = 1ull << (d % 64);
		c->counted[d / 64] = on ? c->counted[d / 64] | bit : c->counted[d / 64] & ~bit;
	}
	c->records += on;
}

void __cyg_profile_func_exit(void *fn, void *site)
{
	(void)fn;
	(void)site;
	struct counts *c = me();
	if (!c->depth)
		return;
	uint32_t d = --c->depth;
	if (d < MAX_DEPTH)
		c->records += c->counted[d / 64] >> (d % 64) & 1;
}

static __attribute__((destructor, no_instrument_function)) void report(void)
{
	const char *path = getenv("XP_CALLCOUNT_FILE");
	if (!path)
		return;
	uint64_t total = 0;
	for (struct counts *c = atomic_load(&all); c; c = c->next)
		total += c->records;
	FILE *f = fopen(path, "w");
	if (f) {
		fprintf(f, "records=%llu\n", (unsigned long long)total);
		fclose(f);
	}
}
