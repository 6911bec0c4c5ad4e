/* SPDX-License-Identifier: MIT */
/* Starting a trace from the tool: -F/-N resolved here to the patch sites
 * of the functions they name (the agent knows addresses, not names), sent
 * as `trace select` lines, then `trace start` with the options the agent
 * takes.  Below both the command line (trace_cmd.c) and the recorder
 * (trace_recorder.c), which each start a trace. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include "../../lib/base/base.h"
#include "trace_dwarf.h"

int trace_glob_any(char *const *globs, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (fnmatch(globs[i], name, 0) == 0)
			return 1;
	return 0;
}

/* Send one command whose reply matters only when it fails. */
static int quiet_call(struct session *s, const char *cmd)
{
	char *text = NULL;
	int rc = session_call(s, cmd, &text);
	if (rc == 1)
		fprintf(stderr, "xprobes: %.40s: %s", cmd, text && *text ? sanitize_text(text) : "failed\n");
	free(text);
	return rc;
}

/* Requests of addresses, each below the agent's request limit: `trace
 * select ...` (sites) or `trace select-calls ...` (GOT slots). */
struct select_line {
	struct session *s;
	const char *cmd;
	char *line;
	size_t len;
	int rc;
	size_t words, max_words; /* in the line; the agent's bound (0: none) */
};

/* The agent takes at most 256 ADDR=ITEMS words a `trace args` line
 * (lib/trace/trace_commands.c). */
#define ARGS_WORDS 256

static void select_word(struct select_line *l, uint64_t addr, const char *items)
{
	if (l->rc || !l->s) /* no session: a reader binding, nothing sent */
		return;
	if (l->len > XP_MAX_REQUEST - 128 || (l->max_words && l->words == l->max_words)) {
		l->rc = quiet_call(l->s, l->line);
		l->len = 0;
		l->words = 0;
	}
	l->words++;
	if (!l->len)
		l->len = (size_t)snprintf(l->line, XP_MAX_REQUEST, "%s", l->cmd);
	l->len += (size_t)snprintf(l->line + l->len, XP_MAX_REQUEST - l->len, " 0x%" PRIx64 "%s%s",
				   addr, items ? "=" : "", items ? items : "");
}

static void select_add(struct select_line *l, uint64_t addr)
{
	select_word(l, addr, NULL);
}

/* What the agent's bounds left out, said once at the end (by the start:
 * a reader binding the same specs, who not NULL, says it again never). */
struct args_left {
	size_t noret; /* return values past the 8 items of a function */
	size_t past;  /* functions past the agent's XP_TRACE_ARG_MAX_FUNCS */
	const char *who; /* a reader's command name; NULL: the start */
};

/* -A/-R for the function or library call name at addr, merged with -a's
 * spec autos (NULL: none) as uftrace merges them: bound, and sent as
 * `trace args ADDR=ITEMS` (to args, NULL when none is asked). */
static void args_add(const struct trace_opts *o, struct select_line *args, uint64_t addr,
		     const char *name, const struct ta_spec *autos, struct args_left *left)
{
	struct ta_spec user, spec;
	char why[TRACE_WHY_SIZE], items[128];
	if (!args || args->rc)
		return;
	int m = argspec_match(o->args, name, &user, why, sizeof(why));
	if (m < 0) {
		fprintf(stderr, "xprobes: %s: -A/-R: %s\n", left->who ? left->who : "trace start",
			sanitize_text(why));
		args->rc = 1;
		return;
	}
	argspec_merge_auto(&spec, autos, m > 0 ? &user : NULL);
	if (spec.nargs + (size_t)spec.has_ret > TA_MAX_ITEMS) {
		/* -A's eight and -a's return value, or -a's eight and -R's:
		 * the exit carries none (uftrace's replay then shows none). */
		spec.has_ret = 0;
		left->noret++;
	}
	if (!spec.nargs && !spec.has_ret)
		return;
	if (o->args->nspec >= XP_TRACE_ARG_MAX_FUNCS && !argspec_find(o->args, addr)) {
		left->past++;
		return;
	}
	if (ta_items_text(&spec, items, sizeof(items)) < 0 ||
	    argspec_bind(o->args, addr, &spec) != 0) {
		fprintf(stderr, "xprobes: %s: out of memory\n", left->who ? left->who : "trace start");
		args->rc = 1;
		return;
	}
	select_word(args, addr, items);
}

