/* SPDX-License-Identifier: MIT */
/* Probe modules: loading, attaching their probes to sites, enabling,
 * disabling and unloading.
 *
 * Every change is all or nothing: the attachments and handler lists it
 * needs are allocated first (a plan, publish.c), and only then made
 * visible.  A failure on the way undoes what was prepared and leaves every
 * site and module as it was.
 *
 * Unload has two halves.  unload_begin takes the module's handlers out of
 * every list (the module stops running at once) and takes a ticket for a
 * grace period; unload_finish, once that grace period has ended and no
 * command of the module is running, frees its attachments and unmaps it.
 * No thread can be inside its code then.  No timer anywhere.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "probes.h"

static unsigned next_module_id = 1;

/* Every site of every object, in order: fn(site, arg). */
#define FOR_EACH_SITE(s)                                                      \
	for (size_t _o = 0; _o < xp_agent.nobjects; _o++)                           \
		for (size_t _j = 0; _j < xp_agent.objects[_o]->nsites &&            \
				    ((s) = xp_agent.objects[_o]->sites[_j], 1);         \
		     _j++)

static int has_attachment_of(const struct xp_site *s, const struct xp_module *m)
{
	for (size_t k = 0; k < s->natts; k++)
		if (s->atts[k]->mod == m)
			return 1;
	return 0;
}

/* Take m's attachments off s (they are no longer in any published list). */
static void detach_from_site(struct xp_site *s, struct xp_module *m)
{
	size_t kept = 0;
	for (size_t k = 0; k < s->natts; k++) {
		if (s->atts[k]->mod == m) {
			free(s->atts[k]);
			m->nattached--;
		} else {
			s->atts[kept++] = s->atts[k];
		}
	}
	s->natts = kept;
}

/* Insert a into s->atts in module load order.  Room was made beforehand. */
static void insert_attachment(struct xp_site *s, struct xp_attach *a)
{
	size_t at = s->natts;
	while (at > 0 && s->atts[at - 1]->mod->id > a->mod->id)
		at--;
	memmove(&s->atts[at + 1], &s->atts[at], (s->natts - at) * sizeof(*s->atts));
	s->atts[at] = a;
	s->natts++;
	a->mod->nattached++;
}

/* Does p attach to s?  0 yes, 1 not its glob, -EINVAL types differ (said
 * in log), -ENOMEM. */
static int probe_fits(const struct xprobes_probe_desc *p, const struct xp_site *s,
		      struct textbuf *log)
{
	if (!xp_site_matches(s, p->glob))
		return 1;
	char *want = sig_canonical_dup(p->types);
	if (!want)
		return -ENOMEM;
	int same = strcmp(want, s->types) == 0;
	if (!same && log)
		tb_printf(log, "refused: %s -> %s on %s in %s: site has (%s), probe declares (%s)\n",
			  p->glob, p->handler_name, s->fullname, s->obj->path, s->types, want);
	free(want);
	return same ? 0 : -EINVAL;
}

/* Attach the probes of mods[0..nm) to sites[0..ns), all or nothing: on
 * -ENOMEM nothing was attached or published.  Counts what attached and
 * what was refused (type mismatches). */
static int attach(struct xp_module **mods, size_t nm, struct xp_site **sites, size_t ns,
		  struct textbuf *log, int *attached, int *refused)
{
	struct xp_plan plan = { 0 };
	struct xp_attach **made = NULL;
	size_t nmade = 0, capmade = 0;
	int rc = 0;

