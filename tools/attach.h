/* Attaching a tool to one running program by name, injecting the agent
 * when the program has none.  Messages start with the tool's name (prog). */
#ifndef XP_ATTACH_H
#define XP_ATTACH_H

#include <sys/types.h>

#include "session.h"

/* The one live process whose command name is name; -1 after a message
 * (none, or several: their pids are listed). */
pid_t attach_find_one(const char *name, const char *prog);

/* session_open(), and when pid has no agent, inject_agent() of the one
 * next to this program first.  0, or -1 after a message. */
int attach_connect(struct session *s, pid_t pid, const char *prog);

#endif
