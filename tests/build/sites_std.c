/* SPDX-License-Identifier: MIT */
/* Sites of 0, 1 and 12 arguments and the _ENABLED() macros, written in C
 * that every language mode of the matrix accepts (gnu89: no declaration
 * in a for, no declaration after a statement, no // comments).
 * test_build_matrix.py builds it with -std=gnu89 ... -std=gnu11, with and
 * without -pedantic, and -Werror.  Commands on stdin:
 *   hit N    fires every site N times, then "done"
 *   enabled  "enabled ONE TWELVE" from XPROBES_SITE_ENABLED(_P)
 *   quit     exits
 * Prints "ready PID" first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xprobes/site.h>

struct item {
	const char *key;
	int size;
};

static __attribute__((noinline)) void fire(const struct item *it, int i)
{
	XPROBES_SITE(std_zero, (), ());
	XPROBES_SITE_P(stdprov, one, (const struct item *), (it));
	/* Every argument is converted to its declared type: the module
	 * checks the values arrive as declared whatever was passed. */
	XPROBES_SITE(std_twelve,
		     (char, signed char, unsigned char, short, unsigned short, int,
		      unsigned int, long, unsigned long, long long, const char *,
		      const struct item *),
		     ('x', -1, 200, -2, 65000, -i, i, -(long)i * 1000000000L,
		      ~0UL, (long long)i << 33, "label", it));
}

int main(void)
{
	char line[64];
	struct item it;
	int i, n;

	it.key = "key";
	it.size = 42;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "hit ", 4) == 0) {
			n = atoi(line + 4);
			for (i = 0; i < n; i++)
				fire(&it, i);
			printf("done\n");
		} else if (strncmp(line, "enabled", 7) == 0) {
			printf("enabled %d %d\n", XPROBES_SITE_ENABLED_P(stdprov, one) ? 1 : 0,
			       XPROBES_SITE_ENABLED(std_twelve) ? 1 : 0);
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		}
		fflush(stdout);
	}
	return 0;
}
