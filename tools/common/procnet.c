/* SPDX-License-Identifier: MIT */
/* The listening port of a server, for tools that name it (mctop's header)
 * or watch its traffic (mclat's kernel programs). */
#define _GNU_SOURCE
#include "common.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Is inode one of pid's descriptors?  /proc/PID/net/tcp lists every socket
 * of the network namespace, other processes' included. */
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

unsigned procnet_listen_port(pid_t pid)
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
