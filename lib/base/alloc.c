/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "base.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

long xp_fault_countdown = -1;
unsigned long xp_fault_points;

int xp_fault_hit(void)
{
	long c = __atomic_load_n(&xp_fault_countdown, __ATOMIC_RELAXED);
	__atomic_fetch_add(&xp_fault_points, 1, __ATOMIC_RELAXED);
	if (__builtin_expect(c < 0, 1))
		return 0;
	if (c > 0) {
		__atomic_store_n(&xp_fault_countdown, c - 1, __ATOMIC_RELAXED);
		return 0;
	}
	__atomic_store_n(&xp_fault_countdown, -1, __ATOMIC_RELAXED);
	errno = ENOMEM;
	return 1;
}

void *xp_malloc(size_t n)
{
	return xp_fault() ? NULL : malloc(n);
}

void *xp_calloc(size_t n, size_t size)
{
	return xp_fault() ? NULL : calloc(n, size);
}

void *xp_realloc(void *p, size_t n)
{
	/* Never 0 bytes: glibc would free p and return NULL. */
	return xp_fault() ? NULL : realloc(p, n ? n : 1);
}

char *xp_strdup(const char *s)
{
	return xp_fault() ? NULL : strdup(s);
}

char *xp_strndup(const char *s, size_t n)
{
	return xp_fault() ? NULL : strndup(s, n);
}
