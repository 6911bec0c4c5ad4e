/* SPDX-License-Identifier: MIT */
/* A program with its own malloc, traced like the rest of it
 * (test_trace_follow.py): every malloc of the process comes here, the
 * agent's own included, and none of the agent's may be in a recording. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* glibc's own allocator under its exported names: this program's
 * functions are what every caller, libc and the agent included, reach. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static _Atomic unsigned long calls;

__attribute__((noinline)) void *malloc(size_t size)
{
	calls++;
	return __libc_malloc(size);
}

__attribute__((noinline)) void free(void *p)
{
	__libc_free(p);
}

void *calloc(size_t n, size_t size)
{
	calls++;
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	calls++;
	return __libc_realloc(p, size);
}

void *memalign(size_t align, size_t size)
{
	calls++;
	return __libc_memalign(align, size);
}

void *aligned_alloc(size_t align, size_t size)
{
	return memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p = memalign(align, size);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

__attribute__((noinline)) static int work(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++) {
		char *b = malloc(64);
		snprintf(b, 64, "%d", i);
		s += (int)strlen(b);
		free(b);
	}
	return s;
}

int main(void)
{
	int s = 0;
	/* Long enough for the recorder to ask the agent for its buffers many
	 * times (each reply is made with malloc on the agent's thread). */
	for (int round = 0; round < 40; round++) {
		s += work(100);
		usleep(2000);
	}
	return s > 0 ? 0 : 1;
}
