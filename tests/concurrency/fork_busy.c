/* SPDX-License-Identifier: MIT */
/* Concurrency test (TSan in `make tsan`): an application's fork() never
 * waits long for the agent.  While another thread holds xp_agent.lock (as a
 * disable or unload does while its grace period waits for a slow
 * handler), fork() goes ahead after a bounded wait, and that child starts
 * no agent of its own.  With the lock free, the child gets its own agent
 * (its socket exists as soon as fork() returns in it).  A hang here is
 * the failure: alarm() turns it into one. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control/control.h"
#include "base/base.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int held, release_it;

static void *hold_agent_lock(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&xp_agent.lock);
	pthread_mutex_lock(&m);
	held = 1;
	pthread_cond_broadcast(&c);
	while (!release_it)
		pthread_cond_wait(&c, &m);
	pthread_mutex_unlock(&m);
	pthread_mutex_unlock(&xp_agent.lock);
	return NULL;
}

/* Fork; the child exits 0 if it has an agent socket exactly when
 * want_agent says so.  Returns the child's exit status. */
static int fork_and_check(int want_agent)
{
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		char path[256];
		if (xp_socket_path(path, sizeof(path), geteuid(), getpid()) != 0)
			_exit(3);
		int has = access(path, F_OK) == 0;
		_exit(has == want_agent ? 0 : 2);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

int main(void)
{
	alarm(60);
	char path[256];
	if (xp_socket_path(path, sizeof(path), geteuid(), getpid()) != 0 || access(path, F_OK) != 0) {
		fprintf(stderr, "fork_busy: the agent did not start (XPROBES_AGENT=off?)\n");
		return 1;
	}
	if (fork_and_check(1) != 0) {
		fprintf(stderr, "fork_busy: a child forked while the agent was idle has no agent\n");
		return 1;
	}

	pthread_t t;
	pthread_create(&t, NULL, hold_agent_lock, NULL);
	pthread_mutex_lock(&m);
	while (!held)
		pthread_cond_wait(&c, &m);
	pthread_mutex_unlock(&m);
	int rc = fork_and_check(0);
	pthread_mutex_lock(&m);
	release_it = 1;
	pthread_cond_broadcast(&c);
	pthread_mutex_unlock(&m);
	pthread_join(t, NULL);
	if (rc != 0) {
		fprintf(stderr, "fork_busy: a child forked during a long command started an agent (%d)\n",
			rc);
		return 1;
	}

	/* The lock was given back: forks are normal again. */
	if (fork_and_check(1) != 0) {
		fprintf(stderr, "fork_busy: the agent did not recover after a busy fork\n");
		return 1;
	}
	printf("fork_busy: ok\n");
	return 0;
}
