/* SPDX-License-Identifier: MIT */
/* A program instrumented through xprobes-dtrace, the way --enable-dtrace
 * projects are: it includes the generated (and sed-rewritten) header and
 * links the -G object.  Commands on stdin, one reply line each:
 *
 *   ping      -> pong
 *   tick N    -> XPDTEST_TICK N times (from call sites passing different
 *                argument widths), then "tick N done"
 *   all       -> every probe once, then "all done"
 *   lib N     -> xpd_lib_call(N) in libxpdlib.so, then "lib N done"
 *   enabled   -> "enabled tick=T lib=L" from the _ENABLED() macros
 *
 * Prints "ready PID" first.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct xpd_thing {
	int x;
};

#include "xpdtest.h"

void xpd_lib_call(int n);
int xpd_lib_enabled(void);

static struct xpd_thing thing = { 42 };

/* noinline keeps each call site a site of its own. */
__attribute__((noinline)) static void tick_int(int i)
{
	XPDTEST_TICK(i, "label", (uint64_t)i << 33, &thing);
}

/* A narrower and a wider argument than the declared int: both are
 * converted, so every site records a 4-byte signed first argument. */
__attribute__((noinline)) static void tick_char(char c)
{
	XPDTEST_TICK(c, "label", (uint64_t)c << 33, &thing);
}

__attribute__((noinline)) static void tick_wide(long long v)
{
	XPDTEST_TICK(v, "label", (uint64_t)v << 33, (void *)&thing);
}

static void all(void)
{
	char buf[8] = "buf";
	const char *cs = "const";
	XPDTEST_NOARGS();
	XPDTEST_VOIDARGS();
	XPDTEST_STR_ARG(cs);
	XPDTEST_ANON(1, buf, 2ULL, &thing);
	XPDTEST_MANY(-1, 2, -3, 4, -5, 6, -7, 8, (uintptr_t)&thing, buf, cs, 12L);
	XPDTEST_NEG_VALUE(-1, -2, -3);
}

static int say(const char *fmt, long a, long b)
{
	printf(fmt, a, b);
	putchar('\n');
	return fflush(stdout);
}

int main(void)
{
	char line[128];

	say("ready %ld", (long)getpid(), 0);
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		long n = 0;
		if (!strcmp(line, "ping")) {
			say("pong", 0, 0);
		} else if (sscanf(line, "tick %ld", &n) == 1) {
			/* N hits in all, spread over the three call sites. */
			for (long i = 1; i <= n; i++) {
				if (i % 3 == 1)
					tick_int((int)i);
				else if (i % 3 == 2)
					tick_char((char)i);
				else
					tick_wide(i);
			}
			say("tick %ld done", n, 0);
		} else if (!strcmp(line, "all")) {
			all();
			say("all done", 0, 0);
		} else if (sscanf(line, "lib %ld", &n) == 1) {
			xpd_lib_call((int)n);
			say("lib %ld done", n, 0);
		} else if (!strcmp(line, "enabled")) {
			say("enabled tick=%ld lib=%ld", XPDTEST_TICK_ENABLED() ? 1 : 0,
			    xpd_lib_enabled());
		} else if (!strcmp(line, "exit")) {
			break;
		} else {
			say("unknown command", 0, 0);
		}
	}
	return 0;
}
