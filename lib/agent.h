/* Internal interfaces of the in-process agent (libxprobes.so).
 *
 * Threading: everything below runs on the agent's control thread, under
 * agent_lock, except runtime enter/leave (application threads) and the
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

#define XP_VERSION "0.1.0"

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
	size_t nattached;
};

/* agent state (agent.c) */
extern pthread_mutex_t agent_lock;
extern struct xprobes_runtime xp_runtime;

/* sites.c: objects and their sites */
extern struct xp_object **xp_objects;
extern size_t xp_nobjects;
/* Re-read the loaded objects; attaches loaded modules to new sites and
 * forgets objects that were unloaded.  Cheap when nothing changed.  With
 * may_wait 0 (on an application thread) it never waits for a grace
 * period. */
void xp_rescan(struct textbuf *log, int may_wait);
/* 0 while such a rescan runs: retired lists then wait for a later grace
 * period rather than forcing one.  Under agent_lock. */
extern int xp_may_wait;
/* Keep obj mapped while the agent writes to it; returns a token for
 * xp_object_unpin, or NULL if the object is gone. */
void *xp_object_pin(struct xp_object *obj);
void xp_object_unpin(void *token);
int xp_site_matches(const struct xp_site *s, const char *glob);
int xp_object_matches(const struct xp_object *o, const char *glob);

/* modules.c */
extern struct xp_module **xp_modules;
extern size_t xp_nmodules;
int xp_module_load(const char *path, struct textbuf *out);
/* The part of load after dlopen: register desc (from handle dl, which may
 * be NULL for a module linked into the process) and attach its probes. */
int xp_module_register(const char *path, void *dl,
		       const struct xprobes_module_desc *desc, struct textbuf *out);
int xp_module_set_enabled(struct xp_module *m, int enabled);
void xp_module_unload(struct xp_module *m);
/* Attach every loaded module's probes to one new site. */
void xp_modules_attach_site(struct xp_site *s, struct textbuf *log);
/* Forget a site whose object is gone (no writes to its memory). */
void xp_site_forget(struct xp_site *s);
/* Find a module by path or basename; on failure writes why into out. */
struct xp_module *xp_module_find(const char *name, struct textbuf *out);

/* publish.c: handler lists and grace periods */
/* Rebuild and publish s's handler list from its enabled attachments. */
void xp_site_publish(struct xp_site *s);
/* Wait until no thread can still see an unpublished list, then free them. */
void xp_quiesce(void);
void xp_retire_list(struct xprobes_handler_list *l);

/* quiesce.c: readers and grace periods */
int xp_quiesce_init(void);
/* Return once no thread is in a section that began before the call. */
void xp_grace_period(void);
/* Drop readers registered from sites of an unloaded object [lo, hi). */
void xp_readers_forget_object(uintptr_t lo, uintptr_t hi);
void xp_readers_lock(void);
void xp_readers_unlock(void);
void xp_readers_after_fork_child(void);

/* commands.c */
/* What rescans had to say, kept for the next reply a user sees. */
extern struct textbuf xp_pending;
/* Set while the caller of xp_run_command holds agent_lock (the control
 * thread): a module's own command then runs with it released. */
extern int xp_commands_hold_lock;
/* Run one command line; the reply text goes to out.  Returns XP_OK/XP_ERR. */
int xp_run_command(const char *line, struct textbuf *out);

/* control.c */
int xp_control_start(void);
/* Called on an application thread after its dlopen() succeeded: rescan
 * now if that cannot block, else leave it to the agent lock's holder. */
void xp_control_after_dlopen(void);
/* Unlock agent_lock, then do any rescan a dlopen() left for its holder.
 * may_wait: the caller may wait for a grace period (not an app thread). */
void xp_control_unlock(int may_wait);

/* dlopen_hook.c: libc's dlopen(), bypassing the agent's own. */
void *xp_real_dlopen(const char *file, int mode);
/* In a fork()ed child: drop the parent's sockets; restart: serve again
 * under the child's pid. */
void xp_control_after_fork_child(int restart);
void xp_control_cleanup(void);

#endif
