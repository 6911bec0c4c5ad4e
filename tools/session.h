/* A connection from the xprobes tool to one process's agent. */
#ifndef XP_SESSION_H
#define XP_SESSION_H

#include <sys/types.h>

struct session {
	int fd;
	pid_t pid;
	int timeout_ms; /* for each reply; 0: the default, -1: none */
};

#define SESSION_DEFAULT_TIMEOUT_MS 30000

/* Connect to pid's agent.  On failure prints a message naming the problem
 * (no such process, permission denied...) and returns -1; returns -2 when
 * the process has no agent (the message is printed unless quiet_no_agent). */
int session_open(struct session *s, pid_t pid, int quiet_no_agent);
void session_close(struct session *s);

/* Send one command line; the reply text (malloc'd) in *text.  Returns
 * 0 (command succeeded), 1 (command failed) or -1 (connection lost; a
 * message was printed). */
int session_call(struct session *s, const char *line, char **text);

#endif
