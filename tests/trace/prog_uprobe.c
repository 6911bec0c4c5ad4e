/* SPDX-License-Identifier: MIT */
/* A traced program for tests/trace/test_trace_uprobes.py: bpftrace's
 * uprobes on the same functions as the tracer.  It prints "ready PID";
 * then for each line on stdin, "run N" calls hot() N times and answers
 * "ran N sum S" (S the sum of hot's results, known to the test); "quit"
 * (or end of input) ends it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keep.h"

KEEP int hot(int x)
{
	return x * 2 + 1;
}

int main(void)
{
	char line[64];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "run ", 4) == 0) {
			long n = strtol(line + 4, NULL, 10), sum = 0;
			for (long i = 0; i < n; i++)
				sum += hot((int)(i & 7));
			printf("ran %ld sum %ld\n", n, sum);
			fflush(stdout);
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		}
	}
	return 0;
}
