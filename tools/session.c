#define _GNU_SOURCE
#include "session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../lib/wire.h"

/* Effective uid of pid, from /proc; -1 if there is no such process. */
static int process_uid(pid_t pid, uid_t *uid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int found = -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned r, e;
		if (sscanf(line, "Uid: %u %u", &r, &e) == 2) {
			*uid = e;
			found = 0;
			break;
		}
	}
	fclose(f);
	return found;
}

static void no_agent(pid_t pid)
{
	fprintf(stderr,
		"xprobes: process %d has no XProbes agent.\n"
		"  Inject one with 'xprobes --inject %d', link the program with\n"
		"  -lxprobes, or start it with LD_PRELOAD=libxprobes.so.\n",
		(int)pid, (int)pid);
}

int session_open(struct session *s, pid_t pid, int quiet_no_agent)
{
	uid_t uid;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	s->fd = -1;
	s->pid = pid;
	if (process_uid(pid, &uid) != 0) {
		fprintf(stderr, "xprobes: no such process: %d\n", (int)pid);
		return -1;
	}
	if (geteuid() != 0 && geteuid() != uid) {
		fprintf(stderr,
			"xprobes: permission denied: process %d belongs to uid %u and you are uid %u;\n"
			"  only the process owner or root may attach\n",
			(int)pid, (unsigned)uid, (unsigned)geteuid());
		return -1;
	}
	if (xp_socket_path(sa.sun_path, sizeof(sa.sun_path), uid, pid)) {
		fprintf(stderr, "xprobes: socket path too long (XPROBES_RUNDIR?)\n");
		return -1;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		perror("xprobes: socket");
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;
		close(fd);
		if (e == ECONNREFUSED)
			unlink(sa.sun_path); /* left by an earlier process with this pid */
		if (e == ENOENT || e == ECONNREFUSED) {
			if (!quiet_no_agent)
				no_agent(pid);
			return -2;
		} else if (e == EACCES || e == EPERM)
			fprintf(stderr,
				"xprobes: permission denied connecting to %s: only the owner of process %d or root may attach\n",
				sa.sun_path, (int)pid);
		else
			fprintf(stderr, "xprobes: cannot connect to %s: %s\n", sa.sun_path,
				strerror(e));
		return -1;
	}
	s->fd = fd;
	/* The agent checks our credentials first: ask something harmless so
	 * a refusal is reported now, with the agent's own words. */
	char *text = NULL;
	int rc = session_call(s, "version", &text);
	if (rc != 0) {
		if (rc == 1)
			fprintf(stderr, "xprobes: %s", text ? text : "refused\n");
		free(text);
		session_close(s);
		return -1;
	}
	free(text);
	return 0;
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
		*text = strdup("command too long\n");
		return 1;
	}
	int sent = xp_send_frame(s->fd, line, strlen(line));
	int send_errno = errno;
	/* Even if the send failed, the agent may have said why it hung up (a
	 * refusal is written before the agent closes): read that first. */
	int rc = xp_recv_frame(s->fd, &buf, &len, XP_MAX_REPLY);
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