/* -a: one traced object's specs from its DWARF, reduced to what the agent
 * records (the same in the .dbg text kept for the data directory), by
 * runtime address.  An object without debug information: said, none. */
struct auto_specs {
	struct u64map at;      /* runtime address -> spec */
	struct ta_spec *spec;
	size_t n;
};

static void auto_free(struct auto_specs *a)
{
	u64map_free(&a->at);
	free(a->spec);
	*a = (struct auto_specs){ 0 };
}

static int auto_read(struct trace_names *names, const struct trace_object *obj,
		     struct argspecs *args, struct auto_specs *out, const char *who)
{
	char path[64], err[512], why[TRACE_WHY_SIZE];
	*out = (struct auto_specs){ 0 };
	int fd = trace_names_open(names, obj->path);
	if (fd < 0)
		return 0; /* refused already, and said so */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd); /* the very file mapped */
	struct xp_dwarf *d = xp_dwarf_open(path, XP_DWARF_RECORDABLE, err, sizeof(err));
	close(fd);
	if (!d) {
		/* No debug information, or DWARF this cannot read (said by the
		 * start): the object's functions record no arguments. */
		if (who)
			return 0;
		char *e = strstr(err, ": ") ? strstr(err, ": ") + 2 : err;
		fprintf(stderr, "xprobes: trace start: -a: %s: %s (no arguments from it)\n",
			sanitize_text(obj->path), sanitize_text(e));
		return 0;
	}
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int rc = !f || xp_dwarf_print_dbg(d, obj->path, f) ? 1 : 0;
	if (f && fclose(f))
		rc = 1;
	if (!rc)
		rc = argspec_keep_dbg(args, obj->path, text) ? 1 : 0;
	free(text);
	for (size_t i = 0; i < xp_dwarf_nenums(d) && !rc; i++)
		rc = argspec_enum(args, xp_dwarf_enum(d, i)) ? 1 : 0;
	size_t n = xp_dwarf_nfuncs(d);
	out->spec = calloc(n ? n : 1, sizeof(*out->spec));
	rc = rc || !out->spec;
	for (size_t i = 0; i < n && !rc; i++) {
		const struct xp_dwarf_func *fn = xp_dwarf_func(d, i);
		struct ta_spec *s = &out->spec[out->n];
		*s = (struct ta_spec){ 0 };
		if (argspec_parse_auto(args, fn->argspec, 0, s, why, sizeof(why)) ||
		    argspec_parse_auto(args, fn->retspec, 1, s, why, sizeof(why))) {
			/* Not expected (trace_dwarf.c makes only what this
			 * takes): its function records none, said. */
			char fname[128];
			snprintf(fname, sizeof(fname), "%s", fn->name);
			if (!who)
				fprintf(stderr, "xprobes: trace start: -a: %s: %s: %s\n",
					sanitize_text(obj->path), sanitize_text(fname),
					sanitize_text(why));
			continue;
		}
		if ((s->nargs || s->has_ret) &&
		    (u64map_put(&out->at, obj->base + fn->addr, (uint32_t)out->n) ? (rc = 1) : 1))
			out->n++;
	}
	xp_dwarf_close(d);
	if (rc) {
		fprintf(stderr, "xprobes: %s: -a: %s: out of memory\n", who ? who : "trace start",
			sanitize_text(obj->path));
		auto_free(out);
	}
	return rc;
}

static const struct ta_spec *auto_find(const struct auto_specs *a, uint64_t addr)
{
	uint32_t at;
	return a->n && u64map_get(&a->at, addr, &at) == 0 ? &a->spec[at] : NULL;
}

/* The library calls of one object whose names pass -F/-N. */
struct call_match {
	const struct trace_opts *o;
	struct select_line *l, *args;
	uint64_t base;
	struct args_left *left;
};

static void match_call(void *ctx, uint64_t vaddr, const char *name)
{
	struct call_match *m = ctx;
	args_add(m->o, m->args, m->base + vaddr, name, NULL, m->left);
	if (!m->l || (m->o->ninclude && !trace_glob_any(m->o->include, m->o->ninclude, name)) ||
	    trace_glob_any(m->o->exclude, m->o->nexclude, name))
		return;
	select_add(m->l, m->base + vaddr);
}

