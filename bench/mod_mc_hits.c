/* SPDX-License-Identifier: MIT */
/* The memcached benchmark's counting probe: GET and SET hits, nothing
 * else, so the figure is the cost of the sites and the dispatch rather
 * than of a module's bookkeeping (modules/mc_count.c keeps a per-key
 * table, which costs more on a workload of many distinct keys).
 * `command mod_mc_hits.so` prints "get N" and "set N". */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include <xprobes/probe.h>

static atomic_ulong gets, sets;

static void on_get(int connid, const char *key, int keylen, int size, int64_t casid)
{
	(void)connid, (void)key, (void)keylen, (void)size, (void)casid;
	atomic_fetch_add_explicit(&gets, 1, memory_order_relaxed);
}

static void on_set(int connid, const char *key, int keylen, int size, int64_t casid)
{
	(void)connid, (void)key, (void)keylen, (void)size, (void)casid;
	atomic_fetch_add_explicit(&sets, 1, memory_order_relaxed);
}

static void command(const char *args, int (*out)(const char *))
{
	char line[64];
	(void)args;
	snprintf(line, sizeof(line), "get %lu\nset %lu\n", atomic_load(&gets), atomic_load(&sets));
	out(line);
}

XPROBES_MODULE(command, 0,
	XPROBES_PROBE("memcached:command__get", on_get, (int, const char *, int, int, int64_t)),
	XPROBES_PROBE("memcached:command__set", on_set, (int, const char *, int, int, int64_t)));
