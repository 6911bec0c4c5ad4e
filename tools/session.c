#define _GNU_SOURCE
#include "session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../lib/wire.h"

/* What /proc/PID/status says about a process. */
struct proc_status {
	char state;      /* R, S, D, T (stopped), t (traced), Z... */
	pid_t tgid;      /* the process of a thread id */
	pid_t nspid;     /* the pid in its own namespace: its socket's name */
	uid_t uid[4];    /* real, effective, saved, filesystem */
	int threads;
};

static int read_status(pid_t pid, struct proc_status *ps)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int have_uid = 0;
	*ps = (struct proc_status){ .state = '?', .tgid = pid, .nspid = pid };
	while (fgets(line, sizeof(line), f)) {
		unsigned u[4];
		int v;
		if (sscanf(line, "State: %c", &ps->state) == 1)
			continue;
		if (sscanf(line, "Tgid: %d", &v) == 1)
			ps->tgid = v;
		else if (sscanf(line, "Threads: %d", &v) == 1)
			ps->threads = v;
		else if (strncmp(line, "NSpid:", 6) == 0) {
			/* One pid per namespace level, innermost last. */
			char *save, *tok = strtok_r(line + 6, " \t\n", &save);
			for (; tok; tok = strtok_r(NULL, " \t\n", &save))
				ps->nspid = atoi(tok);
		} else if (sscanf(line, "Uid: %u %u %u %u", &u[0], &u[1], &u[2], &u[3]) == 4) {
			for (int i = 0; i < 4; i++)
				ps->uid[i] = u[i];
			have_uid = 1;
		}
	}
	fclose(f);
	return have_uid ? 0 : -1;
}

/* The target's own XPROBES_RUNDIR (what its agent used), if we may read
 * its environment; else ours (xp_socket_dir's default). */
static void target_rundir(pid_t pid, char *out, size_t outsz)
{
	char path[64];
	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	FILE *f = fopen(path, "r");
	if (f) {
		char *var = NULL;
		size_t cap = 0;
		while (getdelim(&var, &cap, '\0', f) > 0) {
			if (strncmp(var, "XPROBES_RUNDIR=", 15) == 0 && var[15]) {
				snprintf(out, outsz, "%s", var + 15);
				break;
			}
		}
		free(var);
		fclose(f);
	}
	if (!out[0]) {
		const char *e = getenv("XPROBES_RUNDIR");
		snprintf(out, outsz, "%s", e && *e ? e : "/tmp");
	}
}

/* Where the agent of pid listens.  The socket is in the target's /tmp as
 * its mount namespace sees it (systemd's PrivateTmp, containers: reached
 * through /proc/PID/root), named by its pid in its own pid namespace, in
 * the directory of the uid it had when the agent started: a process that
 * later dropped privileges (memcached -u) keeps its socket in root's
 * directory.  Returns 0 with the first existing path, -1 if none. */
