/* SPDX-License-Identifier: MIT */
/* The library-call benchmark program (bench/libcall_bench.py): N calls of
 * strlen through the PLT, timed inside the program around the loop, so
 * that process start, the tracer's setup and its output never count.
 *
 *     libcall [N]
 *
 * prints one line:
 *
 *     libcall N calls=N ns=... cpu_ns=...
 *
 * ns is CLOCK_MONOTONIC around the loop, cpu_ns the thread's CPU time
 * over it (which leaves out time preempted: the machine may be shared).
 * Built with -fno-builtin so that every strlen is a real call. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long ns_of(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return (long long)t.tv_sec * 1000000000 + t.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	static char text[2][8] = { "abc", "abcd" };
	volatile size_t sum = 0;
	if (n < 1)
		return 2;
	long long t0 = ns_of(CLOCK_MONOTONIC), c0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
	for (long i = 0; i < n; i++)
		sum += strlen(text[i & 1]);
	long long c1 = ns_of(CLOCK_THREAD_CPUTIME_ID), t1 = ns_of(CLOCK_MONOTONIC);
	if (sum != (size_t)(n / 2 * 7 + (n & 1) * 3))
		return 1;
	printf("libcall %ld calls=%ld ns=%lld cpu_ns=%lld\n", n, n, t1 - t0, c1 - c0);
	return 0;
}
