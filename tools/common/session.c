/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/base/base.h"

/* A target as the tool sees it before connecting. */
struct target {
	struct proc_status ps;
	char rundir[256]; /* its own XPROBES_RUNDIR, or "" for ours */
};

/* The target's own XPROBES_RUNDIR (what its agent used), if we may read
 * its environment and it has one; else "". */
static void target_rundir(pid_t pid, char *out, size_t outsz)
{
	char path[64];
	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char *var = NULL;
	size_t cap = 0;
	while (getdelim(&var, &cap, '\0', f) > 0) {
		if (strncmp(var, "XPROBES_RUNDIR=", 15) == 0) {
			snprintf(out, outsz, "%s", var + 15);
			break;
		}
	}
	free(var);
	fclose(f);
}

/* The agent went elsewhere because its usual directory was taken: say
 * which directory, whose, and where the agent went instead. */
static void note_squatted(pid_t pid, const struct target *t, const char *prefix, uid_t uid,
			  const char *bound)
{
	char dir[256], seen[320];
	struct stat st;
	size_t n;

	if (xp_socket_dir_under(dir, sizeof(dir), t->rundir, uid) != 0)
		return;
	n = strlen(dir);
	if (strncmp(bound, dir, n) == 0 && bound[n] == '/')
		return; /* it is where it belongs */
	snprintf(seen, sizeof(seen), "%s%s", prefix, dir);
	if (socktrust_squatted(seen, uid, &st))
		tool_err(
			"note: %s is not uid %u's own (owner uid %u, mode %o): someone\n"
			"  else made it first, so process %d's agent listens in %.*s instead\n",
			dir, (unsigned)uid, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
			(int)pid, (int)(strrchr(bound, '/') - bound), bound);
}

/* Where the agent of pid listens.  First as the kernel knows it (the
 * target's listening socket, sockfind.c), which needs ptrace rights; else
 * guessed: an abstract name that looks like its agent's (a process that
 * changed credentials has no socket file: lib/control/sockdir.c), or a
 * file in the target's /tmp as its mount namespace sees it (systemd's
 * PrivateTmp, containers: reached through /proc/PID/root), named by its
 * pid in its own pid namespace, in the directory of the uid it had when
 * the agent started: a process that later dropped privileges without
 * forking (memcached -u) keeps its socket in root's directory.  Returns 0
 * with the path ("@NAME" for an abstract name), -1 if none.  A path is
 * only a lead: connect_once checks it. */
static int find_socket(pid_t pid, const struct target *t, char *out, size_t outsz,
		       uid_t *sock_uid)
{
	const struct proc_status *ps = &t->ps;
	char prefix[64], dir[256], bound[256];
	snprintf(prefix, sizeof(prefix), "/proc/%d/root", (int)pid);
	/* Without access to the target's root (a process that changed
	 * credentials is not dumpable), assume it shares our /tmp. */
	int via_root = access(prefix, X_OK) == 0;
	if (!via_root)
		prefix[0] = '\0';

	/* The kernel first.  It may show no agent socket although there is an
	 * agent (the program closed its listener, which the agent makes again
	 * when woken), or we may not read the target's descriptors: guess. */
	int found = sockfind_listening(pid, ps->nspid, bound, sizeof(bound), sock_uid);
	if (found == -1) /* no ptrace rights: the name alone */
		found = sockfind_abstract_by_name(pid, ps->nspid, bound, sizeof(bound), sock_uid);
	if (found == 0) {
		int abstract = bound[0] == '@';
		int n = snprintf(out, outsz, "%s%s", abstract ? "" : prefix, bound);
		if (n >= 0 && (size_t)n < outsz) {
			if (!abstract)
				note_squatted(pid, t, prefix, *sock_uid, bound);
			return 0;
		}
	}

	uid_t order[5] = { ps->uid[1], ps->uid[0], ps->uid[2], ps->uid[3], 0 };
	for (int i = 0; i < 5; i++) {
		int seen = 0;
		for (int j = 0; j < i; j++)
			seen |= order[j] == order[i];
		if (seen || xp_socket_dir_under(dir, sizeof(dir), t->rundir, order[i]))
			continue;
		for (int r = via_root ? 0 : 1; r < 2; r++) {
			int n = snprintf(out, outsz, "%s%s/%d.sock", r == 0 ? prefix : "", dir,
					 (int)ps->nspid);
			if (n < 0 || (size_t)n >= outsz)
				continue;
			struct stat st;
			if (lstat(out, &st) == 0 || errno == EACCES) {
				*sock_uid = order[i];
				return 0;
			}
			if (r == 0)
				break; /* the target's view is the true one */
		}
	}
	return -1;
}

