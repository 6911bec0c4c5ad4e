/* SPDX-License-Identifier: MIT */
/* A target's memory through /proc/PID/mem, bound to one process image.
 *
 * Opening /proc/PID/mem takes a reference to the address space the
 * process has at that moment (not to the pid): after an exec, reads and
 * writes through the descriptor reach the old, dying image and return 0,
 * never the new one.  So the descriptor is opened first, before anything
 * about the process is checked, and every later check describes either
 * the image behind it or a later one, in which case the descriptor is
 * already dead.  process_vm_readv/writev, which the tool used before,
 * take a pid: a target that exec'd a set-user-ID program between two of
 * the recorder's writes received the second in the new, root-owned image
 * (a value and an address the target chose). */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

void session_mem_open(struct session *s)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)s->pid);
	s->memfd = open(path, O_RDWR | O_CLOEXEC);
	s->mem_errno = s->memfd < 0 ? errno : 0;
}

void session_mem_close(struct session *s)
{
	if (s->memfd >= 0)
		close(s->memfd);
	s->memfd = -1;
}

int session_mem_check(struct session *s, uid_t peer_uid, gid_t peer_gid, char *why,
		      size_t whysz)
{
	struct proc_status ps;
	char dir[32];
	struct stat st;

	if (peer_uid == 0)
		return 0; /* root's agent: nothing to gain from changing image */
	snprintf(dir, sizeof(dir), "/proc/%d", (int)s->pid);
	if (proc_status_read(s->pid, &ps) != 0 || stat(dir, &st) != 0) {
		snprintf(why, whysz, "it exited");
		return -1;
	}
	for (int i = 0; i < 4; i++) {
		if (ps.uid[i] != peer_uid || ps.gid[i] != peer_gid) {
			snprintf(why, whysz,
				 "it now runs as uid %u gid %u, its agent listened as uid %u gid %u "
				 "(it exec'd a set-user-ID or set-group-ID program?)",
				 (unsigned)ps.uid[1], (unsigned)ps.gid[1], (unsigned)peer_uid,
				 (unsigned)peer_gid);
			return -1;
		}
	}
	/* A process that is not dumpable has its /proc directory owned by
	 * root: a set-ID or file-capability exec makes it so. */
	if (st.st_uid != peer_uid) {
		snprintf(why, whysz,
			 "it is not dumpable (it exec'd a program with file capabilities, or "
			 "said so with prctl)");
		return -1;
	}
	return 0;
}

/* What a 0-byte transfer means on /proc/PID/mem: the address space the
 * descriptor holds has no users left (exec or exit). */
static int gone(void)
{
	errno = ESRCH;
	return -1;
}

int session_mem_execd(const struct session *s)
{
	struct proc_status ps;
	return proc_status_read(s->pid, &ps) == 0 && ps.state != 'Z' && ps.state != 'X';
}

int session_mem_read(const struct session *s, uint64_t addr, void *buf, size_t len)
{
	char *p = buf;
	if (s->memfd < 0) {
		errno = s->mem_errno ? s->mem_errno : EBADF;
		return -1;
	}
	while (len) {
		ssize_t n = pread(s->memfd, p, len, (off_t)addr);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EIO ? (errno = EFAULT, -1) : -1;
		if (n == 0)
			return gone();
		p += n;
		addr += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int session_mem_write(const struct session *s, uint64_t addr, const void *buf, size_t len)
{
	if (s->memfd < 0) {
		errno = s->mem_errno ? s->mem_errno : EBADF;
		return -1;
	}
	ssize_t n;
	do
		n = pwrite(s->memfd, buf, len, (off_t)addr);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)len)
		return 0;
	if (n == 0)
		return gone();
	if (n > 0 || errno == EIO)
		errno = EFAULT;
	return -1;
}
