/* SPDX-License-Identifier: MIT */
/* What the tools that attach to one named program share (mcsnoop, and
 * any other tool that needs "the one running memcached" and an agent in
 * it): see common.h. */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A live process whose command name (comm) is name. */
static int named(pid_t pid, const char *name)
{
	char path[64], comm[32] = "";
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	int ok = fgets(comm, sizeof(comm), f) && strcspn(comm, "\n") == strlen(name) &&
		 strncmp(comm, name, strlen(name)) == 0;
	fclose(f);
	struct proc_status ps;
	return ok && proc_status_read(pid, &ps) == 0 && ps.state != 'Z' && ps.state != 'X';
}

pid_t attach_find_one(const char *name, const char *prog)
{
	DIR *d = opendir("/proc");
	if (!d) {
		fprintf(stderr, "%s: cannot read /proc\n", prog);
		return -1;
	}
	pid_t found[8];
	size_t n = 0, max = sizeof(found) / sizeof(found[0]);
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || !named((pid_t)pid, name))
			continue;
		if (n < max)
			found[n] = (pid_t)pid;
		n++;
	}
	closedir(d);
	if (n == 1)
		return found[0];
	if (n == 0) {
		fprintf(stderr, "%s: no %s is running (name it with -p PID)\n", prog, name);
		return -1;
	}
	fprintf(stderr, "%s: %zu %s processes are running; choose one with -p:", prog, n, name);
	for (size_t i = 0; i < n && i < max; i++)
		fprintf(stderr, " %d", (int)found[i]);
	fprintf(stderr, "%s\n", n > max ? " ..." : "");
	return -1;
}

/* Whether the program of pid has SDT (and so XProbes) sites of provider:
 * 1 yes, 0 no, -1 cannot tell (its file unreadable).  Read from the file
 * with libelf, without touching the process. */
static int has_provider(pid_t pid, const char *provider)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	errno = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE) {
		if (fd >= 0)
			close(fd);
		return -1; /* errno: why */
	}
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t shstrndx;
	int found = -1;
	errno = 0; /* from here, -1 means "not an ELF file" */
	if (e && elf_getshdrstrndx(e, &shstrndx) == 0) {
		found = 0;
		size_t plen = strlen(provider) + 1;
		for (Elf_Scn *scn = NULL; !found && (scn = elf_nextscn(e, scn));) {
			GElf_Shdr sh;
			const char *name;
			Elf_Data *d;
			if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE ||
			    !(name = elf_strptr(e, shstrndx, sh.sh_name)) ||
			    strcmp(name, ".note.stapsdt") != 0 || !(d = elf_getdata(scn, NULL)))
				continue;
			GElf_Nhdr nh;
			size_t off = 0, noff, doff;
			while (!found && (off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
				/* pc, base, semaphore (8 bytes each), then provider\0 */
				const char *desc = (const char *)d->d_buf + doff;
				found = nh.n_type == 3 && nh.n_descsz >= 24 + plen &&
					memcmp(desc + 24, provider, plen) == 0;
			}
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return found;
}

int attach_use_watch(pid_t pid, unsigned port)
{
	return has_provider(pid, "memcached") == 0 && (port || procnet_listen_port(pid));
}

int attach_connect(struct session *s, pid_t pid, const char *prog)
{
	int rc = session_open(s, pid, 1);
	if (rc != -2)
		return rc == 0 ? 0 : -1;
	/* Nothing goes into a process the tool cannot use. */
	int has = has_provider(pid, "memcached");
	if (has == 0)
		fprintf(stderr, "%s: process %d has none of memcached's probe sites (not a memcached "
				"built with xprobes-dtrace); nothing was injected\n", prog, (int)pid);
	else if (has < 0)
		fprintf(stderr, "%s: cannot read the program of process %d (/proc/%d/exe: %s), so "
				"not whether it is a memcached with probe sites; nothing was injected\n",
			prog, (int)pid, (int)pid, errno ? strerror(errno) : "not an ELF file");
	if (has != 1)
		return -1;
	char *agent = inject_default_agent();
	if (!agent) {
		fprintf(stderr, "%s: process %d has no XProbes agent, and libxprobes.so.0 is not "
				"next to %s to inject one\n", prog, (int)pid, prog);
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

int attach_load_session(struct session *s, const char *path, const char *prog, char **reply)
{
	char line[PATH_MAX + 32];
	snprintf(line, sizeof(line), "load --session %s", path);
	for (int tries = 0;; tries++) {
		int rc = session_call(s, line, reply);
		if (rc != 1 || !*reply || !strstr(*reply, "is still being unloaded") || tries == 200)
			return rc;
		if (tries == 0)
			fprintf(stderr, "%s: waiting for an earlier copy of %s to finish unloading\n",
				prog, path);
		free(*reply);
		*reply = NULL;
		/* Polling the agent's state: it has no way to tell us when. */
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
}
