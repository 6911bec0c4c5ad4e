/* The agent's command language: one line in, text and a status out. */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "signature.h"
#include "wire.h"

#define MODULE_REPLY_LIMIT (1024 * 1024)

struct command {
	const char *name;
	const char *usage;
	const char *help;
	int (*run)(char *args, struct textbuf *out);
};

static const struct command commands[];

struct textbuf xp_pending = { NULL, 0, 0, 64 * 1024, 0 };

/* Split off the first word of *s (in place); returns it or NULL. */
static char *next_word(char **s)
{
	char *p = *s;
	while (isspace((unsigned char)*p))
		p++;
	if (!*p)
		return NULL;
	char *w = p;
	while (*p && !isspace((unsigned char)*p))
		p++;
	if (*p)
		*p++ = '\0';
	while (isspace((unsigned char)*p))
		p++;
	*s = p;
	return w;
}

static int no_more_args(char *args, const char *cmd, struct textbuf *out)
{
	if (*args) {
		tb_printf(out, "%s: unexpected argument '%s'\n", cmd, args);
		return 0;
	}
	return 1;
}

static int cmd_help(char *args, struct textbuf *out)
{
	(void)args;
	for (const struct command *c = commands; c->name; c++)
		if (c->help)
			tb_printf(out, "  %-28s %s\n", c->usage, c->help);
	tb_puts(out, "  quit                         leave the shell\n");
	return XP_OK;
}

static int cmd_version(char *args, struct textbuf *out)
{
	if (!no_more_args(args, "version", out))
		return XP_ERR;
	tb_printf(out, "xprobes agent %s (ABI %d)\n", XP_VERSION, XPROBES_ABI_VERSION);
	return XP_OK;
}

static int cmd_objects(char *args, struct textbuf *out)
{
	const char *glob = next_word(&args);
	if (!no_more_args(args, "objects", out))
		return XP_ERR;
	for (size_t i = 0; i < xp_nobjects; i++) {
		struct xp_object *o = xp_objects[i];
		if (glob && !xp_object_matches(o, glob))
			continue;
		tb_printf(out, "%s: %zu site%s\n", o->path, o->nsites,
			  o->nsites == 1 ? "" : "s");
	}
	return XP_OK;
}

/* "objglob:siteglob", or a bare site glob. */
static void split_pattern(char *pat, const char **left, const char **right)
{
	*left = NULL;
	*right = NULL;
	if (!pat)
		return;
	char *colon = strchr(pat, ':');
	if (colon) {
		*colon = '\0';
		*left = *pat ? pat : NULL;
		*right = colon[1] ? colon + 1 : NULL;
	} else {
		*right = pat;
	}
}

/* Sites of one name and type list in one object (a DTrace probe used at
 * several call sites, an inlined function) print as one line. */
static int same_probe(const struct xp_site *a, const struct xp_site *b)
{
	return strcmp(a->fullname, b->fullname) == 0 && strcmp(a->types, b->types) == 0;
}

static void print_site(const struct xp_site *s, size_t locations, struct textbuf *out)
{
	char where[48] = "";
	if (locations > 1)
		snprintf(where, sizeof(where), " [%zu locations]", locations);
	if (s->natts == 0) {
		tb_printf(out, "  %s(%s)%s\n", s->fullname, s->types, where);
		return;
	}
	for (size_t i = 0; i < s->natts; i++) {
		const struct xp_attach *a = s->atts[i];
		tb_printf(out, "%c %s(%s)%s => %s -> %s [%s]%s\n",
			  a->mod->enabled ? '*' : '-', s->fullname, s->types, where,
			  a->probe->glob, a->probe->handler_name, a->mod->path,
			  a->mod->enabled ? "" : " (disabled)");
	}
}

static int cmd_sites(char *args, struct textbuf *out)
{
	const char *objglob, *siteglob;
	char *pat = next_word(&args);
	if (!no_more_args(args, "sites", out))
		return XP_ERR;
	char pat_copy[1024];
	snprintf(pat_copy, sizeof(pat_copy), "%s", pat ? pat : "");
	split_pattern(pat, &objglob, &siteglob);
	/* "memcached:*" is more often provider:glob than object:glob: when
	 * the left part names no object, the whole pattern is a site glob. */
	if (objglob) {
		int any = 0;
		for (size_t i = 0; i < xp_nobjects && !any; i++)
			any = xp_object_matches(xp_objects[i], objglob);
		if (!any) {
			objglob = NULL;
			siteglob = pat_copy;
		}
	}
	for (size_t i = 0; i < xp_nobjects; i++) {
		struct xp_object *o = xp_objects[i];
		if (objglob && !xp_object_matches(o, objglob))
			continue;
		int header = 0;
		for (size_t j = 0; j < o->nsites; j++) {
			struct xp_site *s = o->sites[j];
			if (siteglob && !xp_site_matches(s, siteglob))
				continue;
			size_t k, locations = 0;
			for (k = 0; k < j && !same_probe(o->sites[k], s); k++)
				;
			if (k < j)
				continue; /* printed with its first location */
			for (k = j; k < o->nsites; k++)
				locations += same_probe(o->sites[k], s);
			if (!header) {
				tb_printf(out, "%s:\n", o->path);
				header = 1;
			}
			print_site(s, locations, out);
		}
	}
	return XP_OK;
}

