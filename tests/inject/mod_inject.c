/* SPDX-License-Identifier: MIT */
/* Counts the injection target's sites. */
#include <stdatomic.h>
#include <stdio.h>

#include <xprobes/probe.h>

struct conn {
	int fd;
	long served;
};

static atomic_long releases, last_served, spins;

static void on_release(const struct conn *c)
{
	atomic_fetch_add(&releases, 1);
	atomic_store(&last_served, c->served);
}

static void on_spin(long n)
{
	(void)n;
	atomic_fetch_add(&spins, 1);
}

static void command(const char *args, int (*out)(const char *))
{
	char buf[96];
	(void)args;
	snprintf(buf, sizeof(buf), "releases=%ld last_served=%ld spins_seen=%s\n",
		 atomic_load(&releases), atomic_load(&last_served),
		 atomic_load(&spins) > 0 ? "yes" : "no");
	out(buf);
}

XPROBES_MODULE(command, 0,
	XPROBES_PROBE("inject_conn_release", on_release, (const struct conn *)),
	XPROBES_PROBE("inject_spin", on_spin, (long)));
