/* SPDX-License-Identifier: MIT */
/* Where the agent's socket goes, so that no other user can deny it one.
 *
 * The usual place is RUNDIR/.xprobes-EUID (RUNDIR: $XPROBES_RUNDIR, else
 * /tmp), a name anyone can take first in a world-writable /tmp: a file, a
 * symlink, or a directory of someone else's that would let them read or
 * replace our socket.  Such a name is never used.  The agent then makes a
 * fresh private directory with mkdtemp() (RUNDIR/.xprobes-EUID.XXXXXX,
 * unguessable, so it cannot be taken in advance), and the tool finds the
 * socket through the kernel: the target's descriptors and the UNIX socket
 * table name the path its agent listens on (tools/common/sockfind.c).
 *
 * Whoever can write the directory can remove the socket: EUID and root.
 * That is harmless only while EUID may attach to us anyway.  A process
 * that changed credentials (memcached -u nobody -d: setuid, then fork) or
 * holds capabilities may not be attached to by EUID, so its socket has no
 * file at all: it is bound in the abstract namespace, under a name with a
 * random part that nobody can bind first, and which nobody can remove
 * (xp_sockdir_file_is_safe, xp_sockdir_abstract).
 *
 * The name is PID.sock.  Agents in other pid namespaces share the
 * directory when they share RUNDIR and the uid: one of them may hold that
 * name, with a pid of its own namespace.  Only a socket nobody listens on
 * (connect() refused) is ever removed, ours included; a live one keeps
 * its name and we take PID.TOKEN.sock.
 *
 * A process keeps its fallback directory for every listener it makes (the
 * listener is made again if the application closes it) and removes it at
 * exit; those of processes killed before they could are swept by the next
 * agent of the same user that falls back.
 */
#define _GNU_SOURCE
#include "control.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* What we listen on once bound: "/path", or "@NAME" for an abstract name;
 * the file's identity when it is one we could look at (someone may remove
 * or replace it); the process that bound it (only it removes the file);
 * how often the listener was made again, because its file went or the
 * program took its descriptor. */
static char bound_name[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
static pid_t bound_pid;
static struct {
	int known;
	dev_t dev;
	ino_t ino;
} bound_file;
static unsigned long remade_file_gone, remade_fd_taken;

/* The fallback directory this process made, if any: after fork() the
 * child must make its own (fallback_pid tells). */
static char fallback_dir[256];
static pid_t fallback_pid;

/* 0 if dir is a real directory of our euid that nobody else may enter. */
static int private_to_us(const char *dir)
{
	struct stat st;

	if (lstat(dir, &st) != 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0077))
		return -EPERM;
	return 0;
}

static int make_private_dir(const char *dir)
{
	if (mkdir(dir, 0700) == 0)
		(void)chmod(dir, 0700); /* ours: whatever the umask left */
	else if (errno != EEXIST)
		return -errno;
	/* Someone else's directory, or a symlink, is not ours to use. */
	return private_to_us(dir);
}

/* 1 if nobody listens at path: connect() is refused (a socket whose
 * process is gone, or no socket at all).  Provably stale, wherever its
 * agent lived; a live listener (even one whose backlog is full: EAGAIN)
 * or anything we cannot tell is not.  Never blocks: a non-blocking
 * connect on a UNIX socket does not wait. */
static int socket_is_stale(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path) >= (int)sizeof(sa.sun_path))
		return 0;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	int refused = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno == ECONNREFUSED;
	close(fd);
	return refused;
}

/* NAME is PID.sock or PID.TOKEN.sock: sets *pid and whether it has a
 * token (a name taken in another pid namespace, see the top). */
static int agent_socket_name(const char *name, long *pid, int *token)
{
	char *end;
	*pid = strtol(name, &end, 10);
	if (*pid <= 0 || end == name)
		return 0;
	*token = strcmp(end, ".sock") != 0;
	if (!*token)
		return 1;
	size_t n = strspn(end + 1, "0123456789abcdef");
	return end[0] == '.' && n > 0 && strcmp(end + 1 + n, ".sock") == 0;
}

