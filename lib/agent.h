/* Internal interfaces of the in-process agent (libxprobes.so).
 *
 * Threading: everything below runs on the agent's control thread, under
 * xp_agent.lock, except runtime enter/leave (application threads) and the
 * fork handlers.  Application threads only ever read what the control
 * thread publishes through RCU.
 */
#ifndef XP_AGENT_H
#define XP_AGENT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <xprobes/probe.h>
#include <xprobes/site.h>

#include "textbuf.h"


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
	/* While tracing (lib/trace_sitehits.c): a handler that records this
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

/* A change to several sites' handler lists, prepared in full before any of
 * it is published (publish.c). */
struct xp_plan_step {
	struct xp_site *site;
	struct xprobes_handler_list *list;
	void *pin;
};
struct xp_plan {
	struct xp_plan_step *steps;
	size_t n, cap;
};

/* The agent's state, in one hidden struct (defined in agent.c).  Every
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
extern struct xprobes_runtime xp_runtime;

/* sites.c: objects and their sites */
/* Re-read the loaded objects: forget those unloaded (their lists retired),
 * add new ones.  Fills *added with the new objects (the caller attaches
 * modules to them; free the array).  Cheap when nothing changed.  Never
 * waits.  Returns 0 or -ENOMEM (then nothing new was added; what the
 * loader reported gone is forgotten all the same). */
int xp_objects_refresh(struct xp_object ***added, size_t *nadded, struct textbuf *log);
/* The loader's counts of objects loaded and unloaded (dlpi_adds/subs):
 * unchanged counts mean an unchanged object list. */
void xp_loader_counts(unsigned long long counts[2]);
int xp_site_matches(const struct xp_site *s, const char *glob);
int xp_object_matches(const struct xp_object *o, const char *glob);

/* agent.c: rescan = refresh + attach what is new; reports into log. */
void xp_rescan(struct textbuf *log);

/* modules.c.  Errors are 0 or a negative errno, with text in out/log. */
int xp_module_load(const char *path, struct textbuf *out);
/* The part of load after dlopen: register desc (from handle dl, which may
 * be NULL for a module linked into the process) and attach its probes.
 * Returns how many probe attachments were refused (the module is loaded
 * with the rest), or a negative errno: not loaded, and the caller still
 * owns dl.  xp_module_load returns the same. */
int xp_module_register(const char *path, void *dl,
		       const struct xprobes_module_desc *desc, struct textbuf *out);
/* 0, -EALREADY, -EBUSY (unloading) or -ENOMEM.  Disabling sets *ticket to
 * the grace period after which no handler of m runs. */
int xp_module_set_enabled(struct xp_module *m, int enabled, unsigned long *ticket);
/* Unload in two halves (see modules.c), and both at once, waiting. */
int xp_module_unload_begin(struct xp_module *m);
int xp_module_unload_ready(const struct xp_module *m);
void xp_module_unload_finish(struct xp_module *m);
int xp_module_unload(struct xp_module *m);
/* Finish every unload that is ready; returns how many still wait. */
int xp_modules_reap(void);
/* Attach every live module's probes to new sites, all or nothing. */
int xp_modules_attach_sites(struct xp_site **sites, size_t ns, struct textbuf *log);
/* Forget a site whose object is gone (no writes to its memory). */
void xp_site_forget(struct xp_site *s);
/* Find a module by path or basename; on failure writes why into out. */
struct xp_module *xp_module_find(const char *name, struct textbuf *out);

/* publish.c: handler lists, plans and grace periods */
/* Stage s's list with module m's handlers on or off (m NULL: every module
 * as it is).  0 or -ENOMEM; nothing is visible before the commit. */
