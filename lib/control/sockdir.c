/* Where the agent's socket goes, so that no other user can deny it one.
 *
 * The usual place is RUNDIR/.xprobes-EUID (RUNDIR: $XPROBES_RUNDIR, else
 * /tmp), a name anyone can take first in a world-writable /tmp: a file, a
 * symlink, or a directory of someone else's that would let them read or
 * replace our socket.  Such a name is never used.  The agent then makes a
 * fresh private directory with mkdtemp() (RUNDIR/.xprobes-EUID.XXXXXX,
 * unguessable, so it cannot be taken in advance), and the tool finds the
 * socket through the kernel: the target's descriptors and the UNIX socket
 * table name the path its agent listens on (tools/sockfind.c).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


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

/* Remove sockets of processes that died without cleaning up (killed by a
 * signal, or a forked child that exec'd): they would read as "no agent"
 * forever and pile up.  Returns how many went. */
static int sweep_stale_sockets(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int removed = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (pid <= 0 || strcmp(end, ".sock") != 0)
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue; /* alive (or not ours to judge) */
		char path[512];
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path) &&
		    unlink(path) == 0)
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
	int n = snprintf(sock_path, sz, "%s/%d.sock", dir, (int)getpid());
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