/* Remove sockets of processes that died without cleaning up (killed by a
 * signal, or a forked child that exec'd): they would read as "no agent"
 * forever and pile up.  Only a socket nobody listens on goes: the pid in
 * a name may be of another pid namespace, where a live agent holds it.
 * A pid alive here is not looked at (cheap, and never wrong: the socket
 * is only kept); the others are connected to.  Returns how many went. */
static int sweep_stale_sockets(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int removed = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		long pid;
		int token;
		if (!agent_socket_name(e->d_name, &pid, &token))
			continue;
		if (!token && (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue; /* a process of that pid lives here */
		char path[512];
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path) &&
		    socket_is_stale(path) && unlink(path) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}

/* Fallback directories (usual + ".XXXXXX") of our processes that were
 * killed: each held one socket, now stale.  A directory without a stale
 * socket is left alone: it may be another agent's between mkdtemp() and
 * bind(). */
static void sweep_stale_fallbacks(const char *usual)
{
	const char *slash = strrchr(usual, '/');
	char base[256], prefix[128];
	if (!slash || snprintf(base, sizeof(base), "%.*s", (int)(slash - usual), usual) >=
			      (int)sizeof(base) ||
	    snprintf(prefix, sizeof(prefix), "%s.", slash + 1) >= (int)sizeof(prefix))
		return;
	DIR *d = opendir(base[0] ? base : "/");
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[512];
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
		    snprintf(path, sizeof(path), "%s/%s", base, e->d_name) >= (int)sizeof(path))
			continue;
		if (private_to_us(path) == 0 && sweep_stale_sockets(path) > 0)
			rmdir(path); /* fails, harmlessly, if anything else is in it */
	}
	closedir(d);
}

/* Our private fallback directory (made now, or earlier by this process). */
static int make_fallback_dir(const char *usual, char *dir, size_t sz)
{
	if (fallback_pid == getpid() && private_to_us(fallback_dir) == 0)
		return snprintf(dir, sz, "%s", fallback_dir) < (int)sz ? 0 : -ENAMETOOLONG;
	if (snprintf(dir, sz, "%s.XXXXXX", usual) >= (int)sz)
		return -ENAMETOOLONG;
	sweep_stale_fallbacks(usual);
	if (!mkdtemp(dir)) /* mode 0700, a name nobody could take before */
		return -errno;
	snprintf(fallback_dir, sizeof(fallback_dir), "%s", dir);
	fallback_pid = getpid();
	return private_to_us(dir);
}

/* 16 hex digits nobody can guess: getrandom(), or where the kernel's pool
 * is not ready yet, the process's AT_RANDOM bytes (unreadable to others)
 * mixed with the pid and the time.  Never blocks. */
static void random_token(char *out, size_t sz)
{
	uint64_t r, at[2] = { 0, 0 };
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		const void *bytes = (const void *)getauxval(AT_RANDOM); /* 16, unaligned */
		struct timespec ts;
		if (bytes)
			memcpy(at, bytes, sizeof(at));
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = at[0] ^ at[1] ^ ((uint64_t)getpid() << 32) ^
		    (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
	}
	snprintf(out, sz, "%016llx", (unsigned long long)r);
}

/* DIR/PID.sock, unless a socket someone listens on (an agent of another
 * pid namespace), or anything else but a stale socket, holds that name:
 * then DIR/PID.TOKEN.sock.  A stale one is removed. */
static int socket_name(const char *dir, char *sock_path, size_t sz)
{
	int pid = (int)getpid();
	int n = snprintf(sock_path, sz, "%s/%d.sock", dir, pid);
	if (n < 0 || (size_t)n >= sz)
		return -ENAMETOOLONG;
	struct stat st;
	if (lstat(sock_path, &st) != 0 && errno == ENOENT)
		return 0;
	if (socket_is_stale(sock_path) && (unlink(sock_path) == 0 || errno == ENOENT))
		return 0;
	char token[17];
	random_token(token, sizeof(token));
	n = snprintf(sock_path, sz, "%s/%d.%s.sock", dir, pid, token);
	return n < 0 || (size_t)n >= sz ? -ENAMETOOLONG : 0;
}

