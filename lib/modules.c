/* Probe modules: loading, attaching their probes to sites, enabling,
 * disabling and unloading.
 *
 * Unload order matters: the module's handlers are removed from every
 * handler list, a grace period passes (no thread can still be inside one of
 * its handlers), and only then is the module unmapped.  No timer anywhere.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "signature.h"
#include "wire.h"

struct xp_module **xp_modules;
size_t xp_nmodules;
static unsigned next_module_id = 1;

static int attach_one(struct xp_module *m, const struct xprobes_probe_desc *p,
		      struct xp_site *s, struct textbuf *log)
{
	char want[1024];

	sig_canonical(p->types, want, sizeof(want));
	if (strcmp(want, s->types) != 0) {
		if (log)
			tb_printf(log,
				  "refused: %s -> %s on %s in %s: site has (%s), probe declares (%s)\n",
				  p->glob, p->handler_name, s->fullname, s->obj->path,
				  s->types, want);
		return -1;
	}
	struct xp_attach *a = malloc(sizeof(*a));
	void *grown = realloc(s->atts, (s->natts + 1) * sizeof(*s->atts));
	if (!a || !grown) {
		free(a);
		if (grown)
			s->atts = grown;
		if (log)
			tb_printf(log, "out of memory attaching %s to %s\n",
				  p->handler_name, s->fullname);
		return -1;
	}
	s->atts = grown;
	*a = (struct xp_attach){ m, p, s };
	/* Keep load order: modules only ever arrive last, but a site found
	 * late may receive attachments of several modules in any order. */
	size_t at = s->natts;
	while (at > 0 && s->atts[at - 1]->mod->id > m->id)
		at--;
	memmove(&s->atts[at + 1], &s->atts[at], (s->natts - at) * sizeof(*s->atts));
	s->atts[at] = a;
	s->natts++;
	m->nattached++;
	return 0;
}

/* Attach all of m's probes to s; returns how many were refused. */
static int attach_module_to_site(struct xp_module *m, struct xp_site *s,
				 struct textbuf *log, int *attached)
{
	int refused = 0;

	for (unsigned i = 0; i < m->desc->nprobes; i++) {
		const struct xprobes_probe_desc *p = &m->desc->probes[i];
		if (!xp_site_matches(s, p->glob))
			continue;
		if (attach_one(m, p, s, log) == 0)
			(*attached)++;
		else
			refused++;
	}
	return refused;
}

void xp_modules_attach_site(struct xp_site *s, struct textbuf *log)
{
	int attached = 0;

	for (size_t i = 0; i < xp_nmodules; i++)
		attach_module_to_site(xp_modules[i], s, log, &attached);
	if (attached) {
		xp_site_publish(s);
		/* New site, so no old list to wait for. */
	}
}

void xp_site_forget(struct xp_site *s)
{
	for (size_t i = 0; i < s->natts; i++) {
		s->atts[i]->mod->nattached--;
		free(s->atts[i]);
	}
	s->natts = 0;
	/* The list lives in our heap: retire it.  The record and the gate were
	 * in the unloaded object and are not touched. */
	xp_retire_list(s->published);
	s->published = NULL;
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

	for (size_t i = 0; i < xp_nmodules; i++)
		if (strcmp(xp_modules[i]->path, name) == 0)
			return xp_modules[i];
	for (size_t i = 0; i < xp_nmodules; i++) {
		if (strcmp(xp_modules[i]->name, name) == 0) {
			found = xp_modules[i];
			matches++;
		}
	}
	if (matches == 1)
		return found;
	if (matches > 1) {
		tb_printf(out, "module name '%s' is ambiguous; use the full path:\n", name);
		for (size_t i = 0; i < xp_nmodules; i++)
			if (strcmp(xp_modules[i]->name, name) == 0)
				tb_printf(out, "  %s\n", xp_modules[i]->path);
	} else {
		tb_printf(out, "unknown module '%s' (see 'modules')\n", name);
	}
	return NULL;
}

int xp_module_load(const char *path, struct textbuf *out)
{
	if (path[0] != '/') {
		tb_printf(out, "load: module path must be absolute: %s\n", path);
		return XP_ERR;
	}
	for (size_t i = 0; i < xp_nmodules; i++) {
		if (strcmp(xp_modules[i]->path, path) == 0) {
			tb_printf(out, "module already loaded: %s\n", path);
			return XP_ERR;
		}
	}

	dlerror();
	void *dl = xp_real_dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		const char *e = dlerror();
		tb_printf(out, "cannot load module %s: %s\n", path, e ? e : "unknown error");
		return XP_ERR;
	}
	const struct xprobes_module_desc *desc = dlsym(dl, XPROBES_MODULE_SYMBOL);
	if (!desc) {
		const char *e = dlerror();
		tb_printf(out, "%s is not an XProbes probe module (%s)\n", path,
			  e ? e : "no " XPROBES_MODULE_SYMBOL " symbol");
		dlclose(dl);
		return XP_ERR;
	}
	if (desc->abi != XPROBES_ABI_VERSION) {
		tb_printf(out, "%s was built for XProbes ABI %u; this agent speaks %u\n",
			  path, desc->abi, XPROBES_ABI_VERSION);
		dlclose(dl);
		return XP_ERR;
	}
	/* dlopen returns the existing handle for a file already mapped under
	 * another name (a symlink, a hard link). */
	for (size_t i = 0; i < xp_nmodules; i++) {
		if (xp_modules[i]->dl == dl) {
			tb_printf(out, "module already loaded: %s (as %s)\n", path,
				  xp_modules[i]->path);
			dlclose(dl);
			return XP_ERR;
		}
	}

	return xp_module_register(path, dl, desc, out);
}

