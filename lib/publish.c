/* Handler lists: built by the control thread, published with RCU, read by
 * application threads inside sites.
 *
 * We use liburcu's "bulletproof" flavour (urcu-bp): application threads are
 * not ours to register, and urcu-bp registers a thread lazily on its first
 * read-side section.  Its read side is a per-thread counter update and,
 * with sys_membarrier, only a compiler barrier: no shared cache line is
 * written by a site.  The grace period (xp_quiesce) is what makes `disable`
 * and `unload` safe: once it returns, no thread is still running a handler
 * from a list that was replaced before it started.
 */
#define _LGPL_SOURCE
#include <urcu-bp.h>

#include <stdlib.h>

#include "agent.h"

/* ThreadSanitizer cannot see inside liburcu's grace period: tell it that
 * every read-side section ends before the grace period that follows it. */
#if defined(__SANITIZE_THREAD__)
#define XP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define XP_TSAN 1
#endif
#endif
#ifdef XP_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
static char grace_period;
#define tsan_reader_done() __tsan_release(&grace_period)
#define tsan_grace_over() __tsan_acquire(&grace_period)
#else
#define tsan_reader_done() ((void)0)
#define tsan_grace_over() ((void)0)
#endif

/* Pointers are published and read with C11-style atomics (release /
 * acquire: plain moves on x86-64); liburcu provides the grace period. */
static const struct xprobes_handler_list *rt_enter(struct xprobes_site *site)
{
	urcu_bp_read_lock();
	return __atomic_load_n(&site->handlers, __ATOMIC_ACQUIRE);
}

static void rt_leave(void)
{
	tsan_reader_done();
	urcu_bp_read_unlock();
}

const struct xprobes_runtime xp_runtime = { rt_enter, rt_leave };

static struct xprobes_handler_list **retired;
static size_t nretired, capretired;

void xp_retire_list(struct xprobes_handler_list *l)
{
	if (!l)
		return;
	if (nretired == capretired) {
		size_t cap = capretired ? capretired * 2 : 64;
		void *p = realloc(retired, cap * sizeof(*retired));
		if (!p) {
			/* Cannot remember it: waiting now is always safe. */
			urcu_bp_synchronize_rcu();
			tsan_grace_over();
			free(l);
			return;
		}
		retired = p;
		capretired = cap;
	}
	retired[nretired++] = l;
}

void xp_quiesce(void)
{
	urcu_bp_synchronize_rcu();
	tsan_grace_over();
	for (size_t i = 0; i < nretired; i++)
		free(retired[i]);
	nretired = 0;
}

void xp_site_publish(struct xp_site *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->natts; i++)
		if (s->atts[i]->mod->enabled)
			n++;

	struct xprobes_handler_list *l = NULL;
	if (n) {
		l = malloc(sizeof(*l) + n * sizeof(l->handlers[0]));
		if (!l)
			return; /* keep the old list: stale but safe */
		l->count = 0;
		for (size_t i = 0; i < s->natts; i++) {
			struct xp_attach *a = s->atts[i];
			if (!a->mod->enabled)
				continue;
			l->handlers[l->count].fn = a->probe->handler;
			l->handlers[l->count].owner = a;
			l->count++;
		}
	}

	void *pin = xp_object_pin(s->obj);
	if (!pin) {
		free(l);
		return; /* the object went away; rescan will forget it */
	}
	struct xprobes_site *rec = s->rec;
	/* The runtime first, so a site that sees the gate open finds it. */
	__atomic_store_n(&rec->runtime, &xp_runtime, __ATOMIC_RELEASE);
	struct xprobes_handler_list *old = s->published;
	__atomic_store_n(&rec->handlers, l, __ATOMIC_RELEASE);
	s->published = l;
	if (l && !s->counted_in_gate) {
		__atomic_fetch_add(&rec->gate->attached, 1, __ATOMIC_RELEASE);
		s->counted_in_gate = 1;
	} else if (!l && s->counted_in_gate) {
		__atomic_fetch_sub(&rec->gate->attached, 1, __ATOMIC_RELEASE);
		s->counted_in_gate = 0;
	}
	xp_object_unpin(pin);
	xp_retire_list(old);
}
