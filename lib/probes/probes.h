/* SPDX-License-Identifier: MIT */
/* The probe runtime: finding sites in loaded objects (sites.c), loading
 * and attaching modules (modules.c), publishing handler lists to sites
 * (publish.c), and the readers and grace periods that make a list safe
 * to free (quiesce.c).  Everything runs under xp_agent.lock on the agent's
 * control thread, but the read side (quiesce.c's readers), which runs on
 * application threads at sites.
 */
#ifndef XP_PROBES_H
#define XP_PROBES_H

#include "../state/state.h"

extern struct xprobes_runtime xp_runtime;

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
/* Forget a site whose object is gone (no writes to its memory). */
void xp_site_forget(struct xp_site *s);

/* modules.c.  Errors are 0 or a negative errno, with text in out/log. */
int xp_module_load(const char *path, struct textbuf *out);
/* The part of load after dlopen: register desc (from handle dl, which may
 * be NULL for a module linked into the process) and attach its probes.
 * Returns how many probe attachments were refused (the module is loaded
 * with the rest), or a negative errno: not loaded, and the caller still
 * owns dl (-EINVAL: every attachment was refused, none made).  xp_module_load returns the same. */
int xp_module_register(const char *path, void *dl,
		       const struct xprobes_module_desc *desc, struct textbuf *out);
/* 0, -EALREADY, -EBUSY (unloading) or -ENOMEM.  Disabling sets *ticket to
 * the grace period after which no handler of m runs. */
int xp_module_set_enabled(struct xp_module *m, int enabled, unsigned long *ticket);
/* Unload in two halves (see modules.c), and both at once, waiting. */
int xp_module_unload_begin(struct xp_module *m);
int xp_module_unload_ready(const struct xp_module *m);
void xp_module_unload_finish(struct xp_module *m);
/* What the tracer lends to modules (a struct xprobes_trace_api, written
 * into each module's XPROBES_TRACE_API_SYMBOL at load), and what to call
 * when a module is gone (lib/trace/trace_request.c registers both). */
void xp_modules_lend_trace(void *api, void (*unloaded)(void));
int xp_module_unload(struct xp_module *m);
/* Finish every unload that is ready; returns how many still wait. */
int xp_modules_reap(void);
/* Attach every live module's probes to new sites, all or nothing. */
int xp_modules_attach_sites(struct xp_site **sites, size_t ns, struct textbuf *log);
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

#endif
