/* SPDX-License-Identifier: MIT */
/* The agent's threads: detached, named, and started with every signal
 * blocked, so they inherit a full mask and the application's signals are
 * always delivered to the application's own threads. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include "base.h"

int xp_thread_start(void *(*fn)(void *), void *arg, const char *name)
{
	sigset_t all, old;
	pthread_t tid;

	if (xp_fault())
		return -EAGAIN;
	sigfillset(&all);
	/* Not the synchronous ones: blocked, a fault or an int3 (a
	 * debugger's breakpoint) in the thread would make the kernel kill the
	 * whole process instead of running the application's handler. */
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGFPE);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&tid, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return -rc;
	/* Created joinable, so tid stays valid however soon the thread ends:
	 * named (visible at once in /proc) and only then detached. */
	pthread_setname_np(tid, name);
	pthread_detach(tid);
	return 0;
}
