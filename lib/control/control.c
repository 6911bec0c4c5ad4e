/* SPDX-License-Identifier: MIT */
/* The control endpoint: a UNIX socket at /tmp/.xprobes-UID/PID.sock in a
 * directory only the owner can enter (or a private .xprobes-UID.XXXXXX when
 * that name is taken: sockdir.c), served by one agent thread.
 *
 * The thread is created with every signal blocked, installs no handler,
 * and sleeps in poll() when idle: an idle application pays nothing, and a
 * command never waits for the application to hit a site.  A peer may
 * attach only where the kernel would let it ptrace this process (peer.h).  A client that does not
 * deliver a whole request within IO_TIMEOUT_MS, or stops reading, is
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
 *
 * The socket's file is not ours alone either: our uid and root may remove
 * or replace it (an agent of an older version in another pid namespace
 * swept every socket it thought stale).  Once a second the thread checks
 * that the path still names the file it bound, and binds again if not.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control.h"

#define MAX_CLIENTS 16
#define IO_TIMEOUT_MS 5000    /* a request must arrive, a reply be taken, within */
/* A session with no request for this long is closed.  Long, so an
 * interactive shell left open survives lunch; sessions idle for 30 s make
 * room when all slots are taken, which is what stops squatting. */
#define IDLE_TIMEOUT_MS 3600000
#define EVICT_IDLE_MS 30000   /* when full, a session idle this long makes room */
#define RESCAN_MS 250         /* while modules are loaded: find new dlopen()s */
#define FILE_CHECK_MS 1000    /* is our socket's file still there? */

/* A descriptor and what it was when we opened it. */
struct owned_fd {
	int fd;
	dev_t dev;
	ino_t ino;
};

/* One session.  Everything is non-blocking: a client gets its own
 * deadlines, and no client can hold the thread for another. */
struct client {
	struct owned_fd o;
	char *in;                /* request bytes gathered so far */
	size_t inlen;
	long long frame_deadline; /* the partial request must be whole by then */
	long long idle_since;
	struct xp_wait *wait;    /* its command, when it finishes later */
	char *out;               /* reply frame being written */
	size_t outlen, outoff;
	long long write_deadline;
	unsigned long id;        /* for load --session; never 0 */
	int close_after;         /* drop once the reply is out */
	int dead;                /* drop at the next turn of the loop */
};

static struct owned_fd listener = { .fd = -1 };
static struct client clients[MAX_CLIENTS];
static int nclients;
static long long idle_timeout_ms = IDLE_TIMEOUT_MS, evict_idle_ms = EVICT_IDLE_MS;
static long long listener_rest_until; /* accept() failed for want of descriptors */
static int running; /* the control thread exists: rescans are ours to do */
/* Set by an application thread whose dlopen() found the agent busy; the
 * lock holder rescans when it lets go (xp_control_unlock). */
static int rescan_wanted;
static long long next_file_check; /* of our socket's file (sockdir.c) */
/* Making the listener again and removing its file at exit exclude each
 * other: the control thread may be making it again (the file went, or the
 * program took the descriptor) when the process exits, and must not make
 * one after the destructor removed it. */
static pthread_mutex_t listener_lock = PTHREAD_MUTEX_INITIALIZER;
static int exiting;

/* Our descriptors live above the numbers programs expect to get back
 * (a daemon that closes everything and reopens its files counts on 3, 4,
 * ...): moved to FD_FLOOR or above where the limit allows, else kept. */
#define FD_FLOOR 100

static int out_of_the_way(int fd)
{
	int high = fcntl(fd, F_DUPFD_CLOEXEC, FD_FLOOR);
	if (high < 0)
		return fd;
	close(fd);
	return high;
}

/* Take fd as ours (moved out of the way); 0, or -1 with fd closed. */
static int own(struct owned_fd *o, int fd)
{
	struct stat st;

	if (fd < 0)
		return -1;
	fd = out_of_the_way(fd);
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -1;
	}
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

/* Bind fd where sockdir.c says: in the abstract namespace when a file
 * would let a uid that may not attach deny us the agent, else a file in
 * our socket directory.  Fills sa and *len; 0 or -1. */
