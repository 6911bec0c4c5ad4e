/* SPDX-License-Identifier: MIT */
/* The agent's state: its objects, sites and modules, and the lock that
 * guards them.  Its own layer, low down, so that every layer above can
 * reach the state without reaching the code that starts the agent.
 *
 * Threading: everything here is read and written on the agent's control
 * thread, under xp_agent.lock, except runtime enter/leave (application
 * threads) and the fork handlers.  Application threads only ever read
 * what the control thread publishes through RCU (lib/probes/publish.c).
 */
#ifndef XP_STATE_H
#define XP_STATE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <xprobes/probe.h>
#include <xprobes/site.h>

#include "../base/base.h"

struct xp_module;
struct xp_object;

/* One probe of one module attached to one site. */
struct xp_attach {
	struct xp_module *mod;
	const struct xprobes_probe_desc *probe;
	struct xp_site *site;
};

/* The agent's view of one site record in a loaded object. */
struct xp_site {
	struct xprobes_site *rec;
	struct xp_object *obj;
	char *provider, *name; /* copies: the object may vanish under us */
	char *types;           /* canonical, without parentheses */
	char *fullname;        /* "provider:name" or "name" */
	struct xp_attach **atts; /* in module load order */
	size_t natts;
	int counted_in_gate;     /* we hold one gate->attached reference */
	struct xprobes_handler_list *published; /* what rec->handlers holds */
	/* While tracing (lib/trace/trace_sitehits.c): a handler that records this
	 * site's hits in the function graph, first in the list; NULL when not.
	 * trace_thunk is that handler, made once and kept. */
	void (*trace_fn)(void);
	void *trace_thunk;
};

struct xp_object {
	char *path;    /* shown to users */
	char *dlname;  /* dlpi_name; "" for the main program */
	uintptr_t base;
	uintptr_t lo, hi; /* address range of its loaded segments */
	int seen;      /* rescan mark */
	struct xp_site **sites;
	size_t nsites;
};

struct xp_module {
	unsigned id; /* load order */
	char *path;
	const char *name; /* basename, points into path */
	void *dl;
	const struct xprobes_module_desc *desc;
	int enabled;
	int unloading;              /* off every list; unmapped once quiescent */
	unsigned long unload_ticket; /* the grace period unload waits for */
	int commands;               /* module commands running or queued */
	size_t nattached;
	unsigned long owner;        /* load --session: unloaded when it ends; 0: none;
				     * XP_SESSION_ENDED: it ended, the unload is retried */
};

/* Do m's handlers belong in the lists now? */
static inline int xp_module_runs(const struct xp_module *m)
{
	return m->enabled && !m->unloading;
}

/* The agent's state, in one hidden struct (defined in state.c).  Every
 * field is read and written under lock, which only the control thread
 * (control.c), an application thread's rescan after dlopen() (control.c,
 * never waiting) and the fork handlers (agent.c) take. */
struct xp_state {
	pthread_mutex_t lock;
	struct xp_object **objects; /* loaded objects that have sites */
	size_t nobjects;
	struct xp_module **modules; /* in load order */
	size_t nmodules;
	struct textbuf pending;     /* what rescans said, for the next reply */
	unsigned long session;      /* the control session whose request runs, 0: none */
};
extern struct xp_state xp_agent;

#endif
