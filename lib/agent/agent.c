/* SPDX-License-Identifier: MIT */
/* The agent's life cycle: start at load time (linked, LD_PRELOADed or
 * injected), stay out of the way, survive fork().
 *
 * XPROBES_AGENT=off, or a setuid/setgid process (AT_SECURE), means no
 * agent at all: no thread, no socket, nothing changed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>

#include "../control/control.h"

static int agent_running;

static int agent_wanted(void)
{
	const char *e = getenv("XPROBES_AGENT");

	if (e && (strcmp(e, "off") == 0 || strcmp(e, "0") == 0 || strcmp(e, "no") == 0))
		return 0;
	return getauxval(AT_SECURE) == 0;
}

/* fork(): hold the agent's locks across it so the child never inherits a
 * half-done command or reader registry.  But an application's fork() must
 * not wait on us for long: commands hold xp_agent.lock for microseconds,
 * except a disable or unload whose grace period waits for a handler that
 * is slow to return.  After FORK_WAIT_MS the fork goes ahead without the
 * lock, and that child starts no agent of its own (its state could be
 * half-changed); its sites keep calling the handlers they had. */
#define FORK_WAIT_MS 50
/* Per thread: two threads may fork at once. */
static __thread int fork_holds_lock;
/* Set in a child forked without the lock: its copy of the agent's state
 * may be half-changed, so neither it nor any of its descendants (a
 * daemon()'s second fork) ever starts an agent on it. */
static int agent_abandoned;

static void before_fork(void)
{
	if (agent_abandoned) {
		fork_holds_lock = 0;
		xp_readers_lock();
		return;
	}
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += FORK_WAIT_MS * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	fork_holds_lock = pthread_mutex_timedlock(&xp_agent.lock, &until) == 0;
	xp_readers_lock();
}

static void after_fork_parent(void)
{
	xp_readers_unlock();
	if (fork_holds_lock)
		xp_control_unlock();
}

static void after_fork_child(void)
{
	/* The tracer first: until it has, a traced call in the child would
	 * write into a ring it may share with its parent (following). */
	xp_trace_record_after_fork_child();
	xp_readers_after_fork_child();
	if (!fork_holds_lock)
		agent_abandoned = 1;
	else
		xp_publish_after_fork_child(); /* consistent: we held the lock */
	pthread_mutex_init(&xp_agent.lock, NULL);
	/* The child keeps the parent's modules and attachments (they are in
	 * its memory) and gets its own control socket, under its own pid;
	 * its sites keep calling the handlers they had either way. */
	xp_control_after_fork_child(fork_holds_lock);
}

__attribute__((constructor)) static void agent_init(void)
{
	if (!agent_wanted())
		return;
	if (xp_quiesce_init() != 0)
		return; /* no membarrier: we could not make unload safe */
	if (xp_control_start() != 0)
		return; /* no socket, no agent: the process runs as without us */
	agent_running = 1;
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

__attribute__((destructor)) static void agent_fini(void)
{
	if (agent_running)
		xp_control_cleanup();
}
