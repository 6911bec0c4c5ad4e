/* SPDX-License-Identifier: MIT */
/* Handler lists: built by the control thread, published with a release
 * store, read by application threads inside sites, and freed only after a
 * grace period (quiesce.c) has shown that no thread can still hold them.
 *
 * Publishing is a transaction (a plan): every list a change needs is
 * allocated first, and only when all of them exist are they published,
 * which cannot fail.  An allocation that fails therefore leaves every site
 * exactly as it was, so no caller ever believes a module's handlers are
 * gone while a site still calls them.
 *
 * Retired lists wait in a chain threaded through a hidden header of each
 * list (no allocation, so retiring cannot fail either), and are freed when
 * a grace period that began after their retirement ends.  Grace periods
 * are driven by the control thread (xp_sync_progress) without blocking:
 * callers that need one take a ticket and look again later.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

#include "probes.h"

/* A handler list with the agent's bookkeeping in front of it. */
struct list_box {
	struct list_box *next_retired;
	struct xprobes_handler_list list;
};

static struct list_box *retired;   /* unpublished, no grace period begun */
static struct list_box *in_grace;  /* freed when the grace in flight ends */
/* Grace periods are numbered from 1; a ticket is the number of the first
 * one that began after the ticket was taken. */
static unsigned long gp_started, gp_completed, gp_wanted;
static int gp_in_flight;

static struct list_box *box_of(struct xprobes_handler_list *l)
{
	return (struct list_box *)((char *)l - offsetof(struct list_box, list));
}

static void free_chain(struct list_box *b)
{
	while (b) {
		struct list_box *next = b->next_retired;
		free(b);
		b = next;
	}
}

unsigned long xp_sync_request(void)
{
	unsigned long ticket = gp_started + 1;
	if (gp_wanted < ticket)
		gp_wanted = ticket;
	return ticket;
}

int xp_sync_done(unsigned long ticket)
{
	return gp_completed >= ticket;
}

int xp_sync_progress(pid_t *waiting_tid)
{
	if (gp_in_flight) {
		if (!xp_grace_poll(waiting_tid))
			return 1;
		gp_in_flight = 0;
		gp_completed = gp_started;
		free_chain(in_grace);
		in_grace = NULL;
	}
	if (gp_wanted <= gp_started)
		return 0;
	gp_started++;
	in_grace = retired;
	retired = NULL;
	gp_in_flight = 1;
	xp_grace_start();
	/* Usually nobody is inside a handler: done at once. */
	return xp_sync_progress(waiting_tid);
}

void xp_synchronize(void)
{
	unsigned long ticket = xp_sync_request();
	for (unsigned spins = 0; !xp_sync_done(ticket); spins++) {
		if (!xp_sync_progress(NULL))
			continue;
		if (spins < 100)
			continue;
		struct timespec ts = { 0, 100 * 1000 };
		nanosleep(&ts, NULL);
	}
}

void xp_publish_after_fork_child(void)
{
	/* The parent's grace period ended with its other threads, unfinished:
	 * it is not complete here (the forking thread may itself be inside a
	 * handler).  Its lists go back to the retired ones, and the tickets
	 * that waited on it are answered by the next one, begun afresh. */
	if (gp_in_flight) {
		struct list_box **tail = &in_grace;
		while (*tail)
			tail = &(*tail)->next_retired;
		*tail = retired;
		retired = in_grace;
		in_grace = NULL;
		gp_in_flight = 0;
		gp_started--;
		xp_sync_request();
	}
}

void xp_retire_list(struct xprobes_handler_list *l)
{
	if (!l)
		return;
	struct list_box *b = box_of(l);
	b->next_retired = retired;
	retired = b;
	xp_sync_request();
}

/* s's list as it would be with module m's handlers on (m_on) or off, every
 * other module as it is (m NULL: every module as it is), and the tracer's
 * handler if s has one.  NULL for an empty list.  -ENOMEM on failure. */
static int build_list(const struct xp_site *s, const struct xp_module *m, int m_on,
		      struct xprobes_handler_list **out)
{
	size_t n = s->trace_fn != NULL;

	for (size_t i = 0; i < s->natts; i++)
		n += s->atts[i]->mod == m ? m_on : xp_module_runs(s->atts[i]->mod);
	*out = NULL;
	if (!n)
		return 0;
	struct list_box *b = xp_malloc(sizeof(*b) + n * sizeof(b->list.handlers[0]));
	if (!b)
		return -ENOMEM;
	struct xprobes_handler_list *l = &b->list;
	l->count = 0;
	if (s->trace_fn) { /* the tracer's, first: the hit is shown before handlers run */
		l->handlers[0].fn = s->trace_fn;
		l->handlers[0].owner = NULL;
		l->count = 1;
	}
	for (size_t i = 0; i < s->natts; i++) {
		struct xp_attach *a = s->atts[i];
		if (a->mod == m ? !m_on : !xp_module_runs(a->mod))
			continue;
		l->handlers[l->count].fn = a->probe->handler;
		l->handlers[l->count].owner = a;
		l->count++;
	}
	*out = l;
	return 0;
}

int xp_plan_site(struct xp_plan *p, struct xp_site *s, const struct xp_module *m, int m_on)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->steps[i].site == s)
			return 0; /* planned already */
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		void *grown = xp_realloc(p->steps, cap * sizeof(*p->steps));
		if (!grown)
			return -ENOMEM;
		p->steps = grown;
		p->cap = cap;
	}
	struct xp_plan_step *st = &p->steps[p->n];
	/* Pinned from now to the commit: the object cannot go between. */
	st->pin = xp_dl_pin(s->obj->dlname, s->obj->base);
	if (!st->pin)
		return 0; /* the object went away; the next rescan forgets it */
	int rc = build_list(s, m, m_on, &st->list);
	if (rc) {
		xp_dl_unpin(st->pin);
		return rc;
	}
	st->site = s;
	p->n++;
	return 0;
}

void xp_plan_abort(struct xp_plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		if (p->steps[i].list)
			free(box_of(p->steps[i].list));
		xp_dl_unpin(p->steps[i].pin);
	}
	free(p->steps);
	*p = (struct xp_plan){ 0 };
}

/* Publish one list.  Cannot fail. */
static void publish(struct xp_site *s, struct xprobes_handler_list *l)
{
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
	xp_retire_list(old);
}

void xp_plan_commit(struct xp_plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		publish(p->steps[i].site, p->steps[i].list);
		xp_dl_unpin(p->steps[i].pin);
	}
	free(p->steps);
	*p = (struct xp_plan){ 0 };
}

void xp_site_unpublish_gone(struct xp_site *s)
{
	/* The record and the gate were in the unloaded object and are not
	 * touched; the list lives in our heap. */
	xp_retire_list(s->published);
	s->published = NULL;
}
