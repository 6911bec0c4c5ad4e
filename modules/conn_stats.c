/* SPDX-License-Identifier: MIT */
/* conn_stats: the README tour's probe module for examples/server.
 *
 * Reads the server's own struct conn with plain C.  Counts requests by
 * command and connections by protocol; `command conn_stats.so protocol`
 * and `command conn_stats.so requests` print them, `reset` clears them.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <xprobes/probe.h>

#include "../examples/server.h"

static atomic_ulong ascii_conns, binary_conns, requests_served;
static atomic_ulong gets, sets, others;

static void on_release(const struct conn *c)
{
	if (c->proto == PROTO_BINARY)
		atomic_fetch_add_explicit(&binary_conns, 1, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&ascii_conns, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&requests_served, c->requests, memory_order_relaxed);
}

static void on_request(const struct conn *c, const char *line, size_t len)
{
	(void)c;
	if (len >= 4 && memcmp(line, "GET ", 4) == 0)
		atomic_fetch_add_explicit(&gets, 1, memory_order_relaxed);
	else if (len >= 4 && memcmp(line, "SET ", 4) == 0)
		atomic_fetch_add_explicit(&sets, 1, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&others, 1, memory_order_relaxed);
}

static void command(const char *args, int (*out)(const char *msg))
{
	char line[128];

	if (strcmp(args, "protocol") == 0) {
		snprintf(line, sizeof(line), "ascii: %lu\nbinary: %lu\n",
			 atomic_load(&ascii_conns), atomic_load(&binary_conns));
		out(line);
	} else if (strcmp(args, "requests") == 0) {
		snprintf(line, sizeof(line), "GET: %lu\nSET: %lu\nother: %lu\nserved on closed connections: %lu\n",
			 atomic_load(&gets), atomic_load(&sets), atomic_load(&others),
			 atomic_load(&requests_served));
		out(line);
	} else if (strcmp(args, "reset") == 0) {
		atomic_store(&ascii_conns, 0);
		atomic_store(&binary_conns, 0);
		atomic_store(&requests_served, 0);
		atomic_store(&gets, 0);
		atomic_store(&sets, 0);
		atomic_store(&others, 0);
		out("reset\n");
	} else {
		out("usage: command conn_stats.so protocol|requests|reset\n");
	}
}

XPROBES_MODULE(command, 0,
	XPROBES_PROBE("*_conn_release", on_release, (const struct conn *)),
	XPROBES_PROBE("example_request", on_request,
		      (const struct conn *, const char *, size_t)));
