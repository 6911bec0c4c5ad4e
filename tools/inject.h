/* Loading the agent into a running process that never linked libxprobes. */
#ifndef XP_INJECT_H
#define XP_INJECT_H

#include <sys/types.h>

/* inject_agent flags */
enum {
	/* Inject even into a process under seccomp (strict or filter mode),
	 * whose filter could kill it for a system call of the injected code. */
	INJECT_IGNORE_SECCOMP = 1,
};

/* Make pid dlopen() agent_path on a fresh thread of its own.  Prints what
 * went wrong (ptrace refused, static binary, seccomp, still in its loader,
 * dlopen error) and returns -1; 0 once the library is loaded.  Either way
 * nothing of the injector stays mapped in pid. */
int inject_agent(pid_t pid, const char *agent_path, unsigned flags);

/* The agent next to this xprobes binary (build tree or PREFIX/lib);
 * malloc'd, or NULL. */
char *inject_default_agent(void);

#endif