static void no_agent(pid_t pid, const struct target *t)
{
	tool_err(
		"process %d has no XProbes agent.\n"
		"  Inject one with 'xprobes --inject %d', link the program with\n"
		"  -lxprobes, or start it with LD_PRELOAD=libxprobes.so.\n",
		(int)pid, (int)pid);
	/* An agent does not use a socket directory that is not the owner's
	 * alone: it makes a private one, which only the kernel can point to. */
	uid_t uid = t->ps.uid[1];
	char dir[256];
	struct stat st;
	if (xp_socket_dir_under(dir, sizeof(dir), t->rundir, uid) == 0 &&
	    socktrust_squatted(dir, uid, &st))
		fprintf(stderr,
			"  Note: %s is not uid %u's own (owner uid %u, mode %o); its agents\n"
			"  listen in a private %s.XXXXXX instead, which only someone allowed\n"
			"  to trace the process can find.  Remove the squatter's directory.\n",
			dir, (unsigned)uid, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), dir);
}

/* Send line and read the reply frame within the session's timeout; the
 * result is xp_recv_frame_within's.  *send_errno: 0, or why the send
 * failed.  Even if it failed, the agent may have said why it hung up (a
 * refusal is written before the agent closes): the reply is read anyway. */
static int exchange(struct session *s, const char *line, char **buf, size_t *len,
		    int *send_errno)
{
	*send_errno = xp_send_frame(s->fd, line, strlen(line)) == 0 ? 0 : errno;
	return xp_recv_frame_within(s->fd, buf, len, XP_MAX_REPLY, s->timeout_ms);
}

/* A reply frame (rc and len from exchange) that no agent sends: say what
 * was wrong with it and return 1, else 0.  Whatever answers is the target
 * itself, which may be anyone's program, so its frames are checked, not
 * taken for a lost connection. */
static int bad_reply(const struct session *s, int rc, const char *buf, size_t len)
{
	if (rc == -2)
		tool_err("process %d sent a reply of more than %u bytes (an agent's "
				"limit); not reading it\n", (int)s->pid, XP_MAX_REPLY);
	else if (rc == 0 && len < 1)
		tool_err("process %d sent an empty reply (no status byte)\n",
			(int)s->pid);
	else if (rc == 0 && buf[0] != XP_OK && buf[0] != XP_ERR)
		tool_err("process %d sent a reply with status %u (an agent's are "
				"%d and %d)\n", (int)s->pid, (unsigned char)buf[0], XP_OK, XP_ERR);
	else
		return 0;
	return 1;
}

/* Why connecting to path failed with errno e, in the user's terms.
 * Returns -2 (no agent) or -1. */
static int connect_failed(struct session *s, const char *path, int e, uid_t sock_uid,
			  int quiet_no_agent, const struct target *t)
{
	const struct proc_status *ps = &t->ps;
	/* A refused connection is a socket whose process is gone (or an agent
	 * between bind() and listen()): leave the file to the agents, which
	 * sweep stale ones. */
	if (e == ENOENT || e == ECONNREFUSED) {
		if (!quiet_no_agent)
			no_agent(s->pid, t);
		return -2;
	} else if (e == EACCES || e == EPERM) {
		if (sock_uid != ps->uid[1])
			tool_err(
				"permission denied connecting to %s: process %d started its\n"
				"  agent as uid %u (before changing to uid %u), so only uid %u or root may attach\n",
				path, (int)s->pid, (unsigned)sock_uid, (unsigned)ps->uid[1],
				(unsigned)sock_uid);
		else
			tool_err(
				"permission denied connecting to %s: only the owner of process %d or root may attach\n",
				path, (int)s->pid);
	} else {
		tool_err("cannot connect to %s: %s\n", path, strerror(e));
	}
	return -1;
}

/* Connect to the very file checked (O_PATH descriptor pfd, closed here),
 * whatever happens to its name meanwhile (and however long the path).
 * The descriptor; -1 with errno (connect failed), or -2 (message printed). */
