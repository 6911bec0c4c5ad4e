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

#include "../../lib/base/base.h"

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

/* Sites whose function names pass -F/-N, sent as `trace select` lines
 * each below the agent's request limit.  *selected: how many. */
static int select_sites(struct session *s, const struct trace_opts *o, size_t *selected)
{
	struct trace_object *objs;
	size_t nobjs;
	*selected = 0;
	if (trace_objects(s, &objs, &nobjs) != 0)
		return 1;
	struct trace_names *names = trace_names_new(s);
	char *line = malloc(XP_MAX_REQUEST);
	int rc = names && line ? 0 : 1;
	size_t len = 0;
	for (size_t i = 0; i < nobjs && !rc; i++) {
		/* nsites: at most TRACE_MAX_SITES (trace_parse.c). */
		uint64_t *table = calloc(objs[i].nsites ? objs[i].nsites : 1, sizeof(*table));
		trace_names_add_object(names, objs[i].base, objs[i].path);
		if (!table ||
		    trace_vm_read(s, objs[i].table, table, objs[i].nsites * sizeof(*table))) {
			fprintf(stderr, "xprobes: trace start: cannot read the site table of %s: %s\n",
				sanitize_text(objs[i].path), table ? strerror(errno) : "no memory");
			rc = 1;
		}
		for (size_t k = 0; !rc && k < objs[i].nsites; k++) {
			const char *name = trace_names_func(names, table[k]);
			if ((o->ninclude && !trace_glob_any(o->include, o->ninclude, name)) ||
			    trace_glob_any(o->exclude, o->nexclude, name))
				continue;
			if (len > XP_MAX_REQUEST - 64) {
				rc = quiet_call(s, line);
				len = 0;
			}
			if (!len)
				len = (size_t)snprintf(line, XP_MAX_REQUEST, "trace select");
			len += (size_t)snprintf(line + len, XP_MAX_REQUEST - len, " 0x%" PRIx64, table[k]);
			(*selected)++;
		}
		free(table);
	}
	if (!rc && trace_names_refused(names))
		rc = 1; /* the sites of a refused file have no names to match */
	if (!rc && len)
		rc = quiet_call(s, line);
	free(line);
	trace_names_free(names);
	trace_objects_free(objs, nobjs);
	return rc;
}

int trace_start(struct session *s, const struct trace_opts *o, FILE *say)
{
	if (trace_seccomp_check(s->pid))
		return 1;
	int rc = quiet_call(s, "trace select none"); /* none: every site */
	if (rc == 0 && (o->ninclude || o->nexclude)) {
		size_t selected;
		rc = select_sites(s, o, &selected);
		if (rc == 0 && !selected) {
			fprintf(stderr, "xprobes: trace start: no traced function matches -F/-N\n");
			return 1;
		}
	}
	if (rc)
		return rc;
	/* The rings within what the target's memory cgroup can hold. */
	char args[sizeof(o->agent_args)];
	snprintf(args, sizeof(args), "%s", o->agent_args);
	if (trace_fit_memory(s->pid, args, sizeof(args), "trace start") != 0)
		return 1;
	char cmd[600], *text = NULL;
	/* The filters were checked (or the user said not to): the agent
	 * refuses a process under seccomp otherwise. */
	snprintf(cmd, sizeof(cmd), "trace start --seccomp-checked%s", args);
	rc = session_call(s, cmd, &text);
	if (text)
		fputs(sanitize_text(text), rc == 0 ? say : stderr);
	free(text);
	return rc;
}
