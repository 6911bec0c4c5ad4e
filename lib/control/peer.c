/* SPDX-License-Identifier: MIT */
/* The agent's attach policy: ptrace's rules, applied to a socket's peer.
 * See peer.h for the rules and for what is deliberately left out. */
#define _GNU_SOURCE
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5; older headers lack it */
#endif
#ifndef PIDFD_GET_USER_NAMESPACE
#define PIDFD_GET_USER_NAMESPACE _IO(0xFF, 9) /* Linux 6.11 */
#endif

__attribute__((format(printf, 4, 5)))
static int refuse(char *why, size_t whysz, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
	return err;
}

int xp_peer_judge(const struct xp_creds *p, const struct xp_creds *t, int target_dumpable,
		  pid_t target_pid, char *why, size_t whysz)
{
	if (p->cap_eff & (UINT64_C(1) << CAP_SYS_PTRACE))
		return 0;
	int same_ids = 1;
	for (int i = 0; i < 3; i++)
		same_ids &= p->uid[0] == t->uid[i] && p->gid[0] == t->gid[i];
	if (!same_ids)
		return refuse(why, whysz, -EPERM,
			      "uid %u may not attach to process %d: it runs as uid %u/%u/%u gid %u/%u/%u "
			      "(real/effective/saved), not all your uid %u and gid %u (ptrace would refuse); "
			      "use root",
			      (unsigned)p->uid[0], (int)target_pid, (unsigned)t->uid[0],
			      (unsigned)t->uid[1], (unsigned)t->uid[2], (unsigned)t->gid[0],
			      (unsigned)t->gid[1], (unsigned)t->gid[2], (unsigned)p->uid[0],
			      (unsigned)p->gid[0]);
	/* 2 ("suidsafe") is not good enough for ptrace either. */
	if (target_dumpable != 1)
		return refuse(why, whysz, -EPERM,
			      "uid %u may not attach to process %d: it changed credentials and is not "
			      "dumpable (ptrace would refuse); use root",
			      (unsigned)p->uid[0], (int)target_pid);
	if (t->cap_prm & ~p->cap_prm)
		return refuse(why, whysz, -EPERM,
			      "uid %u may not attach to process %d: it holds capabilities you lack "
			      "(permitted %#" PRIx64 ", yours %#" PRIx64 ") (ptrace would refuse); use root",
			      (unsigned)p->uid[0], (int)target_pid, t->cap_prm, p->cap_prm);
	return 0;
}

static int refuse_other_userns(char *why, size_t whysz, unsigned uid)
{
	return refuse(why, whysz, -EPERM,
		      "uid %u may not attach to process %d: you are in another user namespace; "
		      "attach from the process's own namespace",
		      uid, (int)getpid());
}

/* A small /proc file (relative to dirfd) into buf, NUL-terminated.
 * Returns its length, or -errno (-EFBIG if it does not fit). */
static ssize_t read_small(int dirfd, const char *name, char *buf, size_t size)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, size - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : 0;
			close(fd);
			if (e)
				return -e;
			break;
		}
		n += (size_t)r;
		if (n == size) {
			close(fd);
			return -EFBIG;
		}
	}
	buf[n] = '\0';
	return (ssize_t)n;
}

/* The text after "\nKEY" in a /proc status file, or NULL. */
static const char *field(const char *status, const char *key)
{
	const char *p = strstr(status, key);
	return p ? p + strlen(key) : NULL;
}

/* Uid, Gid, CapPrm and CapEff from /proc/PID/status; 0 or -EINVAL. */
static int parse_status(const char *s, struct xp_creds *c)
{
	const char *uid = field(s, "\nUid:"), *gid = field(s, "\nGid:");
	const char *prm = field(s, "\nCapPrm:"), *eff = field(s, "\nCapEff:");
	if (!uid || !gid || !prm || !eff ||
	    sscanf(uid, "%u %u %u", &c->uid[0], &c->uid[1], &c->uid[2]) != 3 ||
	    sscanf(gid, "%u %u %u", &c->gid[0], &c->gid[1], &c->gid[2]) != 3 ||
	    sscanf(prm, "%" SCNx64, &c->cap_prm) != 1 || sscanf(eff, "%" SCNx64, &c->cap_eff) != 1)
		return -EINVAL;
	return 0;
}

/* 1 if the process of /proc directory pdir is in our user namespace, 0 if
 * not, -errno if we cannot tell. */
