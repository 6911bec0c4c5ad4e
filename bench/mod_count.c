/* SPDX-License-Identifier: MIT */
/* mod_count: the trivial handler `make bench` attaches to hitloop's site.
 *
 * The handler only increments a counter.  Each hitloop thread passes its
 * own slot number, and slots are a cache line apart, so no two threads
 * write one line: what the bench measures is the site's dispatch, not
 * cache-line ping-pong.  `command mod_count.so` prints the total, which the
 * driver compares with the number of hits hitloop made.
 */
#include <stdio.h>

#include <xprobes/probe.h>

#define NSLOTS 16 /* hitloop's MAX_THREADS */

static struct {
	unsigned long hits;
} __attribute__((aligned(64))) slots[NSLOTS];

static void on_hit(unsigned long i, unsigned slot)
{
	(void)i;
	slots[slot % NSLOTS].hits++;
}

/* Read while the hitloop threads have finished (joined), so the plain
 * loads see their final values. */
static void command(const char *args, int (*out)(const char *msg))
{
	unsigned long total = 0;
	char line[64];

	(void)args;
	for (unsigned s = 0; s < NSLOTS; s++)
		total += __atomic_load_n(&slots[s].hits, __ATOMIC_RELAXED);
	snprintf(line, sizeof(line), "hits %lu\n", total);
	out(line);
}

XPROBES_MODULE(command, 0,
	XPROBES_PROBE("hit", on_hit, (unsigned long, unsigned)));
