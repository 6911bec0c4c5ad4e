/* SPDX-License-Identifier: MIT */
/* The calls benchmark program (bench/libcall_bench.py): N calls, timed
 * inside the program around the loop, so that process start, the
 * tracer's setup and its output never count.
 *
 *     libcall [N [strlen|add2]]
 *
 * strlen (the default): N calls of strlen through the PLT, a library
 * call; add2: N calls of add2(a, b), a function of the program with two
 * integer arguments and a return value.  Prints one line:
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

/* One real call each time: no inlining, no clones (gcc's noipa). */
#ifdef __clang__
__attribute__((noinline))
#else
__attribute__((noipa))
#endif
long add2(long a, long b)
{
	return a + b;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	int args = argc > 2 && strcmp(argv[2], "add2") == 0;
	static char text[2][8] = { "abc", "abcd" };
	volatile size_t sum = 0;
	if (n < 1 || (argc > 2 && !args && strcmp(argv[2], "strlen") != 0))
		return 2;
	long long t0 = ns_of(CLOCK_MONOTONIC), c0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
	if (args)
		for (long i = 0; i < n; i++)
			sum += (size_t)add2(i & 1, 3);
	else
		for (long i = 0; i < n; i++)
			sum += strlen(text[i & 1]);
	long long c1 = ns_of(CLOCK_THREAD_CPUTIME_ID), t1 = ns_of(CLOCK_MONOTONIC);
	if (sum != (size_t)(n / 2 * 7 + (n & 1) * 3))
		return 1;
	printf("libcall %ld calls=%ld ns=%lld cpu_ns=%lld\n", n, n, t1 - t0, c1 - c0);
	return 0;
}