int xp_sockdir_prepare(char *sock_path, size_t sz)
{
	char usual[256], dir[256];
	int rc;

	if (xp_socket_dir(usual, sizeof(usual), geteuid()))
		return -ENAMETOOLONG;
	rc = make_private_dir(usual);
	if (rc == 0)
		snprintf(dir, sizeof(dir), "%s", usual);
	else if (rc == -EPERM) /* taken by someone else */
		rc = make_fallback_dir(usual, dir, sizeof(dir));
	if (rc != 0)
		return rc;
	sweep_stale_sockets(dir);
	return socket_name(dir, sock_path, sz);
}

int xp_sockdir_file_is_safe(void)
{
	struct xp_creds self;
	char why[8];

	if (xp_peer_self(&self) != 0)
		return 0;
	if (self.uid[1] == 0)
		return 1; /* root's directory: root may always attach */
	/* EUID at its best: our effective gid, no capabilities. */
	struct xp_creds owner = { .uid = { self.uid[1], self.uid[1], self.uid[1] },
				  .gid = { self.gid[1], self.gid[1], self.gid[1] } };
	return xp_peer_judge(&owner, &self, prctl(PR_GET_DUMPABLE), getpid(), why,
			     sizeof(why)) == 0;
}

int xp_sockdir_abstract(char *name, size_t sz)
{
	char token[17];
	random_token(token, sizeof(token));
	int n = snprintf(name, sz, ".xprobes-%u/%d.%s.sock", (unsigned)geteuid(), (int)getpid(),
			 token);
	return n < 0 || (size_t)n >= sz ? -ENAMETOOLONG : 0;
}

void xp_sockdir_cleanup(const char *sock_path)
{
	size_t n = strlen(fallback_dir);

	if (!sock_path || !sock_path[0])
		return;
	unlink(sock_path);
	if (fallback_pid == getpid() && n && strncmp(sock_path, fallback_dir, n) == 0 &&
	    sock_path[n] == '/' && rmdir(fallback_dir) == 0)
		fallback_dir[0] = '\0';
}

void xp_sockdir_bound(const struct sockaddr_un *sa)
{
	struct stat st;
	int abstract = sa->sun_path[0] == '\0';

	snprintf(bound_name, sizeof(bound_name), "%s%s", abstract ? "@" : "", sa->sun_path + abstract);
	bound_pid = getpid();
	bound_file.known = !abstract && lstat(sa->sun_path, &st) == 0;
	if (bound_file.known) {
		bound_file.dev = st.st_dev;
		bound_file.ino = st.st_ino;
	}
}

int xp_sockdir_watched(void)
{
	return bound_file.known;
}

int xp_sockdir_intact(void)
{
	struct stat st;

	if (!bound_file.known)
		return 1;
	if (lstat(bound_name, &st) != 0)
		return errno != ENOENT && errno != ENOTDIR;
	return st.st_dev == bound_file.dev && st.st_ino == bound_file.ino;
}

void xp_sockdir_remade(int file_gone)
{
	if (file_gone) {
		remade_file_gone++;
		bound_file.known = 0; /* until bound again */
	} else {
		remade_fd_taken++;
	}
}

void xp_sockdir_describe(struct textbuf *out)
{
	if (!bound_name[0]) {
		tb_puts(out, "no socket (the agent is not listening)\n");
		return;
	}
	tb_printf(out, "listening on %s%s\n", bound_name,
		  bound_name[0] == '@' ? " (abstract: a process that changed credentials has no "
					 "socket file its new uid could remove)" : "");
	tb_printf(out, "made again: %lu after its file was removed or replaced, "
		       "%lu after the program took its descriptor\n",
		  remade_file_gone, remade_fd_taken);
}

void xp_sockdir_forget(void)
{
	bound_name[0] = '\0';
	bound_file.known = 0;
	remade_file_gone = remade_fd_taken = 0;
}

void xp_sockdir_unbind(void)
{
	if (bound_pid == getpid() && bound_file.known && xp_sockdir_intact())
		xp_sockdir_cleanup(bound_name);
}
