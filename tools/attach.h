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
 * next to this program first, if its program has memcached's probe sites
 * (so nothing is left in a process the tool cannot use).  0, or -1 after
 * a message. */
int attach_connect(struct session *s, pid_t pid, const char *prog);

/* `load --session PATH` (0, 1 or -1 as session_call, the reply in
 * *reply).  While an earlier session's copy of the module is still being
 * unloaded (the tool run again at once after Ctrl-C or kill -9, or a
 * handler that a thread has not left yet), it waits for it to go, up to
 * 10 s, saying so once on stderr under prog's name. */
int attach_load_session(struct session *s, const char *path, const char *prog, char **reply);

#endif
