/* SPDX-License-Identifier: MIT */
/* Is any thread of this process under seccomp?  Then a filter may kill
 * the process for a system call that switching functions makes (mremap,
 * mmap of the text's file, pwrite64 into /proc/self/mem...), or fail one
 * half-way through a start.  A filter cannot be tested here without
 * risking exactly that (a forked child to try the calls would need fork,
 * which a filter may forbid as well, and tests only the forking thread's
 * filters), and reading it takes CAP_SYS_ADMIN from another process: the
 * xprobes tool reads and runs the filters before it asks for a start
 * (tools/xprobes/trace_seccomp.c) and says so; a start nobody checked is
 * refused. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#include "trace.h"

/* Seccomp: of one thread (0 none, 1 strict, 2 filter); 0 if unreadable
 * (it ended). */
static int seccomp_mode(const char *tid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/self/task/%.20s/status", tid);
	FILE *f = fopen(path, "re");
	int mode = 0;
	while (f && fgets(line, sizeof(line), f) && sscanf(line, "Seccomp: %d", &mode) != 1)
		;
	if (f)
		fclose(f);
	return mode;
}

pid_t xp_trace_seccomp_thread(int *mode)
{
	DIR *d = opendir("/proc/self/task");
	pid_t found = 0;
	if (!d)
		return -1;
	for (struct dirent *e; !found && (e = readdir(d));)
		if (atoi(e->d_name) > 0 && (*mode = seccomp_mode(e->d_name)) != 0)
			found = atoi(e->d_name);
	closedir(d);
	return found;
}