static void select_calls(struct trace_names *names, const struct trace_object *obj,
			 const struct trace_opts *o, struct select_line *l, struct select_line *args,
			 struct args_left *left)
{
	int fd = trace_names_open(names, obj->path);
	if (fd < 0)
		return; /* its functions were refused already, and said so */
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	if (e && elf_kind(e) == ELF_K_ELF) {
		struct call_match m = { o, l, args, obj->base, left };
		trace_libcall_slots((struct Elf *)e, match_call, &m);
	}
	if (e)
		elf_end(e);
	close(fd);
}

/* A glob matched no traced function: the agent's own account of the
 * functions it does not trace now (another tool's uprobe or breakpoint
 * on them, a removed uprobe's scar), which may be why. */
static void say_not_traced(struct session *s)
{
	char *text = NULL;
	if (session_call(s, "trace status", &text) == 0 && text) {
		sanitize_text(text);
		for (char *line = text; line && *line;) {
			char *nl = strchr(line, '\n');
			size_t len = nl ? (size_t)(nl - line) : strlen(line);
			if (!strncmp(line, "(not traced: ", 13) && len < 2000)
				fprintf(stderr, "xprobes: trace start: %.*s\n", (int)len, line);
			line = nl ? nl + 1 : NULL;
		}
	}
	free(text);
}

/* Sites whose function names pass -F/-N, sent as `trace select` lines
 * each below the agent's request limit, and the library calls whose do
 * (`trace select-calls`); with select 0, none (every site is traced).
 * With -A/-R, the functions and library calls they name, bound in
 * o->args and sent as `trace args` lines.  *selected: how many sites. */
static int select_sites(struct session *s, const struct trace_opts *o, int select,
			size_t *selected, const char *who)
{
	struct trace_object *objs;
	size_t nobjs;
	*selected = 0;
	if (trace_objects(s, &objs, &nobjs) != 0)
		return 1;
	struct trace_names *names = trace_names_new(s);
	struct select_line sites = { s, "trace select", malloc(XP_MAX_REQUEST), 0, 0, 0, 0 };
	struct select_line calls = { s, "trace select-calls", malloc(XP_MAX_REQUEST), 0, 0, 0, 0 };
	/* A reader (who) binds the specs and sends nothing. */
	struct select_line args = { who ? NULL : s, "trace args", malloc(XP_MAX_REQUEST), 0, 0, 0,
				    ARGS_WORDS };
	struct select_line *argl = o->args ? &args : NULL;
	int libcalls = strstr(o->agent_args, "--libcall") != NULL;
	int rc = names && sites.line && calls.line && args.line ? 0 : 1;
	struct args_left left = { 0, 0, who };
	for (size_t i = 0; i < nobjs && !rc; i++) {
		struct auto_specs autos = { 0 };
		/* nsites: at most TRACE_MAX_SITES (trace_parse.c). */
		uint64_t *table = calloc(objs[i].nsites ? objs[i].nsites : 1, sizeof(*table));
		trace_names_add_object(names, objs[i].base, objs[i].path);
		if (!table ||
		    trace_vm_read(s, objs[i].table, table, objs[i].nsites * sizeof(*table))) {
			fprintf(stderr, "xprobes: %s: cannot read the site table of %s: %s\n",
				who ? who : "trace start", sanitize_text(objs[i].path), table ? strerror(errno) : "no memory");
			rc = 1;
		}
		if (!rc && o->args && o->args->autoargs)
			rc = auto_read(names, &objs[i], o->args, &autos, who);
		for (size_t k = 0; !rc && k < objs[i].nsites; k++) {
			const char *name = trace_names_func(names, table[k]);
			args_add(o, argl, table[k], name, auto_find(&autos, table[k]), &left);
			if (!select || (o->ninclude && !trace_glob_any(o->include, o->ninclude, name)) ||
			    trace_glob_any(o->exclude, o->nexclude, name))
				continue;
			select_add(&sites, table[k]);
			(*selected)++;
		}
		if (!rc && libcalls)
			select_calls(names, &objs[i], o, select ? &calls : NULL, argl, &left);
		rc = rc ? rc : sites.rc ? sites.rc : calls.rc ? calls.rc : args.rc;
		free(table);
		auto_free(&autos);
	}
	if (!rc && trace_names_refused(names))
		rc = 1; /* the sites of a refused file have no names to match */
	if (!rc && sites.len)
		rc = quiet_call(s, sites.line);
	if (!rc && calls.len)
		rc = quiet_call(s, calls.line);
	if (!rc && args.len)
		rc = quiet_call(s, args.line);
	if (who) /* the start said the rest */
		goto out;
	if (!rc && left.noret)
		fprintf(stderr, "xprobes: trace start: %zu function%s: no return value (more than %d "
				"arguments and return values)\n", left.noret, left.noret == 1 ? "" : "s",
			TA_MAX_ITEMS);
	if (!rc && left.past)
		fprintf(stderr, "xprobes: trace start: %zu functions without their arguments (the "
				"agent takes them for %u functions at most)\n", left.past,
			XP_TRACE_ARG_MAX_FUNCS);
	for (size_t i = 0; !rc && o->args && i < o->args->nrules; i++)
		if (!o->args->rule[i].matched) {
			fprintf(stderr, "xprobes: trace start: no traced function%s matches -A/-R "
					"'%s'\n", libcalls ? " or library call" : "",
				sanitize_text(o->args->rule[i].pattern));
			say_not_traced(s);
			rc = 1;
		}
out:
	free(sites.line);
	free(calls.line);
	free(args.line);
	trace_names_free(names);
	trace_objects_free(objs, nobjs);
	return rc;
}

