/* SPDX-License-Identifier: MIT */
#include "base.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

int xp_socket_dir_under(char *out, size_t outsz, const char *rundir, uid_t uid)
{
	if (!rundir || !*rundir)
		rundir = getenv("XPROBES_RUNDIR");
	if (!rundir || !*rundir)
		rundir = "/tmp";
	int n = snprintf(out, outsz, "%s/.xprobes-%u", rundir, (unsigned)uid);
	return n < 0 || (size_t)n >= outsz ? -1 : 0;
}

int xp_socket_dir(char *out, size_t outsz, uid_t uid)
{
	return xp_socket_dir_under(out, outsz, NULL, uid);
}

int xp_socket_path(char *out, size_t outsz, uid_t uid, pid_t pid)
{
	char dir[256];

	if (xp_socket_dir(dir, sizeof(dir), uid))
		return -1;
	int n = snprintf(out, outsz, "%s/%d.sock", dir, (int)pid);
	return n < 0 || (size_t)n >= outsz ? -1 : 0;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read exactly len bytes.  deadline: CLOCK_MONOTONIC ms, or -1 for none.
 * Past it, bytes (or an EOF) already queued are still taken without
 * waiting, so a timeout of 0 reads a frame that is already there and a
 * reader scheduled late keeps a frame that arrived in time; ETIMEDOUT
 * comes only when a read would have to wait.  A trickling peer cannot
 * hold us long past it: each late read takes at least a byte of a frame
 * whose length is bounded. */
static int read_all(int fd, char *p, size_t len, long long deadline)
{
	while (len) {
		if (deadline >= 0) {
			long long left = deadline - now_ms();
			struct pollfd pfd = { .fd = fd, .events = POLLIN };
			int wait = left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
			int r = poll(&pfd, 1, wait);
			if (r < 0 && errno == EINTR)
				continue;
			if (r == 0) {
				errno = ETIMEDOUT;
				return -1;
			}
			if (r < 0)
				return -1;
		}
		ssize_t n = read(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0) {
			errno = 0;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int xp_send_frame(int fd, const void *buf, size_t len)
{
	unsigned char hdr[4] = { (unsigned char)len, (unsigned char)(len >> 8),
				 (unsigned char)(len >> 16),
				 (unsigned char)(len >> 24) };

	if (len > UINT32_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	if (write_all(fd, (const char *)hdr, 4))
		return -1;
	return write_all(fd, buf, len);
}

static size_t frame_length(const unsigned char hdr[4])
{
	return (size_t)hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16 | (size_t)hdr[3] << 24;
}

int xp_frame_parse(const char *buf, size_t len, size_t max, const char **payload,
		   size_t *plen, size_t *consumed)
{
	if (len < 4)
		return 1;
	size_t n = frame_length((const unsigned char *)buf);
	if (n > max)
		return -EMSGSIZE;
	if (len - 4 < n)
		return 1;
	*payload = buf + 4;
	*plen = n;
	*consumed = 4 + n;
	return 0;
}

int xp_recv_frame(int fd, char **buf, size_t *len, size_t max)
{
	return xp_recv_frame_within(fd, buf, len, max, -1);
}

int xp_recv_frame_within(int fd, char **buf, size_t *len, size_t max, int timeout_ms)
{
	unsigned char hdr[4];
	long long deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;

	*buf = NULL;
	*len = 0;
	if (read_all(fd, (char *)hdr, 4, deadline))
		return -1;
	size_t n = frame_length(hdr);
	if (n > max)
		return -2;
	char *p = malloc(n + 1);
	if (!p)
		return -1;
	if (read_all(fd, p, n, deadline)) {
		int e = errno;
		free(p);
		errno = e;
		return -1;
	}
	p[n] = '\0';
	*buf = p;
	*len = n;
	return 0;
}
