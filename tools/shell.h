#ifndef XP_SHELL_H
#define XP_SHELL_H

#include "session.h"

/* Run one command line (client-side commands included); prints the reply.
 * Returns 0 ok, 1 failed, -1 connection lost, 2 quit. */
int shell_run_line(struct session *s, const char *line);

/* Fold one shell_run_line result into an exit status; returns 0 when the
 * session should stop (quit, or the connection is gone). */
int shell_account(int rc, int *status);

/* Interactive loop with line editing, history and tab completion.
 * Returns the exit status. */
int shell_interactive(struct session *s);

#endif