static int bind_listener(int fd, struct sockaddr_un *sa, socklen_t *len)
{
	*sa = (struct sockaddr_un){ .sun_family = AF_UNIX };
	if (!xp_sockdir_file_is_safe()) {
		if (xp_sockdir_abstract(sa->sun_path + 1, sizeof(sa->sun_path) - 1) != 0)
			return -1;
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				   strlen(sa->sun_path + 1));
	} else {
		if (xp_sockdir_prepare(sa->sun_path, sizeof(sa->sun_path)) != 0)
			return -1;
		*len = sizeof(*sa);
	}
	return xp_fault() ? -1 : bind(fd, (struct sockaddr *)sa, *len);
}

static int open_listener(void)
{
	struct sockaddr_un sa;
	socklen_t len;

	int fd = xp_fault() ? -1 : socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	/* EADDRINUSE: another agent took the name after sockdir.c looked;
	 * it finds another name the next time. */
	int rc = -1;
	for (int tries = 0; tries < 3 && rc != 0; tries++)
		if ((rc = bind_listener(fd, &sa, &len)) != 0 && errno != EADDRINUSE)
			break;
	if (rc != 0) {
		close(fd);
		return -1;
	}
	int abstract = sa.sun_path[0] == '\0';
	if (xp_fault() || (!abstract && chmod(sa.sun_path, 0600) != 0) || listen(fd, 64) != 0) {
		close(fd);
		if (!abstract)
			xp_sockdir_cleanup(sa.sun_path); /* leave no socket nobody serves */
		return -1;
	}
	xp_sockdir_bound(&sa);
	return own(&listener, fd); /* closes fd on failure */
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void drop_client(int i)
{
	struct client *c = &clients[i];
	/* Under the lock, so a fork() child never sees a freed wait. */
	pthread_mutex_lock(&xp_agent.lock);
	if (c->wait) {
		/* Nobody to tell; the operation goes on in the background. */
		xp_command_abandon(c->wait, NULL);
		c->wait = NULL;
	}
	xp_session_end(c->id); /* its load --session modules go */
	xp_control_unlock();
	release(&c->o);
	free(c->in);
	free(c->out);
	clients[i] = clients[--nclients];
}

/* Forget descriptors the application took over (closed, or closed and
 * reused); make the listening socket again if it was one of them. */
static void check_descriptors(void)
{
	for (int i = nclients - 1; i >= 0; i--)
		if (!still_ours(&clients[i].o))
			drop_client(i); /* forgets it: release() closes only our own */
	if (!still_ours(&listener)) {
		pthread_mutex_lock(&listener_lock);
		if (listener.fd >= 0)
			xp_sockdir_remade(0);
		listener.fd = -1;
		if (!__atomic_load_n(&exiting, __ATOMIC_RELAXED))
			open_listener(); /* on failure: tried again after the next wake-up */
		pthread_mutex_unlock(&listener_lock);
	}
}

/* Once every FILE_CHECK_MS: bind again if our socket's file was removed
 * or replaced, since no client could reach us through it any more.  The
 * old listener goes (its queued connections with it); a file that is not
 * ours is left alone, and sockdir.c removes only one nobody listens on. */
static void check_socket_file(long long now)
{
	if (!xp_sockdir_watched() || listener.fd < 0 || now < next_file_check)
		return;
	next_file_check = now + FILE_CHECK_MS;
	pthread_mutex_lock(&listener_lock);
	if (!__atomic_load_n(&exiting, __ATOMIC_RELAXED) && !xp_sockdir_intact()) {
		xp_sockdir_remade(1);
		release(&listener);
		open_listener(); /* on failure: tried again as any listener is */
	}
	pthread_mutex_unlock(&listener_lock);
}

/* A last short error reply, never waiting (the socket buffer takes it). */
static void tell(int fd, const char *msg)
{
	size_t len = strlen(msg) + 1;
	unsigned char hdr[5] = { (unsigned char)len, (unsigned char)(len >> 8), 0, 0, XP_ERR };
	(void)!send(fd, hdr, 5, MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)!send(fd, msg, len - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Queue a reply frame; written as the client takes it. */
static void queue_reply(struct client *c, int status, const char *text, size_t len)
{
	free(c->out);
	c->out = xp_malloc(len + 5);
	if (!c->out) {
		/* Best effort, then the client goes: it must not wait forever. */
		if (still_ours(&c->o))
			tell(c->o.fd, "out of memory for the reply\n");
		c->dead = 1;
		c->outlen = c->outoff = 0;
		return;
	}
	size_t n = len + 1;
	c->out[0] = (char)n;
	c->out[1] = (char)(n >> 8);
	c->out[2] = (char)(n >> 16);
	c->out[3] = (char)(n >> 24);
	c->out[4] = (char)status;
	memcpy(c->out + 5, text, len);
	c->outlen = len + 5;
	c->outoff = 0;
	c->write_deadline = now_ms() + IO_TIMEOUT_MS;
}

static void queue_text(struct client *c, int status, const char *text)
{
	queue_reply(c, status, text, strlen(text));
}

/* A reply that may be too long for the frame. */
static void queue_textbuf(struct client *c, int status, struct textbuf *out)
{
	if (out->truncated) {
		tb_reset(out);
		out->truncated = 0;
		tb_puts(out, "reply too large; narrow the command with a glob\n");
		status = XP_ERR;
	}
	queue_reply(c, status, out->data ? out->data : "", out->len);
}

/* Refuse a connection we will not serve. */
static void refuse(int fd, const char *msg)
{
	tell(fd, msg);
	close(fd);
}

/* When every slot is taken, the session idle longest (past EVICT_IDLE_MS)
 * makes room; -1 if none may. */
static int evictable(long long now)
{
	int best = -1;
	for (int i = 0; i < nclients; i++) {
		struct client *c = &clients[i];
		if (c->wait || c->out || c->inlen || now - c->idle_since < evict_idle_ms)
			continue;
		if (best < 0 || c->idle_since < clients[best].idle_since)
			best = i;
	}
	return best;
}

static void accept_clients(void)
{
	for (int round = 0; round < MAX_CLIENTS && still_ours(&listener); round++) {
		int fd = xp_fault() ? -1 : accept4(listener.fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			/* EAGAIN: nobody else is waiting.  Anything else (no
			 * descriptor left: EMFILE, ENFILE, ENOBUFS) leaves the
			 * connection queued and the listener readable: stop
			 * looking at it for a while rather than spin. */
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				listener_rest_until = now_ms() + 250;
			return;
		}

		/* Whom ptrace would let in, and no one else (peer.h). */
		char why[300], msg[340];
		if (xp_peer_may_attach(fd, why, sizeof(why)) != 0) {
			snprintf(msg, sizeof(msg), "permission denied: %s\n", why);
			refuse(fd, msg);
			continue;
		}
		long long now = now_ms();
		if (nclients == MAX_CLIENTS) {
			int victim = evictable(now);
			if (victim < 0) {
				char msg[160];
				snprintf(msg, sizeof(msg),
					 "too many xprobes sessions on this process (%d, all active); "
					 "try again later\n", MAX_CLIENTS);
				refuse(fd, msg);
				continue;
			}
			if (still_ours(&clients[victim].o))
				tell(clients[victim].o.fd,
				     "session closed: idle while another session needed its place\n");
			drop_client(victim);
		}
		struct client *c = &clients[nclients];
		memset(c, 0, sizeof(*c));
		if (own(&c->o, fd) != 0)
			continue; /* closed by own() */
		c->idle_since = now;
		static unsigned long last_id;
		c->id = ++last_id;
		nclients++;
	}
}

/* Run one whole request of client c. */
static void run_request(struct client *c, const char *req, size_t len)
{
	if (memchr(req, '\0', len)) {
		queue_text(c, XP_ERR, "malformed request: contains a NUL byte\n");
		c->close_after = 1;
		return;
	}
	char *line = xp_strndup(req, len);
	if (!line) {
		queue_text(c, XP_ERR, "out of memory for the request\n");
		return;
	}
	struct textbuf out;
	tb_init(&out, XP_MAX_REPLY - 1);
	pthread_mutex_lock(&xp_agent.lock);
	xp_agent.session = c->id;
	int status = xp_command_start(line, &out, &c->wait);
	xp_agent.session = 0;
	xp_control_unlock();
	free(line);
	if (status != XP_WAIT) {
		queue_textbuf(c, status, &out);
		c->wait = NULL;
	}
	tb_free(&out);
}

/* Read what client c sent; run a request once it is whole.  -1: drop it. */
static int client_read(struct client *c, long long now)
{
	char buf[16384];
	for (;;) {
		/* The application may have taken the number since poll() began. */
		if (!still_ours(&c->o))
			return -1;
		ssize_t n = recv(c->o.fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		if (c->inlen + (size_t)n > XP_MAX_REQUEST + 4 + sizeof(buf)) {
			/* More than one request's worth before a reply: not a client
			 * that follows the protocol. */
			return -1;
		}
		char *grown = xp_realloc(c->in, c->inlen + (size_t)n);
		if (!grown)
			return -1;
		c->in = grown;
		memcpy(c->in + c->inlen, buf, (size_t)n);
		if (!c->inlen)
			c->frame_deadline = now + IO_TIMEOUT_MS;
		c->inlen += (size_t)n;
		if ((size_t)n < sizeof(buf))
			return 0;
	}
}

/* A whole request at the head of c's input: run it.  Returns 1 when it
 * ran one (or answered a malformed one), 0 when there is none to run. */
static int client_parse(struct client *c, long long now)
{
	if (c->wait || c->out || !c->inlen)
		return 0;
	const char *req;
	size_t len, used;
	int rc = xp_frame_parse(c->in, c->inlen, XP_MAX_REQUEST, &req, &len, &used);
	if (rc == -EMSGSIZE) {
		char msg[120];
		snprintf(msg, sizeof(msg), "malformed request: longer than %u bytes\n",
			 XP_MAX_REQUEST);
		queue_text(c, XP_ERR, msg);
		c->close_after = 1;
		c->inlen = 0;
		return 1;
	}
	if (rc != 0)
		return 0;
	run_request(c, req, len);
	memmove(c->in, c->in + used, c->inlen - used);
	c->inlen -= used;
	c->frame_deadline = c->inlen ? now + IO_TIMEOUT_MS : 0;
	c->idle_since = now;
	return 1;
}

/* Write what the client will take.  -1: drop it. */
static int client_write(struct client *c, long long now)
{
	while (c->out && c->outoff < c->outlen) {
		if (!still_ours(&c->o))
			return -1;
		ssize_t n = send(c->o.fd, c->out + c->outoff, c->outlen - c->outoff,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->outoff += (size_t)n;
	}
	if (c->out) {
		free(c->out);
		c->out = NULL;
		c->idle_since = now;
		if (c->close_after)
			return -1;
		/* The next request's time starts now, not while we were busy. */
		if (c->inlen)
			c->frame_deadline = now + IO_TIMEOUT_MS;
	}
	return 0;
}

/* Run every whole request c has sent, one after another, as long as each
 * reply goes out at once (pipelined requests).  -1: drop it. */
static int client_serve(struct client *c, long long now)
{
	int rc = 0;
	while (!rc && !c->dead) {
		int ran = client_parse(c, now);
		if (c->out)
			rc = client_write(c, now);
		if (!ran || c->out || c->wait)
			break;
	}
	return c->dead ? -1 : rc;
}

/* Finish waits whose operation ended; tell those past their deadline what
 * is awaited.  Under xp_agent.lock. */
static void progress_waits(long long now)
{
	for (int i = 0; i < nclients; i++) {
		struct client *c = &clients[i];
		if (!c->wait)
			continue;
		struct textbuf out;
		tb_init(&out, XP_MAX_REPLY - 1);
		int status = xp_command_poll(c->wait, &out);
		if (status == XP_WAIT && now >= xp_command_deadline(c->wait))
			status = xp_command_abandon(c->wait, &out);
		if (status != XP_WAIT) {
			c->wait = NULL;
			queue_textbuf(c, status, &out);
		}
		tb_free(&out);
	}
}

void xp_control_unlock(void)
{
	pthread_mutex_unlock(&xp_agent.lock);
	/* A dlopen() that found us busy left its rescan to us; and while we
	 * rescan, another may find us busy again. */
	while (__atomic_load_n(&rescan_wanted, __ATOMIC_ACQUIRE) &&
	       pthread_mutex_trylock(&xp_agent.lock) == 0) {
		if (__atomic_exchange_n(&rescan_wanted, 0, __ATOMIC_ACQ_REL))
			xp_rescan(&xp_agent.pending);
		pthread_mutex_unlock(&xp_agent.lock);
	}
}

static long long min_deadline(long long a, long long b)
{
	return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

static void *control_thread(void *arg)
{
	(void)arg;
	xp_trace_thread_exclude();
	struct pollfd pfd[MAX_CLIENTS + 1];
	long long next_rescan = now_ms() + RESCAN_MS, busy_since = 0;

	for (;;) {
		check_descriptors();
		long long now = now_ms();
		check_socket_file(now);

		/* Background work: grace periods, module commands, unloads. */
		pthread_mutex_lock(&xp_agent.lock);
		int busy = xp_sync_progress(NULL) | xp_jobs_progress();
		xp_modules_reap();
		xp_session_end(XP_SESSION_ENDED); /* unloads that could not start */
		if (xp_agent.nmodules && now >= next_rescan) {
			xp_rescan(&xp_agent.pending);
			next_rescan = now + RESCAN_MS;
		}
		progress_waits(now);
		int modules = xp_agent.nmodules != 0;
		int ahead_ms = xp_trace_record_ahead(); /* rings' pages before their writers */
		xp_control_unlock(); /* and a dlopen's rescan left to us meanwhile */

		/* Drop clients past their deadlines. */
		for (int i = nclients - 1; i >= 0; i--) {
			struct client *c = &clients[i];
			int late = c->dead ||
				   (c->inlen && !c->wait && !c->out && now >= c->frame_deadline) ||
				   (c->out && now >= c->write_deadline) ||
				   (!c->wait && !c->out && !c->inlen &&
				    now - c->idle_since >= idle_timeout_ms);
			if (late)
				drop_client(i);
		}

		long long deadline = -1;
		/* A grace period or a command in flight: look again soon, and
		 * less often once it has lasted a second (a handler or command
		 * that does not return must not cost a thousand wake-ups a
		 * second for ever). */
		if (!busy)
			busy_since = 0;
		else if (!busy_since)
			busy_since = now;
		if (busy)
			deadline = now + (now - busy_since < 1000 ? 1 : 50);
		if (modules)
			deadline = min_deadline(deadline, next_rescan);
		if (ahead_ms >= 0)
			deadline = min_deadline(deadline, now + ahead_ms);
		if (listener.fd < 0)
			deadline = min_deadline(deadline, now + 1000);
		else if (xp_sockdir_watched())
			deadline = min_deadline(deadline, next_file_check);
		int nl, n = 0;
		for (int i = 0; i < nclients; i++) {
			struct client *c = &clients[i];
			short ev = c->out ? POLLOUT : c->wait ? 0 : POLLIN;
			pfd[n++] = (struct pollfd){ .fd = c->o.fd, .events = ev };
			if (c->inlen && !c->wait && !c->out)
				deadline = min_deadline(deadline, c->frame_deadline);
			if (c->out)
				deadline = min_deadline(deadline, c->write_deadline);
			if (c->wait)
				deadline = min_deadline(deadline, busy_since && now - busy_since >= 1000
								  ? now + 50 : now + 1);
			else if (!c->out && !c->inlen)
				deadline = min_deadline(deadline, c->idle_since + idle_timeout_ms);
		}
		/* Without a listener (making it failed), poll skips a negative fd. */
		nl = n;
		int resting = now < listener_rest_until;
		pfd[n++] = (struct pollfd){ .fd = resting ? -1 : listener.fd, .events = POLLIN };
		if (resting)
			deadline = min_deadline(deadline, listener_rest_until);
		int timeout = deadline < 0 ? -1 : deadline <= now ? 0 : (int)(deadline - now);
		int r = poll(pfd, (nfds_t)n, timeout);
		if (r < 0 && errno != EINTR)
			break;
		if (r <= 0)
			continue;
		now = now_ms();
		/* POLLNVAL: closed under us; check_descriptors() sorts it out.
		 * Indices are the clients' before any drop: walk down. */
		for (int i = nclients - 1; i >= 0; i--) {
			short re = pfd[i].revents;
			struct client *c = &clients[i];
			if (!re || (re & POLLNVAL))
				continue;
			int rc = 0;
			if (re & POLLOUT)
				rc = client_write(c, now);
			if (!rc && (re & POLLIN))
				rc = client_read(c, now);
			if (!rc && (re & (POLLHUP | POLLERR)) && !(re & POLLIN))
				rc = -1;
			if (!rc)
				rc = client_serve(c, now); /* most replies go out at once */
			if (rc)
				drop_client(i);
		}
		if (pfd[nl].revents & POLLIN)
			accept_clients();
	}
	return NULL;
}

static int start_thread(void)
{
	const char *e = getenv("XPROBES_IDLE_TIMEOUT_MS");
	if (e && atoll(e) > 0)
		idle_timeout_ms = atoll(e);
	if ((e = getenv("XPROBES_EVICT_IDLE_MS")) && atoll(e) >= 0 && *e)
		evict_idle_ms = atoll(e);
	if (open_listener() != 0)
		return -1;
	if (xp_thread_start(control_thread, NULL, "xprobes-agent") != 0) {
		xp_sockdir_unbind();
		release(&listener);
		return -1;
	}
	__atomic_store_n(&running, 1, __ATOMIC_RELEASE);
	return 0;
}

int xp_control_start(void)
{
	if (__atomic_load_n(&running, __ATOMIC_ACQUIRE))
		return 0; /* started already (the constructor) */
	return start_thread();
}

int xp_control_after_fork_child(int restart)
{
	/* The parent's thread did not survive fork(); its sockets did, unless
	 * the application already took their numbers.  The client table may
	 * have been mid-change in that thread (it is not under the lock), so
	 * its buffers and waits are left alone: a small leak, never a double
	 * free.  Their operations go on here too. */
	for (int i = 0; i < nclients && i < MAX_CLIENTS; i++)
		release(&clients[i].o);
	nclients = 0;
	release(&listener);
	xp_sockdir_forget();
	/* The parent's control thread may have held it at the fork. */
	pthread_mutex_init(&listener_lock, NULL);
	__atomic_store_n(&running, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&rescan_wanted, 0, __ATOMIC_RELAXED);
	if (!restart)
		return 0;
	/* The sessions that loaded modules with --session are the parent's:
	 * none will end here, so the child's control thread unloads them. */
	for (size_t i = 0; i < xp_agent.nmodules; i++)
		if (xp_agent.modules[i]->owner)
			xp_agent.modules[i]->owner = XP_SESSION_ENDED;
	xp_jobs_after_fork_child();
	return start_thread();
}

void xp_control_after_dlopen(void)
{
	if (!__atomic_load_n(&running, __ATOMIC_ACQUIRE))
		return; /* no agent (off, refused, or not started yet) */
	xp_trace_after_dlopen();
	/* Busy with a command, or another thread's rescan: the lock holder
	 * rescans when it lets go. */
	__atomic_store_n(&rescan_wanted, 1, __ATOMIC_RELEASE);
	if (pthread_mutex_trylock(&xp_agent.lock) == 0)
		xp_control_unlock();
}

void xp_control_cleanup(void)
{
	/* At exit: remove the socket so no client finds a dead endpoint.  The
	 * control thread may still be polling; its descriptors die with the
	 * process.  Only the process that made the socket removes it.  Exit
	 * never waits: if the thread is making the listener again this
	 * instant, the file stays, and the next agent of the uid sweeps it. */
	__atomic_store_n(&exiting, 1, __ATOMIC_RELAXED);
	if (pthread_mutex_trylock(&listener_lock) != 0)
		return;
	xp_sockdir_unbind();
	pthread_mutex_unlock(&listener_lock);
}