	*attached = *refused = 0;
	for (size_t i = 0; i < ns && !rc; i++) {
		struct xp_site *s = sites[i];
		size_t before = nmade;
		for (size_t j = 0; j < nm && !rc; j++) {
			const struct xprobes_module_desc *d = mods[j]->desc;
			for (unsigned k = 0; k < d->nprobes && !rc; k++) {
				int fit = probe_fits(&d->probes[k], s, log);
				if (fit == -EINVAL)
					(*refused)++;
				if (fit == -ENOMEM)
					rc = fit;
				if (fit)
					continue;
				if (nmade == capmade) {
					size_t cap = capmade ? capmade * 2 : 16;
					void *g = xp_realloc(made, cap * sizeof(*made));
					if (!g) {
						rc = -ENOMEM;
						break;
					}
					made = g;
					capmade = cap;
				}
				struct xp_attach *a = xp_malloc(sizeof(*a));
				if (!a) {
					rc = -ENOMEM;
					break;
				}
				*a = (struct xp_attach){ mods[j], &d->probes[k], s };
				made[nmade++] = a;
			}
		}
		if (rc || nmade == before)
			continue;
		/* Room for the new attachments; a larger array is harmless if
		 * we give up later. */
		void *g = xp_realloc(s->atts, (s->natts + nmade - before) * sizeof(*s->atts));
		if (!g) {
			rc = -ENOMEM;
			break;
		}
		s->atts = g;
		for (size_t k = before; k < nmade; k++)
			insert_attachment(s, made[k]);
		rc = xp_plan_site(&plan, s, NULL, 0);
	}
	if (rc) {
		/* Undo: the inserted attachments were never published. */
		for (size_t k = 0; k < nmade; k++) {
			struct xp_site *s = made[k]->site;
			struct xp_module *m = made[k]->mod;
			size_t kept = 0;
			for (size_t a = 0; a < s->natts; a++)
				if (s->atts[a] != made[k])
					s->atts[kept++] = s->atts[a];
			if (kept != s->natts)
				m->nattached--;
			s->natts = kept;
			free(made[k]);
		}
		xp_plan_abort(&plan);
		*attached = 0;
	} else {
		xp_plan_commit(&plan);
		*attached = (int)nmade;
	}
	free(made);
	return rc;
}

int xp_modules_attach_sites(struct xp_site **sites, size_t ns, struct textbuf *log)
{
	int attached, refused;
	size_t nm = 0;
	struct xp_module **live = xp_calloc(xp_agent.nmodules ? xp_agent.nmodules : 1, sizeof(*live));
	if (!live)
		return -ENOMEM;
	for (size_t i = 0; i < xp_agent.nmodules; i++)
		if (!xp_agent.modules[i]->unloading)
			live[nm++] = xp_agent.modules[i];
	int rc = nm ? attach(live, nm, sites, ns, log, &attached, &refused) : 0;
	free(live);
	return rc;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

struct xp_module *xp_module_find(const char *name, struct textbuf *out)
{
	struct xp_module *found = NULL;
	int matches = 0;

	for (size_t i = 0; i < xp_agent.nmodules; i++)
		if (strcmp(xp_agent.modules[i]->path, name) == 0)
			return xp_agent.modules[i];
	for (size_t i = 0; i < xp_agent.nmodules; i++) {
		if (strcmp(xp_agent.modules[i]->name, name) == 0) {
			found = xp_agent.modules[i];
			matches++;
		}
	}
	if (matches == 1)
		return found;
	if (matches > 1) {
		tb_printf(out, "module name '%s' is ambiguous; use the full path:\n", name);
		for (size_t i = 0; i < xp_agent.nmodules; i++)
			if (strcmp(xp_agent.modules[i]->name, name) == 0)
				tb_printf(out, "  %s\n", xp_agent.modules[i]->path);
	} else {
		tb_printf(out, "unknown module '%s' (see 'modules')\n", name);
	}
	return NULL;
}

/* The tracer's services lent to modules: trace_request.c, a layer above
 * this one, registers them at start-up. */
static void *trace_api;
static void (*trace_unloaded)(void);

void xp_modules_lend_trace(void *api, void (*unloaded)(void))
{
	trace_api = api;
	trace_unloaded = unloaded;
}

/* The descriptor's own account of its version and size, checked before any
 * other field is read. */
static int check_desc(const char *path, const struct xprobes_module_desc *desc,
		      struct textbuf *out)
{
	if (desc->abi != XPROBES_MODULE_ABI) {
		tb_printf(out,
			  "%s was built for XProbes module ABI %u; this agent speaks module ABI %u "
			  "(rebuild the module against this version's <xprobes/probe.h>)\n",
			  path, (unsigned)desc->abi, XPROBES_MODULE_ABI);
		return -EPROTO;
	}
	if (desc->size < sizeof(*desc)) {
		tb_printf(out, "%s: module descriptor is %u bytes; module ABI %u needs %zu\n", path,
			  (unsigned)desc->size, XPROBES_MODULE_ABI, sizeof(*desc));
		return -EPROTO;
	}
	if (desc->nprobes && !desc->probes) {
		tb_printf(out, "%s: module descriptor lists %u probes but no table\n", path,
			  desc->nprobes);
		return -EPROTO;
	}
	for (unsigned i = 0; i < desc->nprobes; i++) {
		const char *why = xp_glob_error(desc->probes[i].glob);
		if (why) {
			tb_printf(out, "%s: probe %u (%s) has glob '%s', which is not valid: %s\n",
				  path, i + 1,
				  desc->probes[i].handler_name ? desc->probes[i].handler_name : "?",
				  desc->probes[i].glob ? desc->probes[i].glob : "", why);
			return -EINVAL;
		}
	}
	return 0;
}

int xp_module_load(const char *path, struct textbuf *out)
{
	if (path[0] != '/') {
		tb_printf(out, "load: module path must be absolute: %s\n", path);
		return -EINVAL;
	}
	for (size_t i = 0; i < xp_agent.nmodules; i++) {
		struct xp_module *m = xp_agent.modules[i];
		if (strcmp(m->path, path) != 0)
			continue;
		if (m->unloading)
			tb_printf(out, "%s is still being unloaded (see 'modules'); load it again "
				       "once it is gone\n", path);
		else
			tb_printf(out, "module already loaded: %s\n", path);
		return m->unloading ? -EBUSY : -EEXIST;
	}

	dlerror();
	void *dl = xp_fault() ? NULL : xp_real_dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		const char *e = dlerror();
		tb_printf(out, "cannot load module %s: %s\n", path, e ? e : "out of memory");
		return -ENOENT;
	}
	const struct xprobes_module_desc *desc = dlsym(dl, XPROBES_MODULE_SYMBOL);
	if (!desc) {
		const char *e = dlerror();
		tb_printf(out, "%s is not an XProbes probe module (%s)\n", path,
			  e ? e : "no " XPROBES_MODULE_SYMBOL " symbol");
		dlclose(dl);
		return -ENOEXEC;
	}
	int rc = check_desc(path, desc, out);
	if (rc) {
		dlclose(dl);
		return rc;
	}
	/* dlopen returns the existing handle for a file already mapped under
	 * another name (a symlink, a hard link). */
	for (size_t i = 0; i < xp_agent.nmodules; i++) {
		if (xp_agent.modules[i]->dl == dl) {
			tb_printf(out, "module already loaded: %s (as %s)\n", path,
				  xp_agent.modules[i]->path);
			dlclose(dl);
			return -EEXIST;
		}
	}

	/* Before any handler can run: the module's pointer to what the
	 * tracer lends (xprobes_trace_request_begin and _end). */
	void **lent = dlsym(dl, XPROBES_TRACE_API_SYMBOL);
	if (lent && trace_api)
		*lent = trace_api;
	rc = xp_module_register(path, dl, desc, out);
	if (rc < 0)
		dlclose(dl); /* not loaded */
	return rc;
}

