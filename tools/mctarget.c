#define _GNU_SOURCE
#include "mctarget.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exedir.h"
#include "inject.h"
#include "proc_status.h"

/* A live (not zombie) process named memcached. */
static int is_memcached(pid_t pid)
{
	char path[64], comm[32] = "";
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	int named = fgets(comm, sizeof(comm), f) && strcmp(comm, "memcached\n") == 0;
	fclose(f);
	struct proc_status ps;
	return named && proc_status_read(pid, &ps) == 0 && ps.state != 'Z' && ps.state != 'X';
}

pid_t mctarget_find(const char *prog)
{
	enum { SHOWN = 16 };
	pid_t pids[SHOWN];
	size_t n = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]) || !is_memcached(atoi(e->d_name)))
			continue;
		if (n < SHOWN)
			pids[n] = atoi(e->d_name);
		n++;
	}
	if (d)
		closedir(d);
	if (n == 1)
		return pids[0];
	if (n == 0) {
		fprintf(stderr, "%s: no memcached process is running; name one with -p PID\n", prog);
		return 0;
	}
	fprintf(stderr, "%s: %zu memcached processes are running (pids", prog, n);
	for (size_t i = 0; i < n && i < SHOWN; i++)
		fprintf(stderr, " %d", (int)pids[i]);
	fprintf(stderr, "%s); choose one with -p PID\n", n > SHOWN ? " ..." : "");
	return 0;
}

int mctarget_connect(struct session *s, pid_t pid, const char *prog)
{
	int rc = session_open(s, pid, 1);
	if (rc != -2)
		return rc == 0 ? 0 : -1;
	char *agent = inject_default_agent();
	if (!agent) {
		fprintf(stderr, "%s: process %d has no XProbes agent, and libxprobes.so.0 is not "
				"installed beside %s to inject one\n", prog, (int)pid, prog);
		return -1;
	}
	fprintf(stderr, "%s: process %d has no agent; injecting %s\n", prog, (int)pid, agent);
	rc = inject_agent(pid, agent, 0);
	free(agent);
	if (rc != 0)
		return -1;
	rc = session_open(s, pid, 1);
	if (rc == -2)
		fprintf(stderr, "%s: the agent was loaded into process %d but did not start "
				"(XPROBES_AGENT=off in its environment?)\n", prog, (int)pid);
	return rc == 0 ? 0 : -1;
}

char *mctarget_module(const char *name)
{
	char dir[PATH_MAX];
	if (exe_dir(dir, sizeof(dir)) != 0)
		return NULL;
	const char *candidates[] = { "%s/modules/%s", "%s/../lib/xprobes/modules/%s" };
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		char p[PATH_MAX + 256];
		snprintf(p, sizeof(p), candidates[i], dir, name);
		char *real = realpath(p, NULL);
		if (real)
			return real;
	}
	return NULL;
}
