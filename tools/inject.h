/* Loading the agent into a running process that never linked libxprobes. */
#ifndef XP_INJECT_H
#define XP_INJECT_H

#include <sys/types.h>

/* Make pid dlopen() agent_path on a fresh thread of its own.  Prints what
 * went wrong (ptrace refused, static binary, still in its loader, dlopen
 * error) and returns -1; 0 once the library is loaded. */
int inject_agent(pid_t pid, const char *agent_path);

/* The agent next to this xprobes binary (build tree or PREFIX/lib);
 * malloc'd, or NULL. */
char *inject_default_agent(void);

#endif
