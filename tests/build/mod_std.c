/* SPDX-License-Identifier: MIT */
/* The module for sites_std.c, in C that every mode of the matrix accepts
 * (no <stdatomic.h>: __atomic builtins).  `command mod_std.so` prints
 * "zero=N one=N twelve=N bad=B"; bad counts hits whose arguments did not
 * arrive as the site's declared types say they must. */
#include <stdio.h>
#include <string.h>

#include <xprobes/probe.h>

struct item {
	const char *key;
	int size;
};

static long zero, one, twelve, bad;

static void count(long *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

static void on_zero(void)
{
	count(&zero);
}

static void on_one(const struct item *it)
{
	if (it->size != 42 || strcmp(it->key, "key"))
		count(&bad);
	count(&one);
}

static void on_twelve(char c, signed char sc, unsigned char uc, short s, unsigned short us,
		      int i, unsigned int u, long l, unsigned long ul, long long ll,
		      const char *label, const struct item *it)
{
	if (c != 'x' || sc != -1 || uc != 200 || s != -2 || us != 65000 || i != -(int)u ||
	    l != -(long)u * 1000000000L || ul != ~0UL || ll != (long long)u << 33 ||
	    strcmp(label, "label") || it->size != 42)
		count(&bad);
	count(&twelve);
}

static void command(const char *args, int (*out)(const char *))
{
	char buf[128];

	(void)args;
	snprintf(buf, sizeof(buf), "zero=%ld one=%ld twelve=%ld bad=%ld\n",
		 __atomic_load_n(&zero, __ATOMIC_RELAXED), __atomic_load_n(&one, __ATOMIC_RELAXED),
		 __atomic_load_n(&twelve, __ATOMIC_RELAXED), __atomic_load_n(&bad, __ATOMIC_RELAXED));
	out(buf);
}

XPROBES_MODULE(command, 0,
	XPROBES_PROBE("std_zero", on_zero, ()),
	XPROBES_PROBE("stdprov:one", on_one, (const struct item *)),
	XPROBES_PROBE("std_twelve", on_twelve,
		      (char, signed char, unsigned char, short, unsigned short, int,
		       unsigned int, long, unsigned long, long long, const char *,
		       const struct item *)));
