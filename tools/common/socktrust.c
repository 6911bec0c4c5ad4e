/* SPDX-License-Identifier: MIT */
/* Checks on the agent's socket before and after connecting.
 *
 * Before: another user can create /tmp/.xprobes-UID before UID does, or
 * plant a symlink in a directory of their own, and so steer a root
 * `xprobes PID load` to a process of their choice, or answer it
 * themselves.  The file is opened with O_PATH|O_NOFOLLOW and connected to
 * through /proc/self/fd/N, so nothing can be swapped in between the check
 * and the connect.  After: the kernel says which process listens, and it
 * must be the one the user named; that alone would catch every trick, and
 * the checks before it give a better message and send nothing. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int owned_by_one_of(uid_t uid, const struct sock_owners *o)
{
	for (size_t i = 0; i < sizeof(o->uid) / sizeof(o->uid[0]); i++)
		if (o->uid[i] == uid)
			return 1;
	return 0;
}

/* Splits path into a directory and a name (both in buf). */
static int split_path(const char *path, char *buf, size_t bufsz, const char **dir,
		      const char **name)
{
	if (snprintf(buf, bufsz, "%s", path) >= (int)bufsz)
		return -1;
	char *slash = strrchr(buf, '/');
	if (!slash || slash == buf || !slash[1])
		return -1;
	*slash = '\0';
	*dir = buf;
	*name = slash + 1;
	return 0;
}

static int refuse(int fd, char *why, size_t whysz, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int refuse(int fd, char *why, size_t whysz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
	if (fd >= 0)
		close(fd);
	errno = EPERM;
	return -1;
}

int socktrust_open(const char *path, const struct sock_owners *owners, char *why,
		   size_t whysz)
{
	char buf[4096];
	const char *dir, *name;
	struct stat st;

	why[0] = '\0';
	if (split_path(path, buf, sizeof(buf), &dir, &name))
		return refuse(-1, why, whysz, "%s is not a socket path", path);
	int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 && (errno == ELOOP || errno == ENOTDIR))
		return refuse(-1, why, whysz, "%s is not a directory (a symlink?)", dir);
	if (dfd < 0)
		return -1;
	int dir_ok = fstat(dfd, &st) == 0;
	int fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	int e = errno;
	close(dfd);
	if (fd < 0 && e == ENOENT) {
		errno = e;
		return -1; /* no socket: whoever owns the directory */
	}
	if (!dir_ok)
		return refuse(fd, why, whysz, "cannot check %s", dir);
	/* Checked even when the name cannot be reached: a squatter's
	 * directory is the better explanation. */
	if (!owned_by_one_of(st.st_uid, owners) || (st.st_mode & 022))
		return refuse(fd, why, whysz,
			      "%s belongs to uid %u with mode %o: not the process owner's or root's "
			      "alone, so anyone may have put the socket there",
			      dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	if (fd < 0) {
		errno = e;
		return -1;
	}
	if (fstat(fd, &st) != 0)
		return refuse(fd, why, whysz, "cannot check %s", path);
	if (S_ISLNK(st.st_mode)) {
		char to[256];
		ssize_t n = readlinkat(fd, "", to, sizeof(to) - 1);
		to[n < 0 ? 0 : n] = '\0';
		return refuse(fd, why, whysz,
			      "%s is a symbolic link (to %s, owned by uid %u), not an agent's socket",
			      path, sanitize_text(to), (unsigned)st.st_uid);
	}
	if (!S_ISSOCK(st.st_mode))
		return refuse(fd, why, whysz, "%s is not a socket", path);
	return fd;
}

/* Is pid in another network namespace than ours?  Unknown (we may not
 * look) counts as no. */
static int other_netns(pid_t pid)
{
	char path[64];
	struct stat theirs, ours;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	return stat(path, &theirs) == 0 && stat("/proc/self/ns/net", &ours) == 0 &&
	       (theirs.st_dev != ours.st_dev || theirs.st_ino != ours.st_ino);
}

int socktrust_socket_in_netns(pid_t pid, int domain, int type, int protocol)
{
	if (!other_netns(pid))
		return socket(domain, type | SOCK_CLOEXEC, protocol);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	int mine = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int theirs = open(path, O_RDONLY | O_CLOEXEC);
	int fd = -1, e = 0;
	if (mine >= 0 && theirs >= 0 && setns(theirs, CLONE_NEWNET) == 0) {
		fd = socket(domain, type | SOCK_CLOEXEC, protocol);
		e = errno;
		if (setns(mine, CLONE_NEWNET) != 0) {
			/* Never go on in the target's network. */
			tool_perror("cannot return to our network namespace");
			exit(1);
		}
	} else {
		e = errno;
	}
	if (mine >= 0)
		close(mine);
	if (theirs >= 0)
		close(theirs);
	errno = e;
	return fd;
}

int socktrust_connect_abstract(pid_t pid, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(name);
	if (n + 1 > sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path + 1, name, n);
	int fd = socktrust_socket_in_netns(pid, AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int socktrust_peer_is(int fd, pid_t pid, char *why, size_t whysz)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
		snprintf(why, whysz, "cannot tell who listens: %s", strerror(errno));
		return -1;
	}
	if (cred.pid == pid)
		return 0;
	if (cred.pid == 0)
		snprintf(why, whysz,
			 "it is served by a process outside this pid namespace (uid %u), not by process %d",
			 (unsigned)cred.uid, (int)pid);
	else
		snprintf(why, whysz, "it is served by process %d (uid %u), not by process %d",
			 (int)cred.pid, (unsigned)cred.uid, (int)pid);
	return -1;
}

int socktrust_squatted(const char *dir, uid_t uid, struct stat *st)
{
	return lstat(dir, st) == 0 &&
	       (!S_ISDIR(st->st_mode) || st->st_uid != uid || (st->st_mode & 077));
}