static size_t all_sites(struct xp_site ***out)
{
	size_t n = 0;
	struct xp_site *s;
	FOR_EACH_SITE(s)
		n++;
	*out = xp_calloc(n ? n : 1, sizeof(**out));
	if (!*out)
		return (size_t)-1;
	n = 0;
	FOR_EACH_SITE(s)
		(*out)[n++] = s;
	return n;
}

int xp_module_register(const char *path, void *dl,
		       const struct xprobes_module_desc *desc, struct textbuf *out)
{
	int rc = check_desc(path, desc, out);
	if (rc)
		return rc;
	struct xp_module *m = xp_calloc(1, sizeof(*m));
	void *grown = xp_realloc(xp_agent.modules, (xp_agent.nmodules + 1) * sizeof(*xp_agent.modules));
	if (grown)
		xp_agent.modules = grown;
	struct xp_site **sites = NULL;
	size_t ns = 0;
	if (!m || !grown || !(m->path = xp_strdup(path)) ||
	    (ns = all_sites(&sites)) == (size_t)-1) {
		if (m)
			free(m->path);
		free(m);
		tb_printf(out, "load: out of memory; %s was not loaded\n", path);
		return -ENOMEM;
	}
	m->id = next_module_id++;
	m->name = base_name(m->path);
	m->dl = dl;
	m->desc = desc;
	m->enabled = !(desc->flags & XPROBES_MODULE_DISABLED);

	int attached, refused;
	/* Listed first so that its attachments sort by its id; taken off
	 * again if attaching fails. */
	xp_agent.modules[xp_agent.nmodules++] = m;
	rc = attach(&m, 1, sites, ns, out, &attached, &refused);
	free(sites);
	if (rc) {
		xp_agent.nmodules--;
		free(m->path);
		free(m);
		tb_printf(out, "load: out of memory; %s was not loaded (nothing was attached)\n",
			  path);
		return rc;
	}
	/* Adding handlers needs no wait: the replaced lists are freed after
	 * the next grace period. */
	for (unsigned i = 0; i < desc->nprobes; i++) {
		int any = 0;
		struct xp_site *s;
		FOR_EACH_SITE(s)
			any |= xp_site_matches(s, desc->probes[i].glob);
		if (!any)
			tb_printf(out, "note: %s -> %s matches no site yet\n",
				  desc->probes[i].glob, desc->probes[i].handler_name);
	}
	/* Nothing attached and something refused: a module that can never
	 * run here (built for other types).  Keeping it loaded would only
	 * need an unload to clean up, so it goes now and the load fails.  A
	 * module that matched nothing at all stays: its sites may come with
	 * a library loaded later. */
	if (!attached && refused) {
		xp_agent.nmodules--;
		tb_printf(out, "load: every probe attachment of %s was refused (%d); "
			       "it was not loaded\n", m->name, refused);
		free(m->path);
		free(m);
		return -EINVAL;
	}
	tb_printf(out, "loaded %s: %d attachment%s%s%s\n", m->name, attached,
		  attached == 1 ? "" : "s", refused ? ", some refused" : "",
		  m->enabled ? "" : " (disabled)");
	/* A refusal fails the command, so scripts notice, but the probes that
	 * did attach stay: unload the module to take them away too. */
	if (refused) {
		tb_printf(out, "load: %d probe attachment%s refused; %s stays loaded with the rest\n",
			  refused, refused == 1 ? "" : "s", m->name);
	}
	return refused;
}

