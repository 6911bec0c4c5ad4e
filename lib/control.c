/* The control endpoint: a UNIX socket at /tmp/.xprobes-UID/PID.sock in a
 * directory only the owner can enter, served by one agent thread.
 *
 * The thread is created with every signal blocked, installs no handler,
 * and sleeps in poll() when idle: an idle application pays nothing, and a
 * command never waits for the application to hit a site.  Peers are
 * checked with SO_PEERCRED (owner or root only).  A client that stalls
 * mid-frame or stops reading is dropped after a timeout, so no client can
 * wedge the agent; application threads never wait for the agent at all.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"
#include "wire.h"

#define MAX_CLIENTS 16
#define IO_TIMEOUT_S 5
#define RESCAN_MS 250 /* while modules are loaded: find new dlopen()s */

static int listen_fd = -1;
/* Written by application threads after a dlopen() (dlopen_hook.c) when
 * they could not rescan themselves; non-blocking both ends. */
static int wake_fd[2] = { -1, -1 };
static int running; /* the control thread exists: rescans are ours to do */
static int clients[MAX_CLIENTS];
static int nclients;
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static pid_t sock_pid;

static int make_private_dir(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -1;
	/* Someone else's directory, or a symlink, is not ours to use. */
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 0077)) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

/* Remove sockets of processes that died without cleaning up (killed by a
 * signal, or a forked child that exec'd): they would read as "no agent"
 * forever and pile up. */
static void sweep_stale_sockets(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (pid <= 0 || strcmp(end, ".sock") != 0)
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue; /* alive (or not ours to judge) */
		char path[512];
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
			unlink(path);
	}
	closedir(d);
}

static int open_listener(void)
{
	char dir[256];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (xp_socket_dir(dir, sizeof(dir), geteuid()) ||
	    xp_socket_path(sa.sun_path, sizeof(sa.sun_path), geteuid(), getpid()))
		return -1;
	if (make_private_dir(dir))
		return -1;
	sweep_stale_sockets(dir);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	unlink(sa.sun_path); /* a stale socket of an earlier process with our pid */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    chmod(sa.sun_path, 0600) != 0 || listen(fd, 8) != 0) {
		close(fd);
		return -1;
	}
	memcpy(sock_path, sa.sun_path, sizeof(sock_path));
	sock_pid = getpid();
	return fd;
}

static void drop_client(int i)
{
	close(clients[i]);
	clients[i] = clients[--nclients];
}

static void reply(int fd, int status, const char *text, size_t len)
{
	char *frame = malloc(len + 1);
	if (!frame)
		return;
	frame[0] = (char)status;
	memcpy(frame + 1, text, len);
	(void)xp_send_frame(fd, frame, len + 1);
	free(frame);
}

static void reply_text(int fd, int status, const char *text)
{
	reply(fd, status, text, strlen(text));
}

static void accept_client(void)
{
	int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	struct timeval tv = { .tv_sec = IO_TIMEOUT_S };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));

	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    (cred.uid != 0 && cred.uid != geteuid())) {
		char msg[200];
		snprintf(msg, sizeof(msg),
			 "permission denied: process %d belongs to uid %u; only that user or root may attach\n",
			 (int)getpid(), (unsigned)geteuid());
		reply_text(fd, XP_ERR, msg);
		close(fd);
		return;
	}
	if (nclients == MAX_CLIENTS) {
		reply_text(fd, XP_ERR, "too many xprobes sessions on this process\n");
		close(fd);
		return;
	}
	clients[nclients++] = fd;
}

/* Serve one request from client i; returns 0 to keep it, -1 to drop it. */
static int serve(int i)
{
	int fd = clients[i];
	char *req;
	size_t len;
	int rc = xp_recv_frame(fd, &req, &len, XP_MAX_REQUEST);

	if (rc == -2) {
		char msg[120];
		snprintf(msg, sizeof(msg), "malformed request: longer than %u bytes\n",
			 XP_MAX_REQUEST);
		reply_text(fd, XP_ERR, msg);
		return -1;
	}
	if (rc != 0)
		return -1; /* gone, or stalled mid-frame */
	if (memchr(req, '\0', len)) {
		free(req);
		reply_text(fd, XP_ERR, "malformed request: contains a NUL byte\n");
		return -1;
	}

	struct textbuf out;
	tb_init(&out, XP_MAX_REPLY - 1);
	pthread_mutex_lock(&agent_lock);
	int status = xp_run_command(req, &out);
	pthread_mutex_unlock(&agent_lock);
	free(req);
	if (out.truncated) {
		tb_reset(&out);
		out.truncated = 0;
		tb_puts(&out, "reply too large; narrow the command with a glob\n");
		status = XP_ERR;
	}
	reply(fd, status, out.data ? out.data : "", out.len);
	tb_free(&out);
	return 0;
}