int trace_args_resolve(struct session *s, struct argspecs *args, int libcalls, const char *who)
{
	struct trace_opts o = { .args = args };
	size_t selected;
	if (libcalls)
		snprintf(o.agent_args, sizeof(o.agent_args), " --libcall");
	return select_sites(s, &o, 0, &selected, who);
}

/* -A/-R/-a as given, for a later session's reader (trace_argopts.c); an
 * agent that cannot keep them still records the values. */
static void keep_options(struct session *s, const struct trace_opts *o)
{
	const char *lost = o->args_long ? "more than the 4 KiB of them the agent keeps" : NULL;
	char *cmd = NULL, *text = NULL;
	if (!lost && asprintf(&cmd, "trace args --options %s", o->args_text) < 0)
		lost = "out of memory";
	if (!lost && session_call(s, cmd, &text) != 0)
		lost = "the agent cannot keep them";
	if (lost)
		fprintf(stderr, "xprobes: trace start: -A/-R/-a: %s: another xprobes session's trace "
				"cat shows the calls without their values\n", lost);
	free(cmd);
	free(text);
}

int trace_start(struct session *s, const struct trace_opts *o, FILE *say)
{
	if (trace_seccomp_check(s->pid))
		return 1;
	int rc = quiet_call(s, "trace select none"); /* none: every site */
	/* The agent forgets earlier specs; one that takes none (an older
	 * agent) is fine as long as none is asked. */
	char *text = NULL;
	int args_rc = session_call(s, "trace args none", &text);
	if (args_rc > 0 && o->args && text && strstr(text, "unknown subcommand")) {
		fprintf(stderr, "xprobes: trace start: the agent in process %d is older than "
				"arguments and return values (-A/-R/-a): start without them, or "
				"trace a process started with this version's agent\n", (int)s->pid);
		rc = 1;
	} else if (args_rc < 0 || (args_rc && o->args)) {
		fprintf(stderr, "xprobes: trace args none: %s", text && *text ? sanitize_text(text)
			: "failed\n");
		rc = args_rc < 0 ? -1 : 1;
	}
	free(text);
	text = NULL;
	int filter = o->ninclude || o->nexclude;
	if (rc == 0 && (filter || o->args)) {
		size_t selected;
		rc = select_sites(s, o, filter, &selected, NULL);
		if (rc == 0 && filter && !selected) {
			fprintf(stderr, "xprobes: trace start: no traced function matches -F/-N\n");
			say_not_traced(s);
			return 1;
		}
	}
	if (rc)
		return rc;
	if (o->args)
		keep_options(s, o);
	/* The rings within what the target's memory cgroup can hold. */
	char args[sizeof(o->agent_args)];
	snprintf(args, sizeof(args), "%s", o->agent_args);
	if (trace_fit_memory(s->pid, args, sizeof(args), "trace start") != 0)
		return 1;
	char cmd[600];
	/* The filters were checked (or the user said not to): the agent
	 * refuses a process under seccomp otherwise. */
	snprintf(cmd, sizeof(cmd), "trace start --seccomp-checked%s", args);
	rc = session_call(s, cmd, &text);
	if (text)
		fputs(sanitize_text(text), rc == 0 ? say : stderr);
	free(text);
	return rc;
}
