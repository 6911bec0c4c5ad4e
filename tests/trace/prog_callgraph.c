/* SPDX-License-Identifier: MIT */
/* A traced program with a known call tree, for tests/trace/test_trace_cat.py.
 * It prints "ready PID", then for each line "run" on stdin calls
 * handle_run() (on the main thread: work(), then a thread running
 * worker_main() -> work(), joined) and prints "done"; "quit" or end of
 * input ends it.  One work() is:
 *
 *   work() { mid() { leaf(); leaf(); }  fib(4)  mid() { leaf(); leaf(); } }
 *
 * and fib(4) makes 9 calls of fib.  The functions are kept whole and
 * unnamed-clone free (gcc: noipa; clang: noinline, optnone), so the
 * trace must show exactly this tree with these names.  Under `xprobes
 * trace -- PROG` it is held at start and exit by the executable's copy of
 * lib/static/trace_note.c, like any traced program. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xprobes/trace.h>

#ifdef __clang__
#define KEEP __attribute__((noinline, optnone))
#else
#define KEEP __attribute__((noipa))
#endif

static volatile int sink;

KEEP static int leaf(int x)
{
	return x + 1;
}

KEEP static int mid(int x)
{
	return leaf(x) + leaf(2 * x);
}

/* The empty asm after both calls keeps gcc from turning the second call
 * into a loop (tail recursion with an accumulator). */
KEEP static int fib(int n)
{
	if (n < 2)
		return n;
	int r = fib(n - 1) + fib(n - 2);
	__asm__ volatile("" : "+r"(r));
	return r;
}

KEEP static int work(void)
{
	return mid(1) + fib(4) + mid(2);
}

KEEP static void *worker_main(void *arg)
{
	(void)arg;
	sink += work();
	return NULL;
}

KEEP static int handle_run(void)
{
	pthread_t t;
	sink += work();
	if (pthread_create(&t, NULL, worker_main, NULL) != 0)
		return -1;
	pthread_join(t, NULL);
	return 0;
}

int main(void)
{
	char line[64];
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready %d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "run\n")) {
			if (handle_run() != 0)
				return 1;
			printf("done\n");
		} else if (!strcmp(line, "quit\n")) {
			break;
		}
	}
	return 0;
}