/* Publish every site of m's as it is with m's handlers on or off. */
static int republish(struct xp_module *m, int on)
{
	struct xp_plan plan = { 0 };
	struct xp_site *s;
	FOR_EACH_SITE(s) {
		if (!has_attachment_of(s, m))
			continue;
		int rc = xp_plan_site(&plan, s, m, on);
		if (rc) {
			xp_plan_abort(&plan);
			return rc;
		}
	}
	xp_plan_commit(&plan);
	return 0;
}

int xp_module_set_enabled(struct xp_module *m, int enabled, unsigned long *ticket)
{
	if (m->unloading)
		return -EBUSY;
	if (m->enabled == enabled)
		return -EALREADY;
	int rc = republish(m, enabled);
	if (rc)
		return rc;
	m->enabled = enabled;
	/* Disabled once no thread is still inside one of its handlers. */
	if (ticket)
		*ticket = enabled ? 0 : xp_sync_request();
	return 0;
}

int xp_module_unload_begin(struct xp_module *m)
{
	if (m->unloading)
		return -EALREADY;
	int rc = republish(m, 0);
	if (rc)
		return rc;
	m->unloading = 1;
	m->unload_ticket = xp_sync_request();
	return 0;
}

int xp_module_unload_ready(const struct xp_module *m)
{
	return m->unloading && m->commands == 0 && xp_sync_done(m->unload_ticket);
}

void xp_module_unload_finish(struct xp_module *m)
{
	struct xp_site *s;
	FOR_EACH_SITE(s)
		detach_from_site(s, m);
	size_t kept = 0;
	for (size_t i = 0; i < xp_agent.nmodules; i++)
		if (xp_agent.modules[i] != m)
			xp_agent.modules[kept++] = xp_agent.modules[i];
	xp_agent.nmodules = kept;
	/* Quiescent: no handler list names this module, a grace period saw
	 * every reader out, and none of its commands runs. */
	if (trace_unloaded) /* a request it opened will never be ended */
		trace_unloaded();
	if (m->dl)
		dlclose(m->dl);
	free(m->path);
	free(m);
}

int xp_modules_reap(void)
{
	int left = 0;
	for (size_t i = 0; i < xp_agent.nmodules;) {
		struct xp_module *m = xp_agent.modules[i];
		if (xp_module_unload_ready(m)) {
			xp_module_unload_finish(m);
			continue;
		}
		left += m->unloading;
		i++;
	}
	return left;
}

int xp_module_unload(struct xp_module *m)
{
	int rc = xp_module_unload_begin(m);
	if (rc)
		return rc;
	while (!xp_sync_done(m->unload_ticket))
		xp_synchronize();
	if (m->commands == 0)
		xp_module_unload_finish(m);
	return 0;
}
