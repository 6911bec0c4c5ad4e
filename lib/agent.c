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


#include "agent.h"

pthread_mutex_t agent_lock = PTHREAD_MUTEX_INITIALIZER;
static int agent_running;

static int agent_wanted(void)
{
	const char *e = getenv("XPROBES_AGENT");

	if (e && (strcmp(e, "off") == 0 || strcmp(e, "0") == 0 || strcmp(e, "no") == 0))
		return 0;
	return getauxval(AT_SECURE) == 0;
}

/* fork(): hold the agent's locks across it so the child never inherits a
 * half-done command or reader registry. */
static void before_fork(void)
{
	pthread_mutex_lock(&agent_lock);
	xp_readers_lock();
}

static void after_fork_parent(void)
{
	xp_readers_unlock();
	xp_control_unlock(0);
}

static void after_fork_child(void)
{
	xp_readers_after_fork_child();
	pthread_mutex_init(&agent_lock, NULL);
	/* The child keeps the parent's modules and attachments (they are in
	 * its memory) and gets its own control socket, under its own pid. */
	xp_control_after_fork_child();
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
