/* SPDX-License-Identifier: MIT */
/* A traced program for tests/trace/test_trace_patch_live.py: two threads
 * call traced functions (its own, and those of the traced library named
 * by argv[1], dlopen()ed) flat out and count every round whose result is
 * not the known value, while the test switches tracing on and off.
 * Prints "ready PID"; then for each line on stdin, "check" answers
 * "rounds=N bad=M" and "quit" (or end of input) ends it. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <xprobes/trace.h>

static int (*lib_sum_squares)(int);

__attribute__((noinline)) long fib(int n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

/* Floats through a traced call: the hook must leave xmm registers alone. */
__attribute__((noinline)) double blend(double a, float b, int k)
{
	return a * k + b;
}

__attribute__((noinline)) int variadic_sum(int n, ...)
{
	__builtin_va_list ap;
	__builtin_va_start(ap, n);
	int s = 0;
	for (int i = 0; i < n; i++)
		s += __builtin_va_arg(ap, int);
	__builtin_va_end(ap);
	return s;
}

XPROBES_NOTRACE static long round_value(void)
{
	return fib(12) + (long)blend(1.5, 0.25f, 4) + variadic_sum(3, 1, 2, 3) + lib_sum_squares(10);
}
#define ROUND_VALUE (144 + 6 + 6 + 285)

static unsigned long rounds, bad;
static volatile int stop;

static void *caller(void *arg)
{
	(void)arg;
	while (!stop) {
		if (round_value() != ROUND_VALUE)
			__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&rounds, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW) : NULL;
	if (!h || !(*(void **)&lib_sum_squares = dlsym(h, "tracee_sum_squares"))) {
		fprintf(stderr, "prog_flip: cannot load %s: %s\n", argc > 1 ? argv[1] : "(none)",
			dlerror());
		return 1;
	}
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, caller, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof(line), stdin) && strcmp(line, "quit\n") != 0) {
		if (strcmp(line, "check\n") == 0)
			printf("rounds=%lu bad=%lu\n", __atomic_load_n(&rounds, __ATOMIC_RELAXED),
			       __atomic_load_n(&bad, __ATOMIC_RELAXED));
		fflush(stdout);
	}
	stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return 0;
}
