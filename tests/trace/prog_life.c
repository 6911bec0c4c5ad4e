/* SPDX-License-Identifier: MIT */
/* A traced program for tests/trace/test_trace_life.py: how a program
 * ends, under `xprobes trace -o DIR -- PROG`.  argv[1] says how:
 *
 *   exit N     life_work() once, then return N from main
 *   signal     life_work(), then raise(SIGUSR1) (not caught: it dies of it)
 *   longjmp    life_top() { life_down() x3, the last longjmp()s back to
 *              life_top; life_after() }: the three life_down frames are
 *              left without their exits
 *   wait       print "ready PID" and wait for a line on stdin, calling
 *              life_work() after it; end of input ends it
 *   deaf       the same, with SIGINT and SIGTERM ignored
 */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keep.h"

static volatile int sink;
static jmp_buf jb;

KEEP static int life_leaf(int x)
{
	return x + 1;
}

KEEP static int life_work(void)
{
	return life_leaf(1) + life_leaf(2);
}

KEEP static void life_down(int n)
{
	if (n < 0) /* never: keeps gcc from calling this an infinite recursion */
		return;
	if (n == 1)
		longjmp(jb, 1);
	life_down(n - 1);
	sink++; /* not a tail call */
}

KEEP static int life_after(void)
{
	return life_leaf(3);
}

KEEP static int life_top(void)
{
	if (setjmp(jb) == 0)
		life_down(3);
	return life_after();
}

static int wait_line(int deaf)
{
	char line[64];
	if (deaf) {
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		sink += life_work();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "exit") && argc > 2) {
		sink += life_work();
		return atoi(argv[2]);
	}
	if (!strcmp(argv[1], "signal")) {
		sink += life_work();
		raise(SIGUSR1);
		return 0;
	}
	if (!strcmp(argv[1], "longjmp")) {
		sink += life_top();
		return 0;
	}
	if (!strcmp(argv[1], "wait") || !strcmp(argv[1], "deaf"))
		return wait_line(!strcmp(argv[1], "deaf"));
	return 2;
}
