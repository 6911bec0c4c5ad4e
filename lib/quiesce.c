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

/* The registry: a list that application threads only ever push onto, with
 * one compare-and-swap, so a thread's first hit never waits for a grace
 * period in progress.  Everything else (marking a node dead at thread exit
 * or when its object is unloaded, unlinking and freeing dead nodes, and
 * reading a node's reader during a grace period) happens under
 * registry_lock, which application threads take only when they exit. */
struct reader_node {
	struct xprobes_reader *reader; /* NULL once dead */
	const struct xprobes_site *site; /* which object it belongs to */
	pthread_t thread;
	struct reader_node *next;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reader_node *registry; /* pushed with CAS, pruned under the lock */
static pthread_key_t thread_exit_key;
static int membarrier_cmd = -1;

static void register_reader(struct xprobes_reader *r, struct xprobes_site *site);

struct xprobes_runtime xp_runtime = { 2, register_reader };

static int sys_membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

/* Mark dead the nodes `dead` selects.  Caller holds registry_lock.  Only
 * marks: a grace period may be sleeping with a pointer to any node. */
static void prune(int (*dead)(const struct reader_node *, const void *), const void *arg)
{
	struct reader_node *head = __atomic_load_n(&registry, __ATOMIC_ACQUIRE);
	for (struct reader_node *n = head; n; n = n->next)
		if (n->reader && dead(n, arg))
			n->reader = NULL;
}

/* Unlink and free dead nodes, except the head, which a concurrent push may
 * be linking to.  Only the grace period calls it, at its end, under the
 * lock: no other traversal can be holding a node then. */
static void sweep(void)
{
	struct reader_node *head = __atomic_load_n(&registry, __ATOMIC_ACQUIRE);
	for (struct reader_node *prev = head; prev && prev->next;) {
		struct reader_node *n = prev->next;
		if (n->reader) {
			prev = n;
			continue;
		}
		prev->next = n->next;
		free(n);
	}
}

static int of_thread(const struct reader_node *n, const void *arg)
{
	return pthread_equal(n->thread, *(const pthread_t *)arg);
}

static int not_of_thread(const struct reader_node *n, const void *arg)
{
	return !of_thread(n, arg);
}

struct range {
	uintptr_t lo, hi;
};

static int in_range(const struct reader_node *n, const void *arg)
{
	const struct range *r = arg;
	return (uintptr_t)n->site >= r->lo && (uintptr_t)n->site < r->hi;
}

static void unregister_thread(void *arg)
{
	(void)arg;
	/* The thread's TLS (its readers) is still valid here, and no grace
	 * period can read it once we hold the lock and mark it dead. */
	pthread_t self = pthread_self();
	pthread_mutex_lock(&registry_lock);
	prune(of_thread, &self);
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
	if (r->epoch != 0 || xp_quiesce_init() != 0)
		return; /* unregistered readers run no handler: the site skips */
	struct reader_node *n = malloc(sizeof(*n));
	if (!n)
		return; /* retried on the next hit */
	n->reader = r;
	n->site = site;
	n->thread = pthread_self();
	n->next = __atomic_load_n(&registry, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&registry, &n->next, n, 1, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
	/* Known to every later grace period (the CAS is a full barrier on
	 * x86-64 and a release elsewhere): only now may the site enter. */
	__atomic_store_n(&r->epoch, XPROBES_READER_IDLE, __ATOMIC_RELEASE);
	/* Any non-NULL value makes the destructor run at thread exit. */
	pthread_setspecific(thread_exit_key, r);
}

/* Wait for one reader to leave sections that began before epoch e.
 * Caller holds registry_lock, so the reader's thread cannot exit (and free
 * the reader) while we look at it. */
static void wait_for_reader(struct reader_node *n, unsigned long e)
{
	for (unsigned spins = 0; n->reader; spins++) {
		unsigned long seen = __atomic_load_n(&n->reader->epoch, __ATOMIC_ACQUIRE);
		if (seen == XPROBES_READER_IDLE || seen >= e)
			return;
		if (spins < 100) {
			sched_yield();
			continue;
		}
		/* A long handler (or a preempted thread): sleep without the lock,
		 * so that threads can exit meanwhile. */
		pthread_mutex_unlock(&registry_lock);
		struct timespec ts = { 0, 1000 * 1000 };
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&registry_lock);
		/* Nodes are freed only by sweep(), at the end of a grace period;
		 * a node that died meanwhile has reader == NULL. */
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
	/* Readers pushed after this load entered after the increment. */
	for (struct reader_node *n = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); n; n = n->next)
		wait_for_reader(n, e);
	sweep();
	pthread_mutex_unlock(&registry_lock);
}

void xp_readers_forget_object(uintptr_t lo, uintptr_t hi)
{
	struct range r = { lo, hi };
	pthread_mutex_lock(&registry_lock);
	prune(in_range, &r);
	pthread_mutex_unlock(&registry_lock);
}

void xp_readers_after_fork_child(void)
{
	/* Only the forking thread lives on; the others' readers are frozen
	 * copies and would stall every grace period. */
	pthread_t self = pthread_self();
	pthread_mutex_init(&registry_lock, NULL);
	prune(not_of_thread, &self);
}

void xp_readers_lock(void)
{
	pthread_mutex_lock(&registry_lock);
}

void xp_readers_unlock(void)
{
	pthread_mutex_unlock(&registry_lock);
}
