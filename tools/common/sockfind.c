/* SPDX-License-Identifier: MIT */
/* Finding an agent's socket through the kernel instead of guessing its
 * path: the target's descriptors (/proc/PID/fd/N -> socket:[INODE]) and its
 * network namespace's UNIX sockets (the kernel's socket diagnostics, else
 * /proc/PID/net/unix: inode, flags, bound path) name the path its agent
 * listens on, wherever the agent had
 * to put it (a private directory when /tmp/.xprobes-UID was taken by
 * someone else; XPROBES_RUNDIR).  Reading another process's descriptors
 * takes the same rights as ptrace, which is exactly who may attach; the
 * others fall back to guessing (session.c). */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/tcp.h>
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

/* A listening UNIX stream socket of a network namespace. */
struct listener {
	unsigned long ino;
	char name[112]; /* as /proc/net/unix shows it: "@NAME" for an abstract one */
};

struct listeners {
	struct listener *v;
	size_t n;
};

static int add_listener(struct listeners *l, unsigned long ino, const char *name, size_t len)
{
	struct listener *grown = realloc(l->v, (l->n + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	l->v = grown;
	struct listener *x = &l->v[l->n++];
	x->ino = ino;
	len = len < sizeof(x->name) - 1 ? len : sizeof(x->name) - 1;
	memcpy(x->name, name, len);
	x->name[len] = '\0';
	return 0;
}

/* The listening sockets of pid's network namespace from the kernel's
 * socket diagnostics (NETLINK_SOCK_DIAG, what ss(8) reads): inode and
 * bound name in binary, each in its own field, so a name can hold any
 * byte without passing for another socket.  0; -1 if not available (no
 * unix_diag in the kernel, or we may not enter pid's namespace). */
static int diag_listeners(pid_t pid, struct listeners *out)
{
	int fd = socktrust_socket_in_netns(pid, AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -1;
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req req;
	} q = {
		.nlh = { .nlmsg_len = sizeof(q), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		.req = { .sdiag_family = AF_UNIX, .udiag_states = 1u << TCP_LISTEN,
			 .udiag_show = UDIAG_SHOW_NAME },
	};
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	if (sendto(fd, &q, sizeof(q), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
		close(fd);
		return -1;
	}
	size_t bufsz = 32768;
	long *buf = malloc(bufsz); /* long: aligned for the headers */
	int rc = buf ? 1 : -1; /* 1: until NLMSG_DONE */
	while (rc == 1) {
		ssize_t n = recv(fd, buf, bufsz, 0);
		if (n <= 0) {
			rc = -1;
			break;
		}
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; rc == 1 && NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				rc = 0;
				break;
			}
			if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
			    h->nlmsg_len < NLMSG_LENGTH(sizeof(struct unix_diag_msg))) {
				rc = -1; /* NLMSG_ERROR: no unix_diag */
				break;
			}
			struct unix_diag_msg *m = NLMSG_DATA(h);
			if (m->udiag_type != SOCK_STREAM || m->udiag_state != TCP_LISTEN)
				continue;
			int len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
			for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, len);
			     a = RTA_NEXT(a, len)) {
				char name[sizeof(((struct listener *)0)->name)];
				size_t k = RTA_PAYLOAD(a);
				if (a->rta_type != UNIX_DIAG_NAME || k == 0)
					continue;
				k = k < sizeof(name) ? k : sizeof(name);
				memcpy(name, RTA_DATA(a), k);
				if (name[0] == '\0') /* abstract: shown as /proc/net/unix does */
					for (size_t i = 0; i < k; i++)
						name[i] = name[i] ? name[i] : '@';
				else
					k = strnlen(name, k);
				if (add_listener(out, m->udiag_ino, name, k) != 0)
					rc = -1;
			}
		}
	}
	free(buf);
	close(fd);
	return rc;
}

/* The same from /proc/PID/net/unix, where the kernel cannot do the above.
 * That table is text, one socket a line, and a bound path may hold a
 * newline: whoever binds one can write a line of their choice, naming any
 * socket's inode.  A forged line cannot hide the true one, so an inode on
 * two lines is someone's forgery and neither line is believed.  0; -1 if
 * the table cannot be read. */
static int text_listeners(pid_t pid, struct listeners *out)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/net/unix", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	/* "Num RefCount Protocol Flags Type St Inode Path", one socket a line. */
	char *line = NULL;
	size_t cap = 0, first = out->n;
	ssize_t len;
	struct inodes seen = { 0 }, twice = { 0 };
	while ((len = getline(&line, &cap, f)) > 0) {
		unsigned flags, type, state;
		unsigned long ino;
		int at = 0;
		if (line[len - 1] == '\n')
			line[--len] = '\0';
		if (sscanf(line, "%*s %*x %*x %x %x %x %lu%n", &flags, &type, &state, &ino, &at) != 4)
			continue; /* the header, or part of a name */
		struct inodes *to = has_inode(&seen, ino) ? &twice : &seen;
		unsigned long *grown = realloc(to->v, (to->n + 1) * sizeof(*grown));
		if (grown) {
			to->v = grown;
			to->v[to->n++] = ino;
		}
		if (line[at] == ' ' && (flags & ACCEPTCON) && type == SOCK_STREAM)
			add_listener(out, ino, line + at + 1, (size_t)(len - at - 1));
	}
	size_t kept = first;
	for (size_t i = first; i < out->n; i++)
		if (!has_inode(&twice, out->v[i].ino))
			out->v[kept++] = out->v[i];
	out->n = kept;
	free(seen.v);
	free(twice.v);
	free(line);
	fclose(f);
	return 0;
}

/* The first listening agent socket of process nspid in pid's network
 * namespace: one of pid's own sockets (inodes in), or, with in NULL, any
 * abstract one with such a name.  0; -1 if the sockets cannot be listed;
 * -2 if there is none. */
static int scan_unix_table(pid_t pid, pid_t nspid, const struct inodes *in, char *out,
			   size_t outsz, uid_t *dir_uid)
{
	struct listeners l = { 0 };
	/* A test hook: the text table, as where the kernel has no unix_diag. */
	int text_only = getenv("XPROBES_SOCKFIND_TEST_TEXT") != NULL;
	if (text_only || diag_listeners(pid, &l) != 0) {
		l.n = 0;
		if (text_listeners(pid, &l) != 0) {
			free(l.v);
			return -1;
		}
	}
	int rc = -2;
	for (size_t i = 0; rc != 0 && i < l.n; i++) {
		const char *bound = l.v[i].name;
		int ours = in ? (bound[0] == '/' || bound[0] == '@') && has_inode(in, l.v[i].ino)
			      : bound[0] == '@';
		if (ours && agent_name(bound, nspid, dir_uid) &&
		    snprintf(out, outsz, "%s", bound) < (int)outsz)
			rc = 0;
	}
	free(l.v);
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
