/* SPDX-License-Identifier: MIT */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int proc_status_read(pid_t pid, struct proc_status *ps)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int have_uid = 0;
	*ps = (struct proc_status){ .state = '?', .tgid = pid, .nspid = pid, .seccomp = -1 };
	while (fgets(line, sizeof(line), f)) {
		unsigned u[4];
		int v;
		if (sscanf(line, "State: %c", &ps->state) == 1)
			continue;
		if (sscanf(line, "Tgid: %d", &v) == 1)
			ps->tgid = v;
		else if (sscanf(line, "Threads: %d", &v) == 1)
			ps->threads = v;
		else if (sscanf(line, "TracerPid: %d", &v) == 1)
			ps->tracer = v;
		else if (sscanf(line, "Seccomp: %d", &v) == 1)
			ps->seccomp = v;
		else if (sscanf(line, "Seccomp_filters: %d", &v) == 1)
			ps->seccomp_filters = v;
		else if (strncmp(line, "NSpid:", 6) == 0) {
			/* One pid per namespace level, innermost last. */
			char *save, *tok = strtok_r(line + 6, " \t\n", &save);
			for (; tok; tok = strtok_r(NULL, " \t\n", &save))
				ps->nspid = atoi(tok);
		} else if (sscanf(line, "Uid: %u %u %u %u", &u[0], &u[1], &u[2], &u[3]) == 4) {
			for (int i = 0; i < 4; i++)
				ps->uid[i] = u[i];
			have_uid = 1;
		} else if (sscanf(line, "Gid: %u %u %u %u", &u[0], &u[1], &u[2], &u[3]) == 4) {
			for (int i = 0; i < 4; i++)
				ps->gid[i] = u[i];
		}
	}
	fclose(f);
	return have_uid ? 0 : -1;
}

const char *proc_stopped_by(char state)
{
	return state == 'T' ? "by a signal" : state == 't' ? "by a debugger" : NULL;
}
