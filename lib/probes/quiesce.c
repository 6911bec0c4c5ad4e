/* SPDX-License-Identifier: MIT */
/* Grace periods: how `disable` and `unload` know that no thread can still
 * be running a handler from a list they replaced.
 *
 * The read side is inline in every site (include/xprobes/site.h), so it
 * costs no call and writes no shared state: each thread has, per object, a
 * thread-local reader {seq, gp}.  Entering a site's handlers copies gp (the
 * number of the latest grace period, written by us) into seq; leaving
 * stores 0 (a release).  liburcu cannot serve here: its readers live in
 * liburcu's own thread-local storage, which a header-only site in another
 * object reaches only through calls and __tls_get_addr (measured ~29 ns a
 * hit, against a 5 ns budget).  The scheme is liburcu's "memb" idea with
 * the epoch kept per reader, so the site loads nothing shared, and copied
 * rather than incremented, so a thread's consecutive hits do not wait on
 * each other through store-to-load forwarding (measured ~1 ns a hit).
 *
 * The grace period G (odd, increasing), on the agent's control thread:
 *   1. the new lists are already published (release stores);
 *   2. membarrier(PRIVATE_EXPEDITED): every running thread executes a full
 *      barrier.  A reader has now either made its seq store visible to us,
 *      or it loads the list after this point and sees a new one;
 *   3. store G into every registered reader's gp (release, after 1);
 *   4. for every reader whose seq is neither 0 nor G, wait until it
 *      changes (xp_grace_poll: the control thread never blocks on a
 *      reader; it looks again on its next wake-up, and meanwhile serves
 *      other clients and can say which thread it is waiting for).  A reader showing G read gp after step 3, so (acquire) its
 *      list load comes after step 1: it holds a new list.  A reader showing
 *      an older number is in a section that may hold an old list; any
 *      change means that section ended, since leaving stores 0 and a new
 *      section soon shows G.  Waiting therefore ends once each such
 *      section ends, however often the thread hits sites meanwhile.
 * A reader seen at 0 is outside, or entered after step 2 and holds a new
 * list.  The 0 store is a release, so the reader's uses of the old list
 * happen before we free it.
 *
 * Readers are registered on a thread's first attached hit per object, and
 * marked dead by a thread-exit destructor (its TLS is still valid then).
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

#include "probes.h"

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
	pid_t tid;                       /* for "waiting for thread N" */
	unsigned long waiting_for;       /* the seq the grace in flight waits to see change, or 0 */
	struct reader_node *next;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reader_node *registry; /* pushed with CAS, pruned under the lock */
static pthread_key_t thread_exit_key;
static int membarrier_cmd = -1;
/* The latest grace period's number: odd, so never 0 (unregistered/outside).
 * Written under registry_lock; read without it by register_reader. */
static unsigned long gp_latest = 1;
static int grace_in_flight; /* under registry_lock */

static void register_reader(struct xprobes_reader *r, struct xprobes_site *site);
/* Past our thread-exit destructor: this thread registers no reader. */
static __thread int thread_exiting;

struct xprobes_runtime xp_runtime = { register_reader };

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
	/* A site hit later in this thread's exit (another library's key
	 * destructor) must not enter unseen by grace periods: gp 0 sends it to
	 * register_reader, which refuses an exiting thread, so the site runs
	 * no handler. */
	thread_exiting = 1;
	struct reader_node *head = __atomic_load_n(&registry, __ATOMIC_ACQUIRE);
	for (struct reader_node *n = head; n; n = n->next)
		if (n->reader && pthread_equal(n->thread, self))
			__atomic_store_n(&n->reader->gp, 0, __ATOMIC_RELEASE);
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
	if (__atomic_load_n(&r->gp, __ATOMIC_RELAXED) != 0 || thread_exiting ||
	    xp_quiesce_init() != 0)
		return; /* unregistered readers run no handler: the site skips */
	struct reader_node *n = malloc(sizeof(*n));
	if (!n)
		return; /* retried on the next hit */
	n->reader = r;
	n->site = site;
	n->thread = pthread_self();
	n->tid = gettid();
	n->waiting_for = 0;
	n->next = __atomic_load_n(&registry, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&registry, &n->next, n, 1, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
	/* Known to every later grace period (the CAS is a full barrier on
	 * x86-64 and a release elsewhere): only now may the site enter.  A
	 * grace period whose traversal missed the push began it before the
	 * push, so this thread's first section loads a new list whatever
	 * number it shows. */
	__atomic_store_n(&r->gp, __atomic_load_n(&gp_latest, __ATOMIC_RELAXED),
			 __ATOMIC_RELEASE);
	/* Any non-NULL value makes the destructor run at thread exit. */
	pthread_setspecific(thread_exit_key, r);
}

