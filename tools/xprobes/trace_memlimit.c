/* SPDX-License-Identifier: MIT */
/* What a trace's rings may take of the target's memory.  The rings are the
 * target's own memory, charged to its memory cgroup as the threads fill
 * them, so a budget its cgroup cannot hold would make the recording what
 * kills the program (the kernel's OOM killer picks the biggest task of
 * the cgroup: the target).  Before a start, the tool reads the target's
 * cgroup (/proc/PID/cgroup), and the least room below a limit there or in
 * any cgroup above it (cgroup v2: memory.max - memory.current; v1:
 * memory.limit_in_bytes - memory.usage_in_bytes), and gives the rings at
 * most half of it in all (-B), shared by the threads there are (-b), or
 * refuses to start when that is under a useful minimum.  The other half
 * stays the program's. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Below this much for the rings in all, nothing is started. */
#define MIN_ROOM_KIB 1024u
/* The least ring the agent makes (its MIN_CAP records of 16 bytes). */
#define MIN_RING_KIB 64u

/* A number of bytes, or "max"; UINT64_MAX if unlimited, 0 on failure
 * with *ok cleared. */
static uint64_t read_bytes(const char *dir, const char *name, int *ok)
{
	char path[PATH_MAX + 64], buf[64];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "re");
	if (!f || !fgets(buf, sizeof(buf), f)) {
		if (f)
			fclose(f);
		*ok = 0;
		return 0;
	}
	fclose(f);
	if (strncmp(buf, "max", 3) == 0)
		return UINT64_MAX;
	char *end;
	unsigned long long v = strtoull(buf, &end, 10);
	if (end == buf) {
		*ok = 0;
		return 0;
	}
	return v;
}

/* The target's memory cgroup as a directory: v1's memory hierarchy, or
 * v2's unified one (where it is mounted alone, or beside v1's).  Checked:
 * an absolute path with no ".." (it comes from the kernel, but the tool
 * trusts nothing of the target's). */
static int cgroup_dir(pid_t pid, char *dir, size_t len, int *v2)
{
	char path[64], line[PATH_MAX + 64];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char v1path[PATH_MAX] = "", v2path[PATH_MAX] = "";
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *ctl = strchr(line, ':'), *cg = ctl ? strchr(ctl + 1, ':') : NULL;
		if (!cg)
			continue;
		*cg++ = '\0';
		ctl++;
		if (*cg != '/' || strstr(cg, "/..") || strlen(cg) >= PATH_MAX - 32)
			continue;
		if (*ctl == '\0')
			snprintf(v2path, sizeof(v2path), "%s", cg);
		for (char *save = NULL, *c = strtok_r(ctl, ",", &save); c; c = strtok_r(NULL, ",", &save))
			if (strcmp(c, "memory") == 0)
				snprintf(v1path, sizeof(v1path), "%s", cg);
	}
	fclose(f);
	static const char *const v2roots[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
	char probe[PATH_MAX + 64];
	if (*v1path) {
		if (snprintf(dir, len, "/sys/fs/cgroup/memory%s", strcmp(v1path, "/") ? v1path : "") >=
		    (int)len)
			return -1;
		snprintf(probe, sizeof(probe), "%s/memory.limit_in_bytes", dir);
		*v2 = 0;
		return access(probe, R_OK) == 0 ? 0 : -1;
	}
	for (size_t i = 0; *v2path && i < sizeof(v2roots) / sizeof(*v2roots); i++) {
		if (snprintf(dir, len, "%s%s", v2roots[i], strcmp(v2path, "/") ? v2path : "") >= (int)len)
			continue;
		snprintf(probe, sizeof(probe), "%s/memory.max", dir);
		*v2 = 1;
		if (access(probe, R_OK) == 0)
			return 0;
	}
	return -1;
}

/* The least room below a limit, over the cgroup and those above it; 0
 * and *room when some limit holds, -1 when none does (or none is read). */