static int same_userns(int pdir)
{
	char mine[64], theirs[64];
	ssize_t a = readlink("/proc/self/ns/user", mine, sizeof(mine));
	if (a < 0)
		return -errno;
	ssize_t b = readlinkat(pdir, "ns/user", theirs, sizeof(theirs));
	if (b >= 0)
		return a == b && memcmp(mine, theirs, (size_t)a) == 0;
	if (errno != EACCES && errno != EPERM)
		return -errno;
	/* Not ours to read: the client is more privileged than we are.  An
	 * id map reads the same as our own only from our namespace (or from
	 * one mapped exactly like it, which only a privileged creator makes). */
	static const char *const maps[] = { "uid_map", "gid_map" };
	for (int i = 0; i < 2; i++) {
		char path[32], m[512], t[512];
		snprintf(path, sizeof(path), "/proc/self/%s", maps[i]);
		ssize_t ml = read_small(AT_FDCWD, path, m, sizeof(m));
		ssize_t tl = read_small(pdir, maps[i], t, sizeof(t));
		if (ml < 0 || tl < 0)
			return (int)(ml < 0 ? ml : tl);
		if (ml != tl || memcmp(m, t, (size_t)ml) != 0)
			return 0;
	}
	return 1;
}

/* A pidfd for the process that connected: the socket's own (it cannot
 * name a recycled pid), else one opened by the pid SO_PEERCRED gave. */
static int peer_pidfd(int sock, pid_t pid)
{
	int pidfd;
	socklen_t len = sizeof(pidfd);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0)
		return pidfd;
	if (errno != ENOPROTOOPT)
		return -errno;
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	return pidfd < 0 ? -errno : pidfd;
}

static int exited(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	return poll(&p, 1, 0) != 0; /* readable once it has exited; errors too */
}

/* The connected client's current credentials, checked as peer.h says. */
static int read_peer(int sock, const struct ucred *uc, struct xp_creds *c, char *why,
		     size_t whysz)
{
	char path[32], status[4096];
	struct stat st;
	int pidfd = peer_pidfd(sock, uc->pid);
	if (pidfd < 0)
		return refuse(why, whysz, pidfd, "cannot check client process %d: %s; refusing",
			      (int)uc->pid, strerror(-pidfd));
	snprintf(path, sizeof(path), "/proc/%d", (int)uc->pid);
	int pdir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* Per-process files (not the directory) belong to root while their
	 * process is not dumpable. */
	int rc = pdir < 0 ? -errno : fstatat(pdir, "status", &st, 0) != 0 ? -errno : 0;
	ssize_t n = rc ? rc : read_small(pdir, "status", status, sizeof(status));
	rc = n < 0 ? (int)n : parse_status(status, c);
	int ns = rc ? rc : same_userns(pdir);
	if (pdir >= 0)
		close(pdir);
	/* Alive now, so the pid still named it while we read. */
	int gone = exited(pidfd);
	close(pidfd);
	if (gone)
		return refuse(why, whysz, -ESRCH,
			      "client process %d exited before it could be checked; refusing",
			      (int)uc->pid);
	if (ns < 0)
		return refuse(why, whysz, ns,
			      "cannot read the credentials of client process %d: %s; refusing",
			      (int)uc->pid, strerror(-ns));
	if (ns == 0)
		return refuse_other_userns(why, whysz, (unsigned)c->uid[0]);
	if (c->uid[1] != uc->uid || c->gid[1] != uc->gid)
		return refuse(why, whysz, -EPERM,
			      "client process %d changed its effective ids since it connected "
			      "(uid %u to %u, gid %u to %u); refusing",
			      (int)uc->pid, (unsigned)uc->uid, (unsigned)c->uid[1], (unsigned)uc->gid,
			      (unsigned)c->gid[1]);
	if (st.st_uid != c->uid[1])
		return refuse(why, whysz, -EPERM,
			      "client process %d (uid %u) is not dumpable: it changed credentials, so "
			      "its privileges may not be its own; refusing",
			      (int)uc->pid, (unsigned)c->uid[0]);
	return 0;
}

/* Ours, from the system calls (no /proc needed).  Credentials are per
 * thread in the kernel, but the C library keeps every thread's the same. */
int xp_peer_self(struct xp_creds *c)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (getresuid(&c->uid[0], &c->uid[1], &c->uid[2]) != 0 ||
	    getresgid(&c->gid[0], &c->gid[1], &c->gid[2]) != 0 || syscall(SYS_capget, &h, d) != 0)
		return -errno;
	c->cap_prm = d[0].permitted | (uint64_t)d[1].permitted << 32;
	c->cap_eff = d[0].effective | (uint64_t)d[1].effective << 32;
	return 0;
}

/* The user namespace of the process behind pidfd, as a namespace file's
 * identity.  0, or -errno: -ENOTTY (-EINVAL) before Linux 6.11, -EACCES
 * when we may not look at that process (ptrace's read rule). */
