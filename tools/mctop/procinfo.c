/* What the header says about the target, from /proc: its name and port,
 * how long it has run. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "../sanitize.h"
#include "core.h"

static int read_comm(pid_t pid, char *out, size_t outsz)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	int ok = fgets(out, (int)outsz, f) != NULL;
	fclose(f);
	if (!ok)
		return -1;
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

/* Is inode one of pid's descriptors? */
static int has_socket(pid_t pid, unsigned long inode)
{
	char dir[64], want[64], link[64];
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int found = 0;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = '\0';
			found = strcmp(link, want) == 0;
		}
	}
	closedir(d);
	return found;
}

/* The lowest TCP port pid listens on (its sockets in state 0A, LISTEN). */
static unsigned listening_port(pid_t pid)
{
	unsigned best = 0;
	for (int v6 = 0; v6 < 2; v6++) {
		char path[64], line[512];
		snprintf(path, sizeof(path), "/proc/%d/net/tcp%s", (int)pid, v6 ? "6" : "");
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			char local[128];
			unsigned st;
			unsigned long inode;
			/* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
			if (sscanf(line, " %*s %127s %*s %x %*s %*s %*s %*s %*s %lu", local, &st,
				   &inode) != 3 || st != 0x0A)
				continue;
			char *colon = strrchr(local, ':');
			unsigned port = colon ? (unsigned)strtoul(colon + 1, NULL, 16) : 0;
			if (port && (!best || port < best) && has_socket(pid, inode))
				best = port;
		}
		fclose(f);
	}
	return best;
}

void mctop_target_name(pid_t pid, char *out, size_t outsz)
{
	char comm[32] = "?";
	read_comm(pid, comm, sizeof(comm));
	sanitize_text(comm); /* the target names itself */
	unsigned port = listening_port(pid);
	if (port)
		snprintf(out, outsz, "%s :%u", comm, port);
	else
		snprintf(out, outsz, "%s", comm);
}

unsigned long long mctop_start_ticks(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* After the comm, which may hold spaces and parentheses: field 22. */
	char *p = strrchr(buf, ')');
	unsigned long long start = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
				 "%*d %*d %*d %*d %llu", &start) != 1)
		return 0;
	return start;
}

double mctop_uptime(unsigned long long start_ticks)
{
	double up;
	FILE *f = fopen("/proc/uptime", "re");
	if (!start_ticks || !f) {
		if (f)
			fclose(f);
		return -1;
	}
	int ok = fscanf(f, "%lf", &up) == 1;
	fclose(f);
	long hz = sysconf(_SC_CLK_TCK);
	if (!ok || hz <= 0)
		return -1;
	double s = up - (double)start_ticks / (double)hz;
	return s < 0 ? 0 : s;
}
