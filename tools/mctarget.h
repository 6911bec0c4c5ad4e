/* What the memcached tools (mctop, mcsnoop) do before talking to their
 * module: find the one memcached, connect to its agent (injecting one if
 * it has none), find the module shipped beside the tool. */
#ifndef XP_MCTARGET_H
#define XP_MCTARGET_H

#include <sys/types.h>

#include "session.h"

/* The one running process whose comm is memcached; 0 after a message
 * (none, or several: their pids listed) prefixed with prog. */
pid_t mctarget_find(const char *prog);

/* session_open, injecting the agent next to the tool first if pid has
 * none.  0, or -1 after a message. */
int mctarget_connect(struct session *s, pid_t pid, const char *prog);

/* The module NAME beside the tool: DIR/modules/NAME in a build tree,
 * DIR/../lib/xprobes/modules/NAME when installed; malloc'd, or NULL. */
char *mctarget_module(const char *name);

#endif
