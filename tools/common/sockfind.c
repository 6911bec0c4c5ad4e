/* Finding an agent's socket through the kernel instead of guessing its
 * path: the target's descriptors (/proc/PID/fd/N -> socket:[INODE]) and its
 * network namespace's UNIX socket table (/proc/PID/net/unix: inode, flags,
 * bound path) name the path its agent listens on, wherever the agent had
 * to put it (a private directory when /tmp/.xprobes-UID was taken by
 * someone else; XPROBES_RUNDIR).  Reading another process's descriptors
 * takes the same rights as ptrace, which is exactly who may attach; the
 * others fall back to guessing (session.c). */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ACCEPTCON 0x10000 /* __SO_ACCEPTCON in the table's flags: listening */

struct inodes {
	unsigned long *v;
	size_t n;
};

static int has_inode(const struct inodes *in, unsigned long ino)
{
	for (size_t i = 0; i < in->n; i++)
		if (in->v[i] == ino)
			return 1;
	return 0;
}

/* The inodes of pid's socket descriptors; -1 if they cannot be read. */
static int socket_inodes(pid_t pid, struct inodes *in)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int denied = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char link[64];
		unsigned long ino;
		ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
		if (n < 0) {
			denied |= errno == EACCES || errno == EPERM;
			continue;
		}
		link[n] = '\0';
		if (sscanf(link, "socket:[%lu]", &ino) != 1)
			continue;
		unsigned long *grown = realloc(in->v, (in->n + 1) * sizeof(*grown));
		if (!grown)
			break;
		in->v = grown;
		in->v[in->n++] = ino;
	}
	closedir(d);
	return denied && in->n == 0 ? -1 : 0;
}

/* Is name NSPID.sock or NSPID.TOKEN.sock (lib/control/sockdir.c)? */
static int agent_file_name(const char *name, pid_t nspid)
{
	char *end;
	long pid = strtol(name, &end, 10);
	if (end == name || pid != (long)nspid)
		return 0;
	if (strcmp(end, ".sock") == 0)
		return 1;
	size_t n = end[0] == '.' ? strspn(end + 1, "0123456789abcdef") : 0;
	return n > 0 && strcmp(end + 1 + n, ".sock") == 0;
}

/* Is bound an agent's socket of process nspid: a path
 * DIR/.xprobes-UID[.XXXXXX]/NAME, or an abstract name (shown with a
 * leading '@') @.xprobes-UID/NAME, NAME as above?  Sets *uid. */
static int agent_name(const char *bound, pid_t nspid, uid_t *uid)
{
	const char *name = strrchr(bound, '/');
	if (!name || !agent_file_name(name + 1, nspid))
		return 0;
	const char *dir = name;
	while (dir > bound && dir[-1] != '/' && !(dir - 1 == bound && *bound == '@'))
		dir--;
	unsigned u;
	if (name - dir < 10 || strncmp(dir, ".xprobes-", 9) != 0 || sscanf(dir + 9, "%u", &u) != 1)
		return 0;
	*uid = (uid_t)u;
	return 1;
}

/* The first listening agent socket of process nspid in the UNIX socket
 * table of pid's network namespace: one of pid's own sockets (inodes in),
 * or, with in NULL, any abstract one with such a name.  0; -1 if the table
 * cannot be read; -2 if there is none. */
static int scan_unix_table(pid_t pid, pid_t nspid, const struct inodes *in, char *out,
			   size_t outsz, uid_t *dir_uid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/net/unix", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	/* "Num RefCount Protocol Flags Type St Inode Path", one socket a line. */
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = -2;
	while (rc != 0 && (len = getline(&line, &cap, f)) > 0) {
		unsigned flags, type, state;
		unsigned long ino;
		int at = 0;
		if (line[len - 1] == '\n')
			line[len - 1] = '\0';
		if (sscanf(line, "%*s %*x %*x %x %x %x %lu%n", &flags, &type, &state, &ino, &at) != 4 ||
		    line[at] != ' ')
			continue; /* the header, or a socket bound to no name */
		const char *bound = line + at + 1; /* abstract ones start with '@' */
		int ours = in ? (bound[0] == '/' || bound[0] == '@') && has_inode(in, ino)
			      : bound[0] == '@';
		if ((flags & ACCEPTCON) && type == SOCK_STREAM && ours &&
		    agent_name(bound, nspid, dir_uid) && snprintf(out, outsz, "%s", bound) < (int)outsz)
			rc = 0;
	}
	free(line);
	fclose(f);
	return rc;
}

int sockfind_listening(pid_t pid, pid_t nspid, char *out, size_t outsz, uid_t *dir_uid)
{
	struct inodes in = { 0 };
	if (socket_inodes(pid, &in) != 0)
		return -1;
	int rc = scan_unix_table(pid, nspid, &in, out, outsz, dir_uid);
	free(in.v);
	return rc;
}

int sockfind_abstract_by_name(pid_t pid, pid_t nspid, char *out, size_t outsz, uid_t *dir_uid)
{
	return scan_unix_table(pid, nspid, NULL, out, outsz, dir_uid);
}
