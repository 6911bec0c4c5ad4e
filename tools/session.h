/* A connection from the xprobes tool to one process's agent. */
#ifndef XP_SESSION_H
#define XP_SESSION_H

#include <sys/types.h>

struct session {
	int fd;
	pid_t pid;
};

/* Connect to pid's agent.  On failure prints a message naming the problem
 * (no such process, no agent, permission denied...) and returns -1. */
int session_open(struct session *s, pid_t pid);
void session_close(struct session *s);

/* Send one command line; the reply text (malloc'd) in *text.  Returns
 * 0 (command succeeded), 1 (command failed) or -1 (connection lost; a
 * message was printed). */
int session_call(struct session *s, const char *line, char **text);

#endif
