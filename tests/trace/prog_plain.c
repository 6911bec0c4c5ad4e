/* SPDX-License-Identifier: MIT */
/* A program built with -fpatchable-function-entry=5 alone (what `uftrace
 * -P` traces): no XProbes header, archive or library.  On stdin: "run"
 * computes with mid() and leaf() and prints "sum 320"; "quit" ends it.
 * It prints "ready PID" first. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) int leaf(int x)
{
	return x * 3 + 1;
}

__attribute__((noinline)) int mid(int x)
{
	return leaf(x) + leaf(x + 1);
}

int main(void)
{
	char line[64];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "run", 3) == 0) {
			int s = 0;
			for (int i = 0; i < 10; i++)
				s += mid(i);
			printf("sum %d\n", s);
			fflush(stdout);
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		}
	}
	return 0;
}
