/* What /proc/PID/status says about a process (or thread), for the tool's
 * checks before attaching or injecting. */
#ifndef XP_PROC_STATUS_H
#define XP_PROC_STATUS_H

#include <sys/types.h>

struct proc_status {
	char state;      /* R, S, D, T (stopped), t (traced), Z... */
	pid_t tgid;      /* the process of a thread id */
	pid_t nspid;     /* the pid in its own namespace: its socket's name */
	uid_t uid[4];    /* real, effective, saved, filesystem */
	int threads;
	pid_t tracer;    /* TracerPid: a debugger or strace, or 0 */
	int seccomp;     /* 0 none, 1 strict, 2 filter (-1: not shown) */
	int seccomp_filters; /* how many filters are installed */
};

/* 0, or -1 if there is no such process (or thread). */
int proc_status_read(pid_t pid, struct proc_status *ps);

/* "by a signal" (T) or "by a debugger" (t) for a stopped state, else NULL. */
const char *proc_stopped_by(char state);

#endif