static int cmd_load(char *args, struct textbuf *out)
{
	const char *path = next_word(&args);
	if (!path) {
		tb_puts(out, "usage: load PATH\n");
		return XP_ERR;
	}
	if (!no_more_args(args, "load", out))
		return XP_ERR;
	return xp_module_load(path, out);
}

static int cmd_modules(char *args, struct textbuf *out)
{
	const char *glob = next_word(&args);
	if (!no_more_args(args, "modules", out))
		return XP_ERR;
	for (size_t i = 0; i < xp_nmodules; i++) {
		struct xp_module *m = xp_modules[i];
		if (glob && fnmatch(glob, m->name, 0) && fnmatch(glob, m->path, 0))
			continue;
		tb_printf(out, "%c %s (%s): %u probe%s, %zu attachment%s%s\n",
			  m->enabled ? '*' : ' ', m->name, m->path, m->desc->nprobes,
			  m->desc->nprobes == 1 ? "" : "s", m->nattached,
			  m->nattached == 1 ? "" : "s",
			  m->desc->command ? ", has commands" : "");
	}
	return XP_OK;
}

static size_t probe_site_count(const struct xp_module *m,
			       const struct xprobes_probe_desc *p)
{
	size_t n = 0;
	for (size_t i = 0; i < xp_nobjects; i++)
		for (size_t j = 0; j < xp_objects[i]->nsites; j++) {
			const struct xp_site *s = xp_objects[i]->sites[j];
			for (size_t k = 0; k < s->natts; k++)
				if (s->atts[k]->mod == m && s->atts[k]->probe == p)
					n++;
		}
	return n;
}

static int cmd_probes(char *args, struct textbuf *out)
{
	const char *modglob, *probeglob;
	char *pat = next_word(&args);
	if (!no_more_args(args, "probes", out))
		return XP_ERR;
	split_pattern(pat, &modglob, &probeglob);
	for (size_t i = 0; i < xp_nmodules; i++) {
		struct xp_module *m = xp_modules[i];
		if (modglob && fnmatch(modglob, m->name, 0) && fnmatch(modglob, m->path, 0))
			continue;
		for (unsigned j = 0; j < m->desc->nprobes; j++) {
			const struct xprobes_probe_desc *p = &m->desc->probes[j];
			if (probeglob && fnmatch(probeglob, p->glob, 0) &&
			    fnmatch(probeglob, p->handler_name, 0))
				continue;
			size_t n = probe_site_count(m, p);
			char types[1024];
			sig_canonical(p->types, types, sizeof(types));
			tb_printf(out, "%c %s: %s -> %s(%s): %zu site%s\n",
				  m->enabled ? '*' : ' ', m->name, p->glob,
				  p->handler_name, types, n, n == 1 ? "" : "s");
		}
	}
	return XP_OK;
}

static struct xp_module *module_arg(char **args, const char *cmd, struct textbuf *out)
{
	const char *name = next_word(args);
	if (!name) {
		tb_printf(out, "usage: %s MODULE%s\n", cmd, strcmp(cmd, "command") ? "" : " [ARGS]");
		return NULL;
	}
	return xp_module_find(name, out);
}

static int cmd_enable_disable(char *args, struct textbuf *out, int enable)
{
	const char *cmd = enable ? "enable" : "disable";
	struct xp_module *m = module_arg(&args, cmd, out);
	if (!m || !no_more_args(args, cmd, out))
		return XP_ERR;
	if (!xp_module_set_enabled(m, enable))
		tb_printf(out, "%s was already %sd\n", m->name, cmd);
	else
		tb_printf(out, "%sd %s\n", cmd, m->name);
	return XP_OK;
}

static int cmd_enable(char *args, struct textbuf *out)
{
	return cmd_enable_disable(args, out, 1);
}

static int cmd_disable(char *args, struct textbuf *out)
{
	return cmd_enable_disable(args, out, 0);
}

static int cmd_unload(char *args, struct textbuf *out)
{
	struct xp_module *m = module_arg(&args, "unload", out);
	if (!m || !no_more_args(args, "unload", out))
		return XP_ERR;
	char *name = strdup(m->name);
	xp_module_unload(m);
	tb_printf(out, "unloaded %s\n", name ? name : "module");
	free(name);
	return XP_OK;
}