static void *control_thread(void *arg)
{
	(void)arg;
	struct pollfd pfd[MAX_CLIENTS + 2];

	for (;;) {
		pfd[0] = (struct pollfd){ .fd = listen_fd, .events = POLLIN };
		for (int i = 0; i < nclients; i++)
			pfd[i + 1] = (struct pollfd){ .fd = clients[i], .events = POLLIN };
		pfd[nclients + 1] = (struct pollfd){ .fd = wake_fd[0], .events = POLLIN };
		pthread_mutex_lock(&agent_lock);
		int timeout = xp_nmodules ? RESCAN_MS : -1;
		pthread_mutex_unlock(&agent_lock);
		int n = poll(pfd, (nfds_t)nclients + 2, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (n == 0 || (pfd[nclients + 1].revents & POLLIN)) {
			char drain[64];
			while (read(wake_fd[0], drain, sizeof(drain)) > 0)
				;
			pthread_mutex_lock(&agent_lock);
			xp_rescan(&xp_pending, 1);
			pthread_mutex_unlock(&agent_lock);
			if (n == 0)
				continue;
		}
		/* Clients first, newest last, so indexes stay valid. */
		for (int i = nclients - 1; i >= 0; i--) {
			if (!(pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (serve(i) != 0)
				drop_client(i);
		}
		if (pfd[0].revents & POLLIN)
			accept_client();
	}
	return NULL;
}

static int start_thread(void)
{
	sigset_t all, old;
	pthread_t tid;
	pthread_attr_t attr;

	if (wake_fd[0] < 0 && pipe2(wake_fd, O_NONBLOCK | O_CLOEXEC) != 0)
		return -1;
	listen_fd = open_listener();
	if (listen_fd < 0)
		return -1;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* The thread inherits a full mask: application signals go elsewhere. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&tid, &attr, control_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		unlink(sock_path);
		close(listen_fd);
		listen_fd = -1;
		return -1;
	}
	pthread_setname_np(tid, "xprobes-agent");
	__atomic_store_n(&running, 1, __ATOMIC_RELEASE);
	return 0;
}

int xp_control_start(void)
{
	return start_thread();
}

void xp_control_after_fork_child(void)
{
	/* The parent's thread did not survive fork(); its sockets did. */
	for (int i = 0; i < nclients; i++)
		close(clients[i]);
	nclients = 0;
	if (listen_fd >= 0)
		close(listen_fd);
	listen_fd = -1;
	sock_path[0] = '\0';
	/* A pipe shared with the parent would wake the parent's thread. */
	close(wake_fd[0]);
	close(wake_fd[1]);
	wake_fd[0] = wake_fd[1] = -1;
	__atomic_store_n(&running, 0, __ATOMIC_RELAXED);
	start_thread();
}

void xp_control_after_dlopen(void)
{
	if (!__atomic_load_n(&running, __ATOMIC_ACQUIRE))
		return; /* no agent (off, refused, or not started yet) */
	if (pthread_mutex_trylock(&agent_lock) == 0) {
		xp_rescan(&xp_pending, 0);
		pthread_mutex_unlock(&agent_lock);
		return;
	}
	/* Busy with a command (which may be waiting for a grace period): the
	 * control thread rescans after it.  A full pipe already holds a
	 * wake-up. */
	ssize_t w = write(wake_fd[1], "", 1);
	(void)w;
}

void xp_control_cleanup(void)
{
	/* At exit: remove the socket so no client finds a dead endpoint.  The
	 * control thread may still be polling; its descriptors die with the
	 * process.  Only the process that made the socket removes it. */
	if (sock_path[0] && sock_pid == getpid())
		unlink(sock_path);
}
