/* The agent's threads: detached, named, and started with every signal
 * blocked, so they inherit a full mask and the application's signals are
 * always delivered to the application's own threads. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include "agent.h"
#include "alloc.h"

int xp_thread_start(void *(*fn)(void *), void *arg, const char *name)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t tid;

	if (xp_fault())
		return -EAGAIN;
	if (pthread_attr_init(&attr) != 0)
		return -ENOMEM;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&tid, &attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0)
		return -rc;
	pthread_setname_np(tid, name);
	return 0;
}
