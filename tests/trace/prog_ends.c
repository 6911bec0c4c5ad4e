/* SPDX-License-Identifier: MIT */
/* A traced program for tests/trace/test_trace_runform.py: how a program
 * ends, under `xprobes trace -o DIR -- PROG`.  argv[1] says how:
 *
 *   exit N     ends_work() once, then return N from main
 *   signal     ends_work(), then raise(SIGUSR1) (not caught: it dies of it)
 *   longjmp    ends_top() { ends_down() x3, the last longjmp()s back to
 *              ends_top; ends_after() }: the three ends_down frames are
 *              left without their exits
 *   wait       print "ready PID" and wait for a line on stdin, calling
 *              ends_work() after it; end of input ends it
 *   deaf       the same, with SIGINT and SIGTERM ignored
 *   serve      print "ready PID", then per line: "enter" calls ends_serve(),
 *              which answers "entered" and then per line "work" calls
 *              ends_work() ("worked"), until "leave" ("left"); "quit" or
 *              end of input ends it.  A call that runs across recordings.
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

KEEP static int ends_leaf(int x)
{
	return x + 1;
}

KEEP static int ends_work(void)
{
	return ends_leaf(1) + ends_leaf(2);
}

KEEP static void ends_down(int n)
{
	if (n < 0) /* never: keeps gcc from calling this an infinite recursion */
		return;
	if (n == 1)
		longjmp(jb, 1);
	ends_down(n - 1);
	sink++; /* not a tail call */
}

KEEP static int ends_after(void)
{
	return ends_leaf(3);
}

KEEP static int ends_top(void)
{
	if (setjmp(jb) == 0)
		ends_down(3);
	return ends_after();
}

KEEP static void ends_serve(void)
{
	char line[64];
	printf("entered\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin) && strcmp(line, "leave\n")) {
		sink += ends_work();
		printf("worked\n");
		fflush(stdout);
	}
}

static int serve(void)
{
	char line[64];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin) && !strcmp(line, "enter\n")) {
		ends_serve();
		printf("left\n");
		fflush(stdout);
	}
	return 0;
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
		sink += ends_work();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "exit") && argc > 2) {
		sink += ends_work();
		return atoi(argv[2]);
	}
	if (!strcmp(argv[1], "signal")) {
		sink += ends_work();
		raise(SIGUSR1);
		return 0;
	}
	if (!strcmp(argv[1], "longjmp")) {
		sink += ends_top();
		return 0;
	}
	if (!strcmp(argv[1], "serve"))
		return serve();
	if (!strcmp(argv[1], "wait") || !strcmp(argv[1], "deaf"))
		return wait_line(!strcmp(argv[1], "deaf"));
	return 2;
}
