/* SPDX-License-Identifier: MIT */
/* Arguments and return values for the tracer's tests (test_trace_args.py),
 * built with the trace flags and, for uftrace, with -pg: each function
 * below is called with known values, so that `-A`/`-R` specs on them show
 * the same thing in our recording and in uftrace's.
 *   ints     signed and unsigned integers of 8 to 64 bits, negative ones
 *   hexes    numbers to show in hex, and a pointer
 *   chr      characters
 *   str      a string, an empty one, NULL, a pointer to nowhere, one
 *            longer than any recorder keeps, one with quotes and escapes
 *   fl       double and float arguments, a double returned
 *   many     eight integer arguments (two on the stack)
 *   strtol   a library call (its argument a string, its result a number)
 * all from calls(); prints "ok SUM" at the end.  With argument "wait": prints
 * "ready PID", then per stdin line "run" runs calls() and answers "done",
 * "fp" runs fnptr() (a function pointer), "quit" ends it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keep.h"

KEEP int ints(signed char a, short b, int c, long d, unsigned char e, unsigned int f)
{
	return (int)(a + b + c + d + e + f);
}

KEEP unsigned long hexes(unsigned long a, int b, void *p)
{
	return a + (unsigned long)b + (p != NULL);
}

KEEP int chr(char c, char d)
{
	return c + d;
}

KEEP size_t str(const char *s, int n)
{
	return s && n ? (size_t)n : 0;
}

KEEP double fl(double x, float y)
{
	return x * (double)y;
}

KEEP long many(long a1, long a2, long a3, long a4, long a5, long a6, long a7, long a8)
{
	return a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8;
}

KEEP long neg(void)
{
	return -42;
}

/* A function pointer, one inside a function, and one to no function:
 * uftrace replay shows the first two /p as &ints (line "fp" in wait mode). */
KEEP long fnptr(void *p, long n)
{
	return p ? n : 0;
}

KEEP long calls(void)
{
	static char big[300] = { [0 ... 298] = 'x' }; /* no memset() call */
	long sum = 0;
	sum += ints(-5, -300, -70000, -5000000000L, 200, 4000000000u);
	sum += ints(1, 2, 3, 4, 5, 6);
	sum += (long)hexes(0xdeadbeefUL, 255, (void *)0x1234);
	sum += chr('A', 'z');
	sum += (long)str("hello", 1);
	sum += (long)str("", 2);
	sum += (long)str(NULL, 3);
	sum += (long)str((const char *)8, 4); /* points nowhere */
	sum += (long)str(big, 5);
	sum += (long)str("tab\there \"q\" back\\slash\n", 6);
	sum += (long)fl(1.5, 2.25f);
	sum += (long)fl(-0.125, 1e10f);
	sum += many(1, -2, 3, -4, 5, -6, 7, -8);
	sum += neg();
	sum += strtol("1234", NULL, 10);
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
		else if (!strcmp(line, "fp\n"))
			printf("done %ld\n", fnptr((void *)ints, 1) + fnptr((char *)(void *)ints + 1, 2) +
						     fnptr(line, 3));
		else if (!strcmp(line, "quit\n"))
			break;
		fflush(stdout);
	}
	return 0;
}