int xp_module_register(const char *path, void *dl,
		       const struct xprobes_module_desc *desc, struct textbuf *out)
{
	struct xp_module *m = calloc(1, sizeof(*m));
	void *grown = realloc(xp_modules, (xp_nmodules + 1) * sizeof(*xp_modules));
	if (grown)
		xp_modules = grown;
	if (!m || !grown || !(m->path = strdup(path))) {
		free(m);
		if (dl)
			dlclose(dl);
		tb_printf(out, "load: out of memory\n");
		return XP_ERR;
	}
	m->id = next_module_id++;
	m->name = base_name(m->path);
	m->dl = dl;
	m->desc = desc;
	m->enabled = !(desc->flags & XPROBES_MODULE_DISABLED);
	xp_modules[xp_nmodules++] = m;

	int attached = 0, refused = 0;
	for (size_t i = 0; i < xp_nobjects; i++) {
		struct xp_object *o = xp_objects[i];
		for (size_t j = 0; j < o->nsites; j++) {
			struct xp_site *s = o->sites[j];
			int before = attached;
			refused += attach_module_to_site(m, s, out, &attached);
			if (attached != before && m->enabled)
				xp_site_publish(s);
		}
	}
	/* Adding handlers needs no wait: the replaced lists are freed by the
	 * next grace period (disable, unload, or a full retire queue). */
	for (unsigned i = 0; i < desc->nprobes; i++) {
		int any = 0;
		for (size_t j = 0; j < xp_nobjects && !any; j++)
			for (size_t k = 0; k < xp_objects[j]->nsites && !any; k++)
				any = xp_site_matches(xp_objects[j]->sites[k],
						      desc->probes[i].glob);
		if (!any)
			tb_printf(out, "note: %s -> %s matches no site yet\n",
				  desc->probes[i].glob, desc->probes[i].handler_name);
	}
	tb_printf(out, "loaded %s: %d attachment%s%s%s\n", m->name, attached,
		  attached == 1 ? "" : "s", refused ? ", some refused" : "",
		  m->enabled ? "" : " (disabled)");
	/* A refusal fails the command, so scripts notice, but the probes that
	 * did attach stay: unload the module to take them away too. */
	if (refused)
		tb_printf(out, "load: %d probe attachment%s refused; %s stays loaded with the rest\n",
			  refused, refused == 1 ? "" : "s", m->name);
	return refused ? XP_ERR : XP_OK;
}

static void republish_module_sites(struct xp_module *m)
{
	for (size_t i = 0; i < xp_nobjects; i++) {
		struct xp_object *o = xp_objects[i];
		for (size_t j = 0; j < o->nsites; j++) {
			struct xp_site *s = o->sites[j];
			for (size_t k = 0; k < s->natts; k++) {
				if (s->atts[k]->mod == m) {
					xp_site_publish(s);
					break;
				}
			}
		}
	}
}

int xp_module_set_enabled(struct xp_module *m, int enabled)
{
	if (m->enabled == enabled)
		return 0;
	m->enabled = enabled;
	republish_module_sites(m);
	/* After this, a disabled module's handlers are no longer running.
	 * Enabling only adds handlers: nothing to wait for. */
	if (!enabled)
		xp_quiesce();
	return 1;
}

void xp_module_unload(struct xp_module *m)
{
	xp_module_set_enabled(m, 0);

	for (size_t i = 0; i < xp_nobjects; i++) {
		struct xp_object *o = xp_objects[i];
		for (size_t j = 0; j < o->nsites; j++) {
			struct xp_site *s = o->sites[j];
			size_t kept = 0;
			for (size_t k = 0; k < s->natts; k++) {
				if (s->atts[k]->mod == m)
					free(s->atts[k]);
				else
					s->atts[kept++] = s->atts[k];
			}
			s->natts = kept;
		}
	}
	size_t kept = 0;
	for (size_t i = 0; i < xp_nmodules; i++)
		if (xp_modules[i] != m)
			xp_modules[kept++] = xp_modules[i];
	xp_nmodules = kept;

	/* Quiescent: no handler list names this module any more, and the
	 * grace period in set_enabled saw every reader out. */
	if (m->dl)
		dlclose(m->dl);
	free(m->path);
	free(m);
}
