/* SPDX-License-Identifier: MIT */
/* A program whose sites must survive every compiler, optimisation level and
 * linker garbage collection the build matrix throws at it.  It reads
 * commands from stdin: "hit N" fires every site N times, "quit" exits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xprobes/site.h>

struct item {
	const char *key;
	int size;
};

extern void lib_fire(int n); /* in sites_lib.c when built as a library */

static __attribute__((noinline)) void fire(const struct item *it, int i)
{
	XPROBES_SITE(build_item, (const struct item *, int), (it, i));
	XPROBES_SITE_P(buildprov, tick__one, (long), ((long)i * 3));
}

int main(void)
{
	char line[64];
	struct item it = { "key", 42 };

	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "hit ", 4) == 0) {
			int n = atoi(line + 4);
			for (int i = 0; i < n; i++)
				fire(&it, i);
#ifdef WITH_LIB
			lib_fire(n);
#endif
			printf("done\n");
			fflush(stdout);
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		}
	}
	return 0;
}
