/* Handler lists: built by the control thread, published with a release
 * store, read by application threads inside sites, and freed only after a
 * grace period (quiesce.c) has shown that no thread can still hold them.
 */
#include <stdlib.h>

#include "agent.h"

int xp_may_wait = 1;
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
			/* Cannot remember it: waiting now is always safe, and
			 * leaking it the only choice when we must not wait. */
			if (xp_may_wait) {
				xp_grace_period();
				free(l);
			}
			return;
		}
		retired = p;
		capretired = cap;
	}
	retired[nretired++] = l;
	/* Loads and enables defer their frees; bound what waits. */
	if (nretired >= 4096 && xp_may_wait)
		xp_quiesce();
}

void xp_quiesce(void)
{
	xp_grace_period();
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
