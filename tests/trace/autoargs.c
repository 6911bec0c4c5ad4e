/* SPDX-License-Identifier: MIT */
/* Functions whose arguments -a (--auto-args) takes from DWARF, for
 * tests/trace/test_trace_autoargs.py: built -g with the trace flags (and
 * stripped of its debug information: autoargs-nodebug) and -pg -g for
 * uftrace, each called from calls() with known values:
 *   ints     integers of several sizes and signs, a negative one
 *   ptrs     a pointer, a string, a NULL string
 *   paint    an enum argument and an enum returned (shown by name)
 *   fl       a float and a double, a double returned
 *   bystruct a struct by value between an enum and a long (uftrace
 *            records the struct, -a here leaves it out)
 * Prints "ok SUM".  With argument "wait": "ready PID", then per stdin line
 * "run" runs calls() and answers "done SUM", "quit" ends it. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "keep.h"

enum color { RED, GREEN = 5, BLUE = -3 };
struct pt { int x, y; };

KEEP int ints(signed char a, short b, int c, long d, unsigned int e)
{
	return (int)(a + b + c + d + (long)e);
}

KEEP size_t ptrs(void *p, const char *s, const char *none)
{
	return (p != NULL) + strlen(s) + (none != NULL);
}

KEEP enum color paint(enum color c, int n)
{
	return n ? BLUE : c;
}

KEEP double fl(float f, double d)
{
	return f * d;
}

KEEP long bystruct(enum color c, struct pt p, long z)
{
	return c + p.x + p.y + z;
}

KEEP long calls(void)
{
	int where = 0; /* on the stack: a pointer no symbol names */
	struct pt p = { 3, 4 };
	long sum = ints(-5, -300, 70000, -1, 42);
	sum += where + (long)ptrs(&where, "hello", NULL);
	sum += paint(GREEN, 0) + paint(RED, 1);
	sum += (long)fl(1.5f, -2.25);
	sum += bystruct(GREEN, p, 7);
	return sum;
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "wait")) {
		printf("ok %ld\n", calls());
		return 0;
	}
	char line[64];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "run\n"))
			printf("done %ld\n", calls());
		else if (!strcmp(line, "quit\n"))
			break;
		fflush(stdout);
	}
	return 0;
}
