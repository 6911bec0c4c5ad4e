/* SPDX-License-Identifier: MIT */
/* Following a recording through the program's whole life: its fork()ed
 * children, and the programs it (or they) exec.  The agent's side.
 *
 * A recorder that follows (`trace start --follow PATH`, which the run form
 * `xprobes trace -o DIR -- PROG` uses) listens on a SOCK_SEQPACKET socket
 * at PATH.  The agent connects to it and from then on makes every
 * thread's ring a memfd mapped shared, and sends the memfd over the
 * connection as it makes it (struct xp_follow_msg "RING" with the
 * descriptor).  The recorder maps each ring itself: it drains them while
 * the process runs, and what the process wrote before it ended (exit,
 * _exit, a signal, daemon()'s parent) is still there afterwards, since the
 * recorder holds the memory.  Nothing here ever waits for the recorder:
 * every send is non-blocking, and a ring that cannot be sent is made
 * private instead (the recorder never sees it; `trace buffers` lists it).
 *
 * A fork()ed child inherits the tracing (its patched text, its forking
 * thread's shadow stack) but not the rings, which it shares with its
 * parent: trace_record.c's fork handler drops them and calls
 * xp_trace_follow_forked(), which makes the child its own connection and
 * says "FORK" with its parent and the calls it inherited still open
 * (their exits will be recorded in the child), so the recorder can write
 * the child's task where uftrace puts it.
 *
 * Like trace_record.c, this file may run in the entry hook (a thread's
 * first traced call makes its ring), so it is compiled general-register
 * only, calls no libc function that may use vector registers (no memcpy
 * or memset: the system call wrappers only) and keeps errno.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "trace.h"
#include "trace_nosse.h"

XP_TRACE_NOSSE_BEGIN

/* The connection, above the numbers programs expect (a daemon closes
 * and reopens 0, 1, 2...), and its identity: a program that closed every
 * descriptor and got the number back for a file of its own must never
 * receive our messages. */
#define FOLLOW_FD_FLOOR 100
static _Atomic int conn = -1;
static dev_t conn_dev;
static ino_t conn_ino;
static char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
/* The process that made the connection: in a fork()ed child, until it
 * connects again, its parent's pid (getppid() is already the reaper's
 * when the parent went first, as daemon()'s does). */
static pid_t conn_pid;

static void copy_bytes(void *to, const void *from, size_t n)
{
	volatile unsigned char *d = to; /* not turned into a call to memcpy */
	const unsigned char *s = from;
	while (n--)
		*d++ = *s++;
}

static int conn_ours(int fd)
{
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == conn_dev &&
	       st.st_ino == conn_ino;
}

static int send_msg(int fd, const struct xp_follow_msg *m, size_t len, int pass_fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { (void *)m, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (pass_fd >= 0) {
		for (size_t i = 0; i < sizeof(u.buf); i++)
			u.buf[i] = 0;
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		copy_bytes(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	return sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void tag(struct xp_follow_msg *m, const char *t)
{
	for (int i = 0; i < 4; i++)
		m->tag[i] = t[i];
}

/* Connect to path and say hello (m).  0, or -1 (nothing kept). */
static int connect_and_say(struct xp_follow_msg *m, size_t len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	copy_bytes(sa.sun_path, path, sizeof(path));
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	int high = fcntl(fd, F_DUPFD_CLOEXEC, FOLLOW_FD_FLOOR);
	if (high >= 0) {
		close(fd);
		fd = high;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || send_msg(fd, m, len, -1) != 0) {
		close(fd);
		return -1;
	}
	conn_dev = st.st_dev;
	conn_ino = st.st_ino;
	conn_pid = getpid();
	atomic_store_explicit(&conn, fd, memory_order_release);
	return 0;
}

static void drop_conn(void)
{
	int fd = atomic_exchange_explicit(&conn, -1, memory_order_acq_rel);
	if (conn_ours(fd))
		close(fd);
}

int xp_trace_follow_connect(const char *p)
{
	int saved = errno;
	drop_conn();
	size_t n = 0;
	while (p[n] && n + 1 < sizeof(path))
		n++;
	if (p[n]) {
		errno = saved;
		return -ENAMETOOLONG;
	}
	copy_bytes(path, p, n + 1);
	struct xp_follow_msg m = { .ppid = (int32_t)getppid(), .ns = mono_ns() };
	tag(&m, "HELO");
	int rc = connect_and_say(&m, sizeof(m)) == 0 ? 0 : -errno;
	errno = saved;
	return rc;
}

void xp_trace_follow_off(void)
{
	int saved = errno;
	drop_conn();
	path[0] = '\0';
	errno = saved;
}

int xp_trace_following(void)
{
	return atomic_load_explicit(&conn, memory_order_acquire) >= 0;
}

void *xp_trace_follow_map(size_t len)
{
	int fd = atomic_load_explicit(&conn, memory_order_acquire);
	if (fd < 0)
		return NULL;
	int saved = errno;
	void *p = NULL;
	int mfd = memfd_create("xprobes-ring", MFD_CLOEXEC);
	if (mfd >= 0 && ftruncate(mfd, (off_t)len) == 0) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, mfd, 0);
		if (p == MAP_FAILED)
			p = NULL;
	}
	struct xp_follow_msg m = { .ns = mono_ns() };
	tag(&m, "RING");
	if (p && (!conn_ours(fd) || send_msg(fd, &m, sizeof(m), mfd) != 0)) {
		munmap(p, len); /* the recorder would never see it */
		p = NULL;
	}
	if (mfd >= 0)
		close(mfd);
	errno = saved;
	return p;
}

void xp_trace_follow_forked(const uintptr_t *addr, uint32_t naddr, uint32_t depth)
{
	int saved = errno;
	/* The parent's connection: the child says who it is on its own. */
	int fd = atomic_exchange_explicit(&conn, -1, memory_order_acq_rel);
	if (conn_ours(fd))
		close(fd);
	union {
		struct xp_follow_msg m;
		char space[sizeof(struct xp_follow_msg) + XP_FOLLOW_MAX_FRAMES * sizeof(uint64_t)];
	} u;
	if (naddr > XP_FOLLOW_MAX_FRAMES)
		naddr = XP_FOLLOW_MAX_FRAMES;
	u.m = (struct xp_follow_msg){ .ppid = (int32_t)(conn_pid ? conn_pid : getppid()),
				      .ns = mono_ns(), .depth = depth, .naddr = naddr };
	tag(&u.m, "FORK");
	for (uint32_t i = 0; i < naddr; i++)
		u.m.addr[i] = addr[i];
	if (path[0])
		connect_and_say(&u.m, sizeof(u.m) + naddr * sizeof(uint64_t));
	errno = saved;
}

XP_TRACE_NOSSE_END