void xp_grace_start(void)
{
	/* Without membarrier no reader is ever registered (and a site runs no
	 * handler for an unregistered reader): nothing to order then. */
	if (xp_quiesce_init() == 0 && sys_membarrier(membarrier_cmd) != 0) {
		/* Cannot happen once registered; if it does, fall back to the
		 * always-available, slower global barrier. */
		sys_membarrier(MEMBARRIER_CMD_GLOBAL);
	}
	pthread_mutex_lock(&registry_lock);
	unsigned long gp = gp_latest + 2;
	__atomic_store_n(&gp_latest, gp, __ATOMIC_RELAXED);
	/* Readers pushed after this load registered after the barrier: their
	 * first section loads a new list. */
	struct reader_node *head = __atomic_load_n(&registry, __ATOMIC_ACQUIRE);
	for (struct reader_node *n = head; n; n = n->next)
		if (n->reader)
			__atomic_store_n(&n->reader->gp, gp, __ATOMIC_RELEASE);
	/* Who was inside when the new lists went out: each must be seen to
	 * leave (any change of seq) before the old lists may go. */
	for (struct reader_node *n = head; n; n = n->next) {
		unsigned long seq = n->reader ? __atomic_load_n(&n->reader->seq, __ATOMIC_ACQUIRE) : 0;
		n->waiting_for = seq == gp ? 0 : seq;
	}
	grace_in_flight = 1;
	pthread_mutex_unlock(&registry_lock);
}

int xp_grace_poll(pid_t *tid)
{
	int done = 1;

	pthread_mutex_lock(&registry_lock);
	struct reader_node *head = __atomic_load_n(&registry, __ATOMIC_ACQUIRE);
	for (struct reader_node *n = head; n; n = n->next) {
		if (!n->waiting_for)
			continue;
		/* Dead (thread exited, object unloaded), or left that section. */
		if (!n->reader ||
		    __atomic_load_n(&n->reader->seq, __ATOMIC_ACQUIRE) != n->waiting_for) {
			n->waiting_for = 0;
			continue;
		}
		if (done && tid)
			*tid = n->tid;
		done = 0;
	}
	if (done && grace_in_flight) {
		/* Nodes are freed only here, with no grace period holding one. */
		sweep();
		grace_in_flight = 0;
	}
	pthread_mutex_unlock(&registry_lock);
	return done;
}

void xp_grace_period(void)
{
	xp_grace_start();
	for (unsigned spins = 0; !xp_grace_poll(NULL); spins++) {
		if (spins < 100) {
			sched_yield();
			continue;
		}
		struct timespec ts = { 0, 100 * 1000 };
		nanosleep(&ts, NULL);
	}
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
	/* A grace period the parent had in flight is restarted by its owner
	 * (publish.c) in the child; its marks mean nothing here. */
	struct reader_node *head = __atomic_load_n(&registry, __ATOMIC_ACQUIRE);
	for (struct reader_node *n = head; n; n = n->next)
		n->waiting_for = 0;
	grace_in_flight = 0;
}

void xp_readers_lock(void)
{
	pthread_mutex_lock(&registry_lock);
}

void xp_readers_unlock(void)
{
	pthread_mutex_unlock(&registry_lock);
}
