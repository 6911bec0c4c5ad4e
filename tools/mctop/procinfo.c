/* SPDX-License-Identifier: MIT */
/* What the header says about the target, from /proc: its name and port,
 * how long it has run. */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "../common/common.h"
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

void mctop_target_name(pid_t pid, char *out, size_t outsz)
{
	char comm[32] = "?";
	read_comm(pid, comm, sizeof(comm));
	sanitize_text(comm); /* the target names itself */
	unsigned port = procnet_listen_port(pid);
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
	/* Both figures have hundredths at best (/proc/uptime's two decimals,
	 * USER_HZ ticks): rounded to them, so that the difference prints as
	 * 22.13 and not as its binary rounding error, 22.1300000000001. */
	double s = round((up - (double)start_ticks / (double)hz) * 100) / 100;
	return s < 0 ? 0 : s;
}
