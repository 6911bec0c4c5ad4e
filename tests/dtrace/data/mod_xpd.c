/* SPDX-License-Identifier: MIT */
/* Counts xpdtest:tick and xpdtest:lib__call hits; checks tick's arguments
 * arrive converted to the .d types whatever the call site passed.
 *   command mod_xpd.so count   -> "count TICKS LIBCALLS BAD"
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <xprobes/probe.h>

static atomic_long ticks, libcalls, bad;

static void on_tick(int i, const char *label, uint64_t big, void *ptr)
{
	if (i <= 0 || strcmp(label, "label") || big != (uint64_t)i << 33 ||
	    *(const int *)ptr != 42)
		atomic_fetch_add(&bad, 1);
	atomic_fetch_add(&ticks, 1);
}

static void on_lib(int n)
{
	if (n <= 0)
		atomic_fetch_add(&bad, 1);
	atomic_fetch_add(&libcalls, 1);
}

static void command(const char *args, int (*out)(const char *msg))
{
	char line[96];

	if (!strcmp(args, "count")) {
		snprintf(line, sizeof(line), "count %ld %ld %ld\n", atomic_load(&ticks),
			 atomic_load(&libcalls), atomic_load(&bad));
		out(line);
	} else {
		out("usage: count\n");
	}
}

XPROBES_MODULE(command, 0,
	XPROBES_PROBE("xpdtest:tick", on_tick, (int, const char *, uint64_t, void *)),
	XPROBES_PROBE("xpdtest:lib__call", on_lib, (int)));