static int connect_checked_file(int pfd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", pfd);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		tool_perror("socket");
		close(pfd);
		return -2;
	}
	int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	close(pfd);
	if (rc != 0) {
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Open a connection to the agent's socket at path, but only to a socket
 * that passes socktrust.c's checks and is served by process s->pid
 * itself: nothing is sent to anyone else.  Returns the descriptor, or
 * -1 / -2 as connect_failed(). */
static int trusted_connect(struct session *s, const char *path, uid_t sock_uid,
			   int quiet_no_agent, const struct target *t)
{
	const struct proc_status *ps = &t->ps;
	struct sock_owners owners = { { ps->uid[0], ps->uid[1], ps->uid[2], ps->uid[3], 0 } };
	char why[640], shown[512];
	/* Names in messages come from the target (its XPROBES_RUNDIR). */
	snprintf(shown, sizeof(shown), "%s", path);
	sanitize_text(shown);
	int fd;
	if (path[0] == '@') {
		/* No file: nobody can remove it, nor put anything in its place. */
		fd = socktrust_connect_abstract(s->pid, path + 1);
		if (fd < 0)
			return connect_failed(s, shown, errno, sock_uid, quiet_no_agent, t);
	} else {
		int pfd = socktrust_open(path, &owners, why, sizeof(why));
		if (pfd < 0 && errno == EPERM) {
			tool_err("refusing to attach to process %d: %s\n", (int)s->pid,
				sanitize_text(why));
			return -1;
		}
		if (pfd < 0)
			return connect_failed(s, shown, errno, sock_uid, quiet_no_agent, t);
		fd = connect_checked_file(pfd);
		if (fd < 0)
			return fd == -1 ? connect_failed(s, shown, errno, sock_uid, quiet_no_agent, t)
					: -1;
	}
	if (socktrust_peer_is(fd, s->pid, why, sizeof(why)) != 0) {
		close(fd);
		tool_err(
			"refusing %s: %s; something else poses as process %d's agent\n",
			shown, why, (int)s->pid);
		return -1;
	}
	struct ucred peer;
	socklen_t plen = sizeof(peer);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &plen) != 0 ||
	    session_mem_check(s, peer.uid, peer.gid, why, sizeof(why)) != 0) {
		close(fd);
		tool_err("refusing to attach to process %d: %s\n", (int)s->pid,
			 plen == sizeof(peer) ? why : "cannot tell who listens");
		return -1;
	}
	return fd;
}

/* Connect and say hello.  Returns 0, -1 (message printed), -2 (no agent),
 * or -3 (connected, but the agent closed without a word: retry). */
static int connect_once(struct session *s, const char *path, uid_t sock_uid, int quiet_no_agent,
			const struct target *t)
{
	int fd = trusted_connect(s, path, sock_uid, quiet_no_agent, t);
	if (fd < 0)
		return fd;
	s->fd = fd;
	/* The agent checks our credentials first: ask something harmless so
	 * a refusal is reported now, with the agent's own words. */
	char *buf = NULL;
	size_t len;
	int send_errno;
	int rc = exchange(s, "version", &buf, &len, &send_errno);
	if (rc == 0 && len >= 1 && buf[0] == XP_OK) {
		free(buf);
		return 0;
	}
	int e = errno;
	session_close(s);
	if (bad_reply(s, rc, buf, len)) {
		free(buf);
		return -1;
	}
	if (rc == 0) {
		tool_err("%s", sanitize_text(buf + 1));
		free(buf);
		return -1;
	}
	free(buf);
	if (rc == -1 && e == ETIMEDOUT) {
		tool_err("process %d did not answer within %d s\n", (int)s->pid,
			s->timeout_ms / 1000);
		return -1;
	}
	return -3;
}

/* Is libxprobes mapped in pid?  (Then it has, or is remaking, an agent.) */
static int maps_agent_library(pid_t pid)
{
	char path[64], line[4096];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	int found = 0;
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, "/libxprobes.so") != NULL;
	if (f)
		fclose(f);
	return found;
}