static int cgroup_room(pid_t pid, uint64_t *room, char *where, size_t wlen)
{
	char dir[PATH_MAX];
	int v2, found = -1;
	if (cgroup_dir(pid, dir, sizeof(dir), &v2) != 0)
		return -1;
	for (;;) {
		int ok = 1;
		uint64_t limit = read_bytes(dir, v2 ? "memory.max" : "memory.limit_in_bytes", &ok);
		uint64_t used = read_bytes(dir, v2 ? "memory.current" : "memory.usage_in_bytes", &ok);
		/* v1 says "no limit" with a huge number rounded to pages. */
		if (!ok)
			break;
		if (limit < (UINT64_C(1) << 62)) {
			uint64_t r = used < limit ? limit - used : 0;
			if (found != 0 || r < *room) {
				*room = r;
				snprintf(where, wlen, "%s", dir);
			}
			found = 0;
		}
		char *slash = strrchr(dir, '/');
		if (!slash || slash == dir)
			break;
		*slash = '\0';
	}
	return found;
}

static size_t count_threads(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	size_t n = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n ? n : 1;
}

/* The value of option opt (" -b", " -B") in args, or dflt. */
static uint64_t arg_value(const char *args, const char *opt, uint64_t dflt)
{
	const char *p = strstr(args, opt);
	return p && p[strlen(opt)] == ' ' ? strtoull(p + strlen(opt) + 1, NULL, 10) : dflt;
}

/* args without option opt and its value. */
static void arg_drop(char *args, const char *opt)
{
	char *p = strstr(args, opt);
	if (!p || p[strlen(opt)] != ' ')
		return;
	char *end = p + strlen(opt) + 1;
	end += strcspn(end, " ");
	memmove(p, end, strlen(end) + 1);
}

int trace_fit_memory(pid_t pid, char *args, size_t cap, const char *cmd)
{
	uint64_t room = 0;
	char where[PATH_MAX];
	if (cgroup_room(pid, &room, where, sizeof(where)) != 0)
		return 0;
	uint64_t allowed = room / 2 / 1024; /* KiB */
	if (allowed < MIN_ROOM_KIB) {
		fprintf(stderr, "xprobes: %s: process %d's memory cgroup (%s) has %" PRIu64 " KiB "
				"free below its limit: too little for the trace's rings, which would "
				"count against it (half of what is free, at least %u KiB); nothing "
				"started\n", cmd, (int)pid, sanitize_text(where), room / 1024,
			MIN_ROOM_KIB);
		return 1;
	}
	uint64_t per = arg_value(args, " -b", 1024), all = arg_value(args, " -B", 0);
	size_t threads = count_threads(pid);
	uint64_t new_all = all && all < allowed ? all : allowed;
	if (new_all > UINT32_MAX)
		new_all = UINT32_MAX;
	uint64_t new_per = per;
	if (per * threads > new_all)
		new_per = new_all / threads < MIN_RING_KIB ? MIN_RING_KIB : new_all / threads;
	if (new_all == all && new_per == per)
		return 0;
	arg_drop(args, " -b");
	arg_drop(args, " -B");
	size_t len = strlen(args);
	int n = snprintf(args + len, cap - len, " -b %" PRIu64 " -B %" PRIu64, new_per, new_all);
	if (n < 0 || (size_t)n >= cap - len) {
		fprintf(stderr, "xprobes: %s: options too long\n", cmd);
		return 1;
	}
	/* Said when it changes what the rings would have had; a -B added
	 * under a -b that fits goes unsaid (it bounds threads made later). */
	if (new_per != per || (all && new_all != all))
		fprintf(stderr, "xprobes: %s: process %d's memory cgroup (%s) has %" PRIu64 " MiB "
				"free below its limit, and the trace's rings count against it: they "
				"get at most %" PRIu64 " MiB in all (-B %" PRIu64 "), %" PRIu64
				" KiB a thread for its %zu threads (-b %" PRIu64 ")\n",
			cmd, (int)pid, sanitize_text(where), room >> 20, new_all >> 10, new_all,
			new_per, threads, new_per);
	return 0;
}
