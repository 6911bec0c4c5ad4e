/* SPDX-License-Identifier: MIT */
/* Counts the build-matrix program's sites; `command mod_build.so` prints
 * "item=N tick=N lib=N sum=S" (sum of item sizes, to check struct access). */
#include <stdatomic.h>
#include <stdio.h>

#include <xprobes/probe.h>

struct item {
	const char *key;
	int size;
};

static atomic_long items, ticks, libs, sizes;

static void on_item(const struct item *it, int i)
{
	(void)i;
	atomic_fetch_add(&items, 1);
	atomic_fetch_add(&sizes, it->size);
}

static void on_tick(long v)
{
	(void)v;
	atomic_fetch_add(&ticks, 1);
}

static void on_lib(int i)
{
	(void)i;
	atomic_fetch_add(&libs, 1);
}

static void command(const char *args, int (*out)(const char *))
{
	char buf[128];
	(void)args;
	snprintf(buf, sizeof(buf), "item=%ld tick=%ld lib=%ld sum=%ld\n", atomic_load(&items),
		 atomic_load(&ticks), atomic_load(&libs), atomic_load(&sizes));
	out(buf);
}

XPROBES_MODULE(command, 0,
	XPROBES_PROBE("build_item", on_item, (const struct item *, int)),
	XPROBES_PROBE("buildprov:tick__*", on_tick, (long)),
	XPROBES_PROBE("build_lib", on_lib, (int)));