static int userns_of(int pidfd, struct stat *st)
{
	int ns = ioctl(pidfd, PIDFD_GET_USER_NAMESPACE, 0);
	if (ns < 0)
		return -errno;
	int rc = fstat(ns, st) == 0 ? 0 : -errno;
	close(ns);
	return rc;
}

/* Is the client at the other end of sock in our user namespace?  For a
 * client without a pid here, so without /proc: only its pidfd
 * (SO_PEERPIDFD, Linux 6.5) and the pidfd's namespace ioctl (6.11) tell.
 * 1 yes, 0 no, -errno when this kernel cannot say. */
static int pidless_same_userns(int sock, const struct xp_creds *self)
{
	int pidfd;
	socklen_t len = sizeof(pidfd);
	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) != 0)
		return -errno;
	struct stat theirs, ours;
	int rc = userns_of(pidfd, &theirs);
	close(pidfd);
	int own = rc ? -1 : (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (!rc && own < 0)
		rc = -errno;
	if (!rc) {
		rc = userns_of(own, &ours);
		close(own);
	}
	if (rc == -EACCES && (self->cap_eff & (UINT64_C(1) << CAP_SYS_PTRACE)))
		return 0; /* we may look at every process of our namespace and those
			   * below it: the client is elsewhere */
	if (rc)
		return rc;
	return theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino;
}

/* Is ours the initial user namespace, where uid 0 is the real root?  Its
 * uid map is the identity over all 2^32 - 1 ids. */
static int initial_userns(void)
{
	char map[512];
	unsigned inside, outside, count;
	int used = 0;
	if (read_small(AT_FDCWD, "/proc/self/uid_map", map, sizeof(map)) < 0 ||
	    sscanf(map, " %u %u %u %n", &inside, &outside, &count, &used) != 3)
		return 0;
	return inside == 0 && outside == 0 && count == 4294967295u && map[used] == '\0';
}

/* A client in a pid namespace that is not ours nor below ours (SO_PEERCRED
 * pid 0: an ancestor's, as when we run in a container or under unshare -p,
 * or a sibling's): no pid here, so no /proc to read.  Its user namespace
 * must be ours (ptrace refuses a client in a sibling one, and this agent an
 * ancestor's too, as peer.h says); then what SO_PEERCRED says is all we
 * know: root may attach, anyone else under the id and dumpable rules and
 * only to a process without capabilities it could lack.  A kernel that
 * cannot name the client's namespace leaves only real root (uid 0 in the
 * initial namespace, owner of root's files, so no boundary to defend). */
static int judge_pidless(int fd, const struct ucred *uc, char *why, size_t whysz)
{
	struct xp_creds peer, self;
	int rc = xp_peer_self(&self);
	if (rc)
		return refuse(why, whysz, rc, "cannot read this process's credentials: %s; refusing",
			      strerror(-rc));
	int ns = pidless_same_userns(fd, &self);
	if (ns == 0)
		return refuse_other_userns(why, whysz, (unsigned)uc->uid);
	if (ns < 0 && !(uc->uid == 0 && initial_userns()))
		return refuse(why, whysz, -EPERM,
			      "uid %u may not attach to process %d: you are in another pid namespace, "
			      "and this kernel cannot tell which user namespace (Linux 6.11 can); "
			      "attach from the process's own pid namespace",
			      (unsigned)uc->uid, (int)getpid());
	if (uc->uid == 0)
		return 0;
	peer = (struct xp_creds){ .uid = { uc->uid, uc->uid, uc->uid },
				  .gid = { uc->gid, uc->gid, uc->gid } };
	return xp_peer_judge(&peer, &self, prctl(PR_GET_DUMPABLE), getpid(), why, whysz);
}

int xp_peer_may_attach(int fd, char *why, size_t whysz)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	struct xp_creds peer, self;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0)
		return refuse(why, whysz, -errno, "cannot tell who connected: %s; refusing",
			      strerror(errno));
	/* Our own process: the kernel never refuses introspection. */
	if (uc.pid == getpid())
		return 0;
	if (uc.pid == 0)
		return judge_pidless(fd, &uc, why, whysz);
	int rc = read_peer(fd, &uc, &peer, why, whysz);
	if (rc)
		return rc;
	if ((rc = xp_peer_self(&self)) != 0)
		return refuse(why, whysz, rc, "cannot read this process's credentials: %s; refusing",
			      strerror(-rc));
	return xp_peer_judge(&peer, &self, prctl(PR_GET_DUMPABLE), getpid(), why, whysz);
}
