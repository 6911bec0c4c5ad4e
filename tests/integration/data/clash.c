/* SPDX-License-Identifier: MIT */
/* A program with functions and variables named like the agent's old
 * internals (before libxprobes.so exported only dlopen), exported with
 * -rdynamic so that they would interpose.  The agent must not call them. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <xprobes/site.h>

int agent_lock[4] = { -1, -1, -1, -1 };
int xp_modules = -1, xp_nmodules = 12345;

int tb_printf(void *tb, const char *fmt, ...);
int tb_printf(void *tb, const char *fmt, ...)
{
	(void)tb;
	(void)fmt;
	*(volatile int *)0 = 1; /* the old agent called this: crash */
	return 0;
}

void tb_init(void *tb, size_t limit);
void tb_init(void *tb, size_t limit)
{
	(void)limit;
	memset(tb, 0xff, 8);
}

static void tick(long i)
{
	XPROBES_SITE(clash_tick, (long), (i));
}

int main(void)
{
	char line[64];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		tick(1);
		printf("tick done\n");
		fflush(stdout);
	}
	return 0;
}