int xp_plan_site(struct xp_plan *p, struct xp_site *s, const struct xp_module *m, int m_on);
void xp_plan_commit(struct xp_plan *p); /* cannot fail */
void xp_plan_abort(struct xp_plan *p);
void xp_site_unpublish_gone(struct xp_site *s);
void xp_retire_list(struct xprobes_handler_list *l);
/* A ticket for the first grace period that begins after now. */
unsigned long xp_sync_request(void);
int xp_sync_done(unsigned long ticket);
/* Drive grace periods without blocking: 1 while one is in flight (*tid:
 * a thread still inside a handler), 0 when idle. */
int xp_sync_progress(pid_t *waiting_tid);
/* Wait for a grace period (tests, and callers without a control thread). */
void xp_synchronize(void);
void xp_publish_after_fork_child(void);

/* quiesce.c: readers and grace periods */
int xp_quiesce_init(void);
void xp_grace_start(void);
/* 1 once every reader inside at the start has left; else 0, *tid one that
 * has not. */
int xp_grace_poll(pid_t *tid);
/* Start and wait (blocking). */
void xp_grace_period(void);
/* Drop readers registered from sites of an unloaded object [lo, hi). */
void xp_readers_forget_object(uintptr_t lo, uintptr_t hi);
void xp_readers_lock(void);
void xp_readers_unlock(void);
void xp_readers_after_fork_child(void);

/* commands.c */
/* A command's status: XP_OK or XP_ERR (wire.h), or XP_WAIT: it finishes
 * later (a grace period, a module command's thread). */
#define XP_WAIT 2
struct xp_wait;
/* Run one command line under xp_agent.lock; the reply goes to out, or *w is
 * set and XP_WAIT returned. */
int xp_command_start(const char *line, struct textbuf *out, struct xp_wait **w);
/* XP_WAIT while it still waits; else its status, the reply in out, w freed. */
int xp_command_poll(struct xp_wait *w, struct textbuf *out);
/* CLOCK_MONOTONIC ms after which the client is told what is awaited. */
long long xp_command_deadline(const struct xp_wait *w);
/* Stop waiting (deadline, or the client left): the operation goes on in
 * the background; out (if any) says what it waits for.  Frees w. */
int xp_command_abandon(struct xp_wait *w, struct textbuf *out);
/* Control session id ended: start unloading the modules it loaded with
 * `load --session` (finished in the background, as an abandoned unload).
 * A module whose unload could not start (out of memory) is owned by
 * XP_SESSION_ENDED, which the control thread ends again on every pass
 * until it goes: never left attached with nobody to read it. */
#define XP_SESSION_ENDED (~0ul)
void xp_session_end(unsigned long id);
/* Start queued module commands, free finished abandoned ones; 1 while any
 * exists. */
int xp_jobs_progress(void);
/* In a fork()ed child: the parent's command threads are gone. */
void xp_jobs_after_fork_child(void);
/* start + poll until done: for callers without a control loop. */
int xp_run_command(const char *line, struct textbuf *out);

/* control.c */
int xp_control_start(void);
/* Called on an application thread after its dlopen() succeeded: rescan
 * now if that cannot block, else leave it to the agent lock's holder. */
void xp_control_after_dlopen(void);
/* Unlock xp_agent.lock, then do any rescan a dlopen() left for its holder. */
void xp_control_unlock(void);

/* thread.c: a detached, named agent thread with every signal blocked.
 * 0 or a negative errno. */
int xp_thread_start(void *(*fn)(void *), void *arg, const char *name);

/* loader.c (the leaf): libc's dlopen(), bypassing the agent's own, and
 * pinning.  Keep obj mapped while the agent writes to it; returns a token
 * for xp_object_unpin, or NULL if the object is gone. */
void *(*xp_libc_dlopen(void))(const char *, int);
void *xp_real_dlopen(const char *file, int mode);
void *xp_object_pin(struct xp_object *obj);
void xp_object_unpin(void *token);
/* In a fork()ed child: drop the parent's sockets; restart: serve again
 * under the child's pid.  0, or -1 when the child got no agent (nothing
 * of it left behind). */
int xp_control_after_fork_child(int restart);
void xp_control_cleanup(void);

#endif
