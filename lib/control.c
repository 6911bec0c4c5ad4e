/* The control endpoint: a UNIX socket at /tmp/.xprobes-UID/PID.sock in a
 * directory only the owner can enter, served by one agent thread.
 *
 * The thread is created with every signal blocked, installs no handler,
 * and sleeps in poll() when idle: an idle application pays nothing, and a
 * command never waits for the application to hit a site.  Peers are
 * checked with SO_PEERCRED (owner or root only).  A client that does not
 * deliver a whole request within IO_TIMEOUT_S, or stops reading, is
 * dropped, so no client can wedge the agent; application threads never
 * wait for the agent at all.
 *
 * The descriptors are the application's too: many programs close every
 * descriptor above 2 at start-up or after daemonising, or dup2() onto a
 * number they like, and then reuse the numbers.  The agent never trusts a
 * number it was given: it remembers each descriptor's identity (device and
 * inode) and checks it before every poll and before every use.  A
 * descriptor that is no longer ours is forgotten, never read, written or
 * closed, and the listening socket is made again.  Application threads
 * write to no descriptor of ours: a rescan they cannot do themselves is
 * left to whoever holds the agent's lock, through a flag.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
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

/* A descriptor and what it was when we opened it. */
struct owned_fd {
	int fd;
	dev_t dev;
	ino_t ino;
};

static struct owned_fd listener = { .fd = -1 };
static struct owned_fd clients[MAX_CLIENTS];
static int nclients;
static int running; /* the control thread exists: rescans are ours to do */
/* Set by an application thread whose dlopen() found the agent busy; the
 * lock holder rescans when it lets go (xp_control_unlock). */
static int rescan_wanted;
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

static int own(struct owned_fd *o, int fd)
{
	struct stat st;

	if (fd < 0 || fstat(fd, &st) != 0)
		return -1;
	*o = (struct owned_fd){ .fd = fd, .dev = st.st_dev, .ino = st.st_ino };
	return 0;
}

/* Still the descriptor we opened?  (Socket inodes are unique while open.) */
static int still_ours(const struct owned_fd *o)
{
	struct stat st;

	return o->fd >= 0 && fstat(o->fd, &st) == 0 && st.st_dev == o->dev &&
	       st.st_ino == o->ino;
}

/* Close fd only if it is still ours; otherwise leave it to its owner. */
static void release(struct owned_fd *o)
{
	if (still_ours(o))
		close(o->fd);
	o->fd = -1;
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
	if (own(&listener, fd) != 0) {
		close(fd);
		return -1;
	}
	return 0;
}

static void drop_client(int i)
{
	release(&clients[i]);
	clients[i] = clients[--nclients];
}

/* Forget descriptors the application took over (closed, or closed and
 * reused); make the listening socket again if it was one of them. */
static void check_descriptors(void)
{
	for (int i = nclients - 1; i >= 0; i--)
		if (!still_ours(&clients[i]))
			drop_client(i); /* forgets it: release() closes only our own */
	if (!still_ours(&listener)) {
		listener.fd = -1;
		open_listener(); /* on failure: tried again after the next wake-up */
	}
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
	if (!still_ours(&listener))
		return;
	int fd = accept4(listener.fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	struct timeval tv = { .tv_sec = IO_TIMEOUT_S };
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
	if (own(&clients[nclients], fd) != 0) {
		close(fd);
		return;
	}
	nclients++;
}

/* Serve one request from client i; returns 0 to keep it, -1 to drop it. */
static int serve(int i)
{
	if (!still_ours(&clients[i]))
		return -1; /* the caller's drop_client() leaves it alone */
	int fd = clients[i].fd;
	char *req;
	size_t len;
	/* The whole request within the timeout, however it trickles in. */
	int rc = xp_recv_frame_within(fd, &req, &len, XP_MAX_REQUEST, IO_TIMEOUT_S * 1000);

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
	xp_commands_hold_lock = 1;
	int status = xp_run_command(req, &out);
	xp_commands_hold_lock = 0;
	xp_control_unlock(1);
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

void xp_control_unlock(int may_wait)
{
	pthread_mutex_unlock(&agent_lock);
	/* A dlopen() that found us busy left its rescan to us; and while we
	 * rescan, another may find us busy again. */
	while (__atomic_load_n(&rescan_wanted, __ATOMIC_ACQUIRE) &&
	       pthread_mutex_trylock(&agent_lock) == 0) {
		if (__atomic_exchange_n(&rescan_wanted, 0, __ATOMIC_ACQ_REL))
			xp_rescan(&xp_pending, may_wait);
		pthread_mutex_unlock(&agent_lock);
	}
}

static void *control_thread(void *arg)
{
	(void)arg;
	struct pollfd pfd[MAX_CLIENTS + 1];

	for (;;) {
		check_descriptors();
		for (int i = 0; i < nclients; i++)
			pfd[i] = (struct pollfd){ .fd = clients[i].fd, .events = POLLIN };
		/* Without a listener (making it failed), poll skips a negative fd. */
		pfd[nclients] = (struct pollfd){ .fd = listener.fd, .events = POLLIN };
		pthread_mutex_lock(&agent_lock);
		/* A tick while modules are loaded (libraries the agent could not
		 * hear about), and while the listener needs making again. */
		int timeout = xp_nmodules ? RESCAN_MS : listener.fd < 0 ? 1000 : -1;
		pthread_mutex_unlock(&agent_lock);
		int n = poll(pfd, (nfds_t)nclients + 1, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (n == 0) {
			pthread_mutex_lock(&agent_lock);
			xp_rescan(&xp_pending, 1);
			xp_control_unlock(1);
			continue;
		}
		/* POLLNVAL: closed under us; check_descriptors() sorts it out. */
		for (int i = nclients - 1; i >= 0; i--) {
			if (pfd[i].revents & POLLNVAL)
				continue;
			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (serve(i) != 0)
				drop_client(i);
		}
		if (pfd[nclients].revents & POLLIN)
			accept_client();
	}
	return NULL;
}

static int start_thread(void)
{
	sigset_t all, old;
	pthread_t tid;
	pthread_attr_t attr;

	if (open_listener() != 0)
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
		release(&listener);
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

void xp_control_after_fork_child(int restart)
{
	/* The parent's thread did not survive fork(); its sockets did, unless
	 * the application already took their numbers. */
	for (int i = 0; i < nclients; i++)
		release(&clients[i]);
	nclients = 0;
	release(&listener);
	sock_path[0] = '\0';
	__atomic_store_n(&running, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&rescan_wanted, 0, __ATOMIC_RELAXED);
	if (restart)
		start_thread();
}

void xp_control_after_dlopen(void)
{
	if (!__atomic_load_n(&running, __ATOMIC_ACQUIRE))
		return; /* no agent (off, refused, or not started yet) */
	/* Busy with a command (which may be waiting for a grace period), or
	 * another thread's rescan: the lock holder rescans when it lets go. */
	__atomic_store_n(&rescan_wanted, 1, __ATOMIC_RELEASE);
	if (pthread_mutex_trylock(&agent_lock) == 0)
		xp_control_unlock(0);
}

void xp_control_cleanup(void)
{
	/* At exit: remove the socket so no client finds a dead endpoint.  The
	 * control thread may still be polling; its descriptors die with the
	 * process.  Only the process that made the socket removes it. */
	if (sock_path[0] && sock_pid == getpid())
		unlink(sock_path);
}