static int find_socket(pid_t pid, const struct proc_status *ps, char *out, size_t outsz,
		       uid_t *sock_uid)
{
	char rundir[256], prefix[64];
	target_rundir(pid, rundir, sizeof(rundir));
	snprintf(prefix, sizeof(prefix), "/proc/%d/root", (int)pid);
	/* Without access to the target's root (a process that changed
	 * credentials is not dumpable), assume it shares our /tmp. */
	int via_root = access(prefix, X_OK) == 0;
	uid_t order[5] = { ps->uid[1], ps->uid[0], ps->uid[2], ps->uid[3], 0 };

	for (int i = 0; i < 5; i++) {
		int seen = 0;
		for (int j = 0; j < i; j++)
			seen |= order[j] == order[i];
		if (seen)
			continue;
		for (int r = via_root ? 0 : 1; r < 2; r++) {
			int n = snprintf(out, outsz, "%s%s/.xprobes-%u/%d.sock", r == 0 ? prefix : "",
					 rundir, (unsigned)order[i], (int)ps->nspid);
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

static void no_agent(pid_t pid, const struct proc_status *ps)
{
	fprintf(stderr,
		"xprobes: process %d has no XProbes agent.\n"
		"  Inject one with 'xprobes --inject %d', link the program with\n"
		"  -lxprobes, or start it with LD_PRELOAD=libxprobes.so.\n",
		(int)pid, (int)pid);
	/* An agent refuses a socket directory that is not the owner's alone:
	 * say so if that is why there is none. */
	char rundir[256], dir[512];
	struct stat st;
	target_rundir(pid, rundir, sizeof(rundir));
	snprintf(dir, sizeof(dir), "%s/.xprobes-%u", rundir, (unsigned)ps->uid[1]);
	if (lstat(dir, &st) == 0 &&
	    (!S_ISDIR(st.st_mode) || st.st_uid != ps->uid[1] || (st.st_mode & 0077)))
		fprintf(stderr,
			"  Note: %s is not a directory private to uid %u (owner %u, mode %o);\n"
			"  an agent refuses it.  Remove it, or set XPROBES_RUNDIR.\n",
			dir, (unsigned)ps->uid[1], (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
}

/* Connect and say hello.  Returns 0, -1 (message printed), -2 (no agent),
 * or -3 (connected, but the agent closed without a word: retry). */
static int connect_once(struct session *s, const char *path, uid_t sock_uid, int quiet_no_agent,
			const struct proc_status *ps)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		perror("xprobes: socket");
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;
		close(fd);
		/* A refused connection is a socket whose process is gone (or an
		 * agent between bind() and listen()): leave the file to the
		 * agents, which sweep stale ones. */
		if (e == ENOENT || e == ECONNREFUSED) {
			if (!quiet_no_agent)
				no_agent(s->pid, ps);
			return -2;
		} else if (e == EACCES || e == EPERM) {
			if (sock_uid != ps->uid[1])
				fprintf(stderr,
					"xprobes: permission denied connecting to %s: process %d started its\n"
					"  agent as uid %u (before changing to uid %u), so only uid %u or root may attach\n",
					path, (int)s->pid, (unsigned)sock_uid, (unsigned)ps->uid[1],
					(unsigned)sock_uid);
			else
				fprintf(stderr,
					"xprobes: permission denied connecting to %s: only the owner of process %d or root may attach\n",
					path, (int)s->pid);
		} else {
			fprintf(stderr, "xprobes: cannot connect to %s: %s\n", path, strerror(e));
		}
		return -1;
	}
	s->fd = fd;
	/* The agent checks our credentials first: ask something harmless so
	 * a refusal is reported now, with the agent's own words. */
	char *buf = NULL;
	size_t len;
	int rc = -1;
	if (xp_send_frame(fd, "version", 7) == 0 || errno == EPIPE || errno == ECONNRESET)
		rc = xp_recv_frame_within(fd, &buf, &len, XP_MAX_REPLY, s->timeout_ms);
	if (rc == 0 && len >= 1 && buf[0] == XP_OK) {
		free(buf);
		return 0;
	}
	int e = errno;
	session_close(s);
	if (rc == 0 && len >= 1) {
		fprintf(stderr, "xprobes: %s", buf + 1);
		free(buf);
		return -1;
	}
	free(buf);
	if (rc == -1 && e == ETIMEDOUT) {
		fprintf(stderr, "xprobes: process %d did not answer within %d s\n", (int)s->pid,
			s->timeout_ms / 1000);
		return -1;
	}
	return -3;
}

int session_open(struct session *s, pid_t pid, int quiet_no_agent)
{
	struct proc_status ps;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uid_t sock_uid;

	s->fd = -1;
	s->pid = pid;
	if (s->timeout_ms == 0)
		s->timeout_ms = SESSION_DEFAULT_TIMEOUT_MS;
	if (read_status(pid, &ps) != 0) {
		fprintf(stderr, "xprobes: no such process: %d\n", (int)pid);
		return -1;
	}
	if (ps.tgid != pid) {
		/* A thread id, as top -H and perf show them. */
		fprintf(stderr, "xprobes: %d is a thread of process %d; attaching to %d\n", (int)pid,
			(int)ps.tgid, (int)ps.tgid);
		s->pid = pid = ps.tgid;
		if (read_status(pid, &ps) != 0) {
			fprintf(stderr, "xprobes: no such process: %d\n", (int)pid);
			return -1;
		}
	}
	/* A zombie leader whose other threads run on (it called pthread_exit)
	 * is a live process. */
	if ((ps.state == 'Z' || ps.state == 'X') && ps.threads <= 1) {
		fprintf(stderr, "xprobes: process %d has exited (zombie)\n", (int)pid);
		return -1;
	}
	if (geteuid() != 0 && geteuid() != ps.uid[1]) {
		fprintf(stderr,
			"xprobes: permission denied: process %d belongs to uid %u and you are uid %u;\n"
			"  only the process owner or root may attach\n",
			(int)pid, (unsigned)ps.uid[1], (unsigned)geteuid());
		return -1;
	}
	if (find_socket(pid, &ps, path, sizeof(path), &sock_uid) != 0) {
		if (!quiet_no_agent)
			no_agent(pid, &ps);
		return -2;
	}
	if (ps.state == 'T' || ps.state == 't') {
		fprintf(stderr,
			"xprobes: process %d is stopped (%s): its agent cannot answer until it runs;\n"
			"  continue it first (kill -CONT %d, or from the debugger)\n",
			(int)pid, ps.state == 'T' ? "by a signal" : "by a debugger", (int)pid);
		return -1;
	}
	/* A program that closed the agent's listening socket under it (as
	 * daemons close every descriptor) leaves the first connection to a
	 * socket nobody will serve; the agent makes a new one when woken. */
	int rc = connect_once(s, path, sock_uid, quiet_no_agent, &ps);
	if (rc == -3)
		rc = connect_once(s, path, sock_uid, quiet_no_agent, &ps);
	if (rc == -3) {
		fprintf(stderr, "xprobes: process %d closed the connection without answering\n",
			(int)pid);
		rc = -1;
	}
	return rc;
}

void session_close(struct session *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

int session_call(struct session *s, const char *line, char **text)
{
	char *buf;
	size_t len;

	*text = NULL;
	if (strlen(line) > XP_MAX_REQUEST) {
		if (asprintf(text, "xprobes: command too long: %zu bytes, at most %u\n", strlen(line),
			     XP_MAX_REQUEST) < 0)
			*text = NULL;
		return 1;
	}
	int sent = xp_send_frame(s->fd, line, strlen(line));
	int send_errno = errno;
	/* Even if the send failed, the agent may have said why it hung up (a
	 * refusal is written before the agent closes): read that first. */
	int rc = xp_recv_frame_within(s->fd, &buf, &len, XP_MAX_REPLY, s->timeout_ms);
	if (rc == -1 && errno == ETIMEDOUT) {
		fprintf(stderr,
			"xprobes: no reply from process %d within %d s (is it stopped, or is a module's\n"
			"  handler blocking? disable and unload wait for handlers to return); the\n"
			"  command may still complete.  --timeout SECS waits longer, 0 for ever\n",
			(int)s->pid, s->timeout_ms / 1000);
		return -1;
	}
	if (sent != 0 && rc != 0) {
		fprintf(stderr, "xprobes: lost connection to process %d: %s\n",
			(int)s->pid, strerror(send_errno));
		return -1;
	}
	if (rc != 0 || len < 1) {
		if (rc == 0)
			free(buf);
		fprintf(stderr, "xprobes: lost connection to process %d%s%s\n", (int)s->pid,
			rc == -1 && errno ? ": " : " (did it exit?)",
			rc == -1 && errno ? strerror(errno) : "");
		return -1;
	}
	int status = buf[0];
	memmove(buf, buf + 1, len); /* includes the NUL */
	*text = buf;
	return status == 0 ? 0 : 1;
}