/* Module commands write through a plain function pointer: the reply being
 * built lives here while the handler runs (on the control thread only). */
static struct textbuf *module_reply;
int xp_commands_hold_lock;

static int module_out(const char *msg)
{
	if (!module_reply || !msg)
		return -1;
	return tb_puts(module_reply, msg);
}

static int cmd_command(char *args, struct textbuf *out)
{
	struct xp_module *m = module_arg(&args, "command", out);
	if (!m)
		return XP_ERR;
	if (!m->desc->command) {
		tb_printf(out, "module %s has no command handler\n", m->name);
		return XP_ERR;
	}
	struct textbuf reply;
	tb_init(&reply, MODULE_REPLY_LIMIT);
	module_reply = &reply;
	/* A module's command may take its time (sorting a big table, waiting
	 * for something): it runs without agent_lock, so an application's
	 * fork() or dlopen() never waits for it.  Nothing can unload the
	 * module meanwhile: only this thread runs commands. */
	if (xp_commands_hold_lock)
		pthread_mutex_unlock(&agent_lock);
	m->desc->command(args, module_out);
	if (xp_commands_hold_lock)
		pthread_mutex_lock(&agent_lock);
	module_reply = NULL;
	if (reply.len)
		tb_append(out, reply.data, reply.len);
	if (reply.len && reply.data[reply.len - 1] != '\n')
		tb_puts(out, "\n");
	if (reply.truncated)
		tb_puts(out, "(module output truncated at 1 MiB)\n");
	tb_free(&reply);
	return XP_OK;
}

/* Names for the shell's tab completion, one per line. */
static int cmd_complete(char *args, struct textbuf *out)
{
	const char *what = next_word(&args);
	if (what && strcmp(what, "modules") == 0) {
		for (size_t i = 0; i < xp_nmodules; i++)
			tb_printf(out, "%s\n", xp_modules[i]->name);
	} else if (what && strcmp(what, "sites") == 0) {
		for (size_t i = 0; i < xp_nobjects; i++)
			for (size_t j = 0; j < xp_objects[i]->nsites; j++)
				tb_printf(out, "%s\n", xp_objects[i]->sites[j]->fullname);
	} else {
		tb_puts(out, "usage: complete modules|sites\n");
		return XP_ERR;
	}
	return XP_OK;
}

static const struct command commands[] = {
	{ "help", "help", "list commands", cmd_help },
	{ "version", "version", "agent version", cmd_version },
	{ "objects", "objects [GLOB]", "loaded objects that have sites", cmd_objects },
	{ "sites", "sites [OBJGLOB:][SITEGLOB]", "sites and what is attached (*)", cmd_sites },
	{ "load", "load PATH", "load a probe module and attach its probes", cmd_load },
	{ "modules", "modules [GLOB]", "loaded modules (* = enabled)", cmd_modules },
	{ "probes", "probes [MODGLOB:][PROBEGLOB]", "probes of loaded modules", cmd_probes },
	{ "enable", "enable MODULE", "enable a module's handlers", cmd_enable },
	{ "disable", "disable MODULE", "disable them (returns once none runs)", cmd_disable },
	{ "unload", "unload MODULE", "detach and unmap once quiescent", cmd_unload },
	{ "command", "command MODULE [ARGS]", "run a module's command", cmd_command },
	{ "complete", "complete modules|sites", NULL, cmd_complete },
	{ NULL, NULL, NULL, NULL },
};

int xp_run_command(const char *line, struct textbuf *out)
{
	char *copy = strdup(line);
	if (!copy) {
		tb_puts(out, "out of memory\n");
		return XP_ERR;
	}
	char *args = copy;
	/* Trailing spaces carry no meaning. */
	size_t n = strlen(args);
	while (n && isspace((unsigned char)args[n - 1]))
		args[--n] = '\0';
	char *name = next_word(&args);
	int rc = XP_ERR;
	if (!name) {
		rc = XP_OK;
	} else {
		const struct command *c;
		for (c = commands; c->name; c++)
			if (strcmp(c->name, name) == 0)
				break;
		if (c->name) {
			xp_rescan(&xp_pending, 1);
			/* What rescans found (a probe refused on a library dlopen()ed
			 * since) goes with the next reply the user sees: not the
			 * tool's `version` handshake, nor tab completion. */
			if (xp_pending.len && strcmp(name, "version") && strcmp(name, "complete")) {
				tb_puts(out, "since the last command:\n");
				tb_append(out, xp_pending.data, xp_pending.len);
				if (xp_pending.truncated)
					tb_puts(out, "(more not kept)\n");
				tb_reset(&xp_pending);
			}
			rc = c->run(args, out);
		} else {
			tb_printf(out, "unknown command '%s' (try 'help')\n", name);
		}
	}
	free(copy);
	return rc;
}
