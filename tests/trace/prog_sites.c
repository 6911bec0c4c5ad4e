/* SPDX-License-Identifier: MIT */
/* A traced program with an XProbes site inside a traced function, for
 * tests/trace/test_trace_sites.py.  It prints "ready PID", then for each
 * line "run" calls outer(20) and prints "done"; "quit" ends it.
 *
 * outer calls inner 3 times, and each inner hits the site
 * tracetest_inner_hit once: the graph shows the site's comment inside
 * each inner. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <xprobes/site.h>

#include "keep.h"

static volatile int sink;

KEEP static int inner(int x)
{
	XPROBES_SITE(tracetest_inner_hit, (int), (x));
	return x + 1;
}

KEEP static int outer(int x)
{
	return inner(x) + inner(x + 1) + inner(x + 2);
}

int main(void)
{
	char line[64];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "run", 3) == 0) {
			sink = outer(20);
			printf("done\n");
			fflush(stdout);
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		}
	}
	return 0;
}
