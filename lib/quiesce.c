/* Grace periods: how `disable` and `unload` know that no thread can still
 * be running a handler from a list they replaced.
 *
 * The read side is inline in every site (include/xprobes/site.h), so it
 * costs no call: on entry a thread stores the current epoch into its
 * thread-local reader, loads the handler list, runs the handlers, and
 * stores IDLE (1; epochs are even).  This is liburcu's "memb" algorithm, with a 64-bit epoch that
 * never wraps instead of a phase bit.  liburcu itself cannot serve here:
 * its readers live in liburcu's own thread-local storage, which a
 * header-only site in another object can reach only through calls and
 * __tls_get_addr (measured ~29 ns a hit against a 5 ns budget).
 *
 * The grace period, on the agent's control thread:
 *   1. the new lists are already published (release stores);
 *   2. membarrier(PRIVATE_EXPEDITED): every running thread executes a full
 *      barrier, so a reader either has its epoch store visible to us, or
 *      loads the list after this point and sees the new one;
 *   3. E = ++epoch;
 *   4. wait until every registered reader's epoch is IDLE (outside) or >= E
 *      (it entered after step 3, so after step 1: it holds a new list).
 * A reader that read the epoch before step 3 but stored it after shows
 * E-1 < E and is waited for: no second phase is needed.  The final
 * `epoch = 0` is a release store, so the reader's uses of the old list
 * happen before we free it.  (`epoch = IDLE` is a release store.)
 *
 * Readers are registered on a thread's first attached hit per object, and
 * unregistered by a thread-exit destructor (its TLS is still valid then).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

struct reader_entry {
	struct xprobes_reader *reader;
	const struct xprobes_site *site; /* which object it belongs to */
	pthread_t thread;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reader_entry *readers;
static size_t nreaders, capreaders;
static pthread_key_t thread_exit_key;
static int membarrier_cmd = -1;

static void register_reader(struct xprobes_reader *r, struct xprobes_site *site);

struct xprobes_runtime xp_runtime = { 2, register_reader };

static int sys_membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

static void unregister_thread(void *arg)
{
	(void)arg;
	pthread_t self = pthread_self();
	pthread_mutex_lock(&registry_lock);
	size_t kept = 0;
	for (size_t i = 0; i < nreaders; i++)
		if (!pthread_equal(readers[i].thread, self))
			readers[kept++] = readers[i];
	nreaders = kept;
	pthread_mutex_unlock(&registry_lock);
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_status = -1;

static void init(void)
{
	if (pthread_key_create(&thread_exit_key, unregister_thread) != 0)
		return;
	int supported = sys_membarrier(MEMBARRIER_CMD_QUERY);
	if (supported < 0)
		return; /* no way to order readers without a fence per hit */
	if ((supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
	    sys_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0)
		membarrier_cmd = MEMBARRIER_CMD_PRIVATE_EXPEDITED;
	else if (supported & MEMBARRIER_CMD_GLOBAL)
		membarrier_cmd = MEMBARRIER_CMD_GLOBAL; /* slower, still correct */
	else
		return;
	init_status = 0;
}

int xp_quiesce_init(void)
{
	pthread_once(&init_once, init);
	return init_status;
}

static void register_reader(struct xprobes_reader *r, struct xprobes_site *site)
{
	if (xp_quiesce_init() != 0)
		return; /* never marked: sites keep asking, harmlessly */
	pthread_mutex_lock(&registry_lock);
	if (r->epoch == 0) {
		if (nreaders == capreaders) {
			size_t cap = capreaders ? capreaders * 2 : 64;
			void *p = realloc(readers, cap * sizeof(*readers));
			if (!p) {
				/* Unregistered readers are never waited for, and their
				 * sites run no handler: retry on the next hit. */
				pthread_mutex_unlock(&registry_lock);
				return;
			}
			readers = p;
			capreaders = cap;
		}
		readers[nreaders++] = (struct reader_entry){ r, site, pthread_self() };
		r->epoch = XPROBES_READER_IDLE;
		/* Any non-NULL value makes the destructor run at thread exit. */
		pthread_setspecific(thread_exit_key, r);
	}
	pthread_mutex_unlock(&registry_lock);
}

/* Wait for one reader to leave sections that began before epoch e. */
static void wait_for_reader(size_t *i, unsigned long e)
{
	for (unsigned spins = 0;; spins++) {
		unsigned long seen = __atomic_load_n(&readers[*i].reader->epoch, __ATOMIC_ACQUIRE);
		if (seen == XPROBES_READER_IDLE || seen >= e)
			return;
		if (spins < 100) {
			sched_yield();
			continue;
		}
		/* A long handler: sleep without the lock, so threads can still
		 * register and exit; then find our place again. */
		struct xprobes_reader *r = readers[*i].reader;
		pthread_mutex_unlock(&registry_lock);
		struct timespec ts = { 0, 1000 * 1000 };
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&registry_lock);
		size_t j;
		for (j = 0; j < nreaders && readers[j].reader != r; j++)
			;
		if (j == nreaders)
			return; /* the thread exited: it holds nothing */
		*i = j;
	}
}

void xp_grace_period(void)
{
	/* Without membarrier no reader is ever registered (and a site runs no
	 * handler for an unregistered reader): nothing to order then. */
	if (xp_quiesce_init() == 0 && sys_membarrier(membarrier_cmd) != 0) {
		/* Cannot happen once registered; if it does, fall back to the
		 * always-available, slower global barrier. */
		sys_membarrier(MEMBARRIER_CMD_GLOBAL);
	}
	/* Even steps: odd values are the readers' "idle". */
	unsigned long e = __atomic_add_fetch(&xp_runtime.epoch, 2, __ATOMIC_SEQ_CST);

	pthread_mutex_lock(&registry_lock);
	/* Readers that register from now on entered after the increment. */
	size_t n = nreaders;
	for (size_t i = 0; i < n && i < nreaders; i++)
		wait_for_reader(&i, e);
	pthread_mutex_unlock(&registry_lock);
}

void xp_readers_forget_object(uintptr_t lo, uintptr_t hi)
{
	pthread_mutex_lock(&registry_lock);
	size_t kept = 0;
	for (size_t i = 0; i < nreaders; i++) {
		uintptr_t a = (uintptr_t)readers[i].site;
		if (a < lo || a >= hi)
			readers[kept++] = readers[i];
	}
	nreaders = kept;
	pthread_mutex_unlock(&registry_lock);
}

void xp_readers_after_fork_child(void)
{
	/* Only the forking thread lives on; the others' readers are frozen
	 * copies and would stall every grace period. */
	pthread_t self = pthread_self();
	pthread_mutex_init(&registry_lock, NULL);
	size_t kept = 0;
	for (size_t i = 0; i < nreaders; i++)
		if (pthread_equal(readers[i].thread, self))
			readers[kept++] = readers[i];
	nreaders = kept;
}

void xp_readers_lock(void)
{
	pthread_mutex_lock(&registry_lock);
}

void xp_readers_unlock(void)
{
	pthread_mutex_unlock(&registry_lock);
}