static int open_checked(struct session *s, pid_t pid, int quiet_no_agent)
{
	struct target t;
	struct proc_status *ps = &t.ps;
	char path[512]; /* connected through /proc/self/fd: not bound by sun_path */
	uid_t sock_uid;

	s->fd = -1;
	s->memfd = -1;
	s->pid = pid;
	if (s->timeout_ms == 0)
		s->timeout_ms = SESSION_DEFAULT_TIMEOUT_MS;
	if (proc_status_read(pid, ps) != 0) {
		tool_err("no such process: %d\n", (int)pid);
		return -1;
	}
	if (ps->tgid != pid) {
		/* A thread id, as top -H and perf show them. */
		tool_err("%d is a thread of process %d; attaching to %d\n", (int)pid,
			(int)ps->tgid, (int)ps->tgid);
		s->pid = pid = ps->tgid;
		if (proc_status_read(pid, ps) != 0) {
			tool_err("no such process: %d\n", (int)pid);
			return -1;
		}
	}
	/* Before anything about the process is checked: every check from
	 * here on describes the image this descriptor holds, or a later one
	 * (then the descriptor is dead: session_mem.c). */
	session_mem_open(s);
	if (proc_status_read(pid, ps) != 0) {
		tool_err("no such process: %d\n", (int)pid);
		return -1;
	}
	/* A zombie leader whose other threads run on (it called pthread_exit)
	 * is a live process. */
	if ((ps->state == 'Z' || ps->state == 'X') && ps->threads <= 1) {
		tool_err("process %d has exited (zombie)\n", (int)pid);
		return -1;
	}
	if (geteuid() != 0 && geteuid() != ps->uid[1]) {
		tool_err(
			"permission denied: process %d belongs to uid %u and you are uid %u;\n"
			"  only the process owner or root may attach\n",
			(int)pid, (unsigned)ps->uid[1], (unsigned)geteuid());
		return -1;
	}
	target_rundir(pid, t.rundir, sizeof(t.rundir));
	/* A tracer (strace) stops its tracee at every system call for a few
	 * microseconds: look again for up to 100 ms before calling a process
	 * in a tracing stop stopped. */
	for (int i = 0; i < 20 && ps->state == 't'; i++) {
		usleep(5000);
		if (proc_status_read(pid, ps) != 0)
			break;
	}
	if (proc_stopped_by(ps->state)) {
		tool_err(
			"process %d is stopped (%s): its agent cannot answer until it runs;\n"
			"  continue it first (kill -CONT %d, or from the debugger)\n",
			(int)pid, proc_stopped_by(ps->state), (int)pid);
		return -1;
	}
	/* A program that closed the agent's listening socket under it (as
	 * daemons close every descriptor) leaves a moment in which the old
	 * socket resets a connection (-3), or there is none (-2), until the
	 * agent notices (within its 250 ms tick) and listens again; a socket
	 * file someone removed is made again within a second.  In a process
	 * that has the agent's library, look again for two seconds before
	 * saying there is no agent. */
	int rc = -2;
	for (int tries = 0; tries <= 40; tries++) {
		if (tries && rc == -2) {
			if (!maps_agent_library(pid))
				break;
			struct timespec pause = { 0, 50 * 1000 * 1000 };
			nanosleep(&pause, NULL);
		}
		rc = find_socket(pid, &t, path, sizeof(path), &sock_uid) == 0
			     ? connect_once(s, path, sock_uid, 1, &t) : -2;
		if (rc != -2 && rc != -3)
			break;
	}
	if (rc == -2 && !quiet_no_agent)
		no_agent(pid, &t);
	if (rc == -3) {
		tool_err("process %d closed the connection without answering\n",
			(int)pid);
		rc = -1;
	}
	return rc;
}

int session_open(struct session *s, pid_t pid, int quiet_no_agent)
{
	int rc = open_checked(s, pid, quiet_no_agent);
	if (rc != 0)
		session_mem_close(s);
	return rc;
}

void session_close(struct session *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	session_mem_close(s);
}

int session_call(struct session *s, const char *line, char **text)
{
	char *buf;
	size_t len;

	*text = NULL;
	if (strlen(line) > XP_MAX_REQUEST) {
		if (asprintf(text, "%s: command too long: %zu bytes, at most %u\n", tool_name(), strlen(line),
			     XP_MAX_REQUEST) < 0)
			*text = NULL;
		return 1;
	}
	int send_errno;
	int rc = exchange(s, line, &buf, &len, &send_errno);
	if (rc == -1 && errno == ETIMEDOUT) {
		tool_err(
			"no reply from process %d within %d s (is it stopped, or is a module's\n"
			"  handler blocking? disable and unload wait for handlers to return); the\n"
			"  command may still complete.  --timeout SECS waits longer, 0 for ever\n",
			(int)s->pid, s->timeout_ms / 1000);
		return -1;
	}
	if (send_errno && rc != 0) {
		tool_err("lost connection to process %d: %s\n",
			(int)s->pid, strerror(send_errno));
		return -1;
	}
	if (bad_reply(s, rc, buf, len)) {
		free(buf);
		return -1;
	}
	if (rc != 0) {
		tool_err("lost connection to process %d%s%s\n", (int)s->pid,
			rc == -1 && errno ? ": " : " (did it exit?)",
			rc == -1 && errno ? strerror(errno) : "");
		return -1;
	}
	int status = buf[0];
	memmove(buf, buf + 1, len); /* includes the NUL */
	*text = buf;
	return status == 0 ? 0 : 1;
}
