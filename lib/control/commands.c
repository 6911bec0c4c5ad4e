/* SPDX-License-Identifier: MIT */
/* The agent's command language: one line in, text and a status out. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <stdio.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"

#define MODULE_REPLY_LIMIT (1024 * 1024)

struct command {
	const char *name;
	const char *usage;
	const char *help;
	int (*run)(char *args, struct textbuf *out);
	int (*run_wait)(char *args, struct textbuf *out, struct xp_wait **w);
};

static const struct command commands[];
static long long command_timeout_ms(void);


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
	tb_printf(out, "xprobes agent %s (site ABI %d, module ABI %d)\n", XPROBES_VERSION,
		  XPROBES_SITE_ABI, XPROBES_MODULE_ABI);
	return XP_OK;
}

static int cmd_socket(char *args, struct textbuf *out)
{
	if (!no_more_args(args, "socket", out))
		return XP_ERR;
	xp_sockdir_describe(out);
	return XP_OK;
}

/* 1 if GLOB (NULL: none given) is well formed; else says why not, for
 * command NAME. */
static int glob_ok(const char *name, struct textbuf *out, const char *glob)
{
	const char *why = glob ? xp_glob_error(glob) : NULL;
	if (why)
		tb_printf(out, "%s: '%s' is not a valid glob: %s\n", name, glob, why);
	return !why;
}

static int cmd_objects(char *args, struct textbuf *out)
{
	const char *glob = next_word(&args);
	if (!no_more_args(args, "objects", out) || !glob_ok("objects", out, glob))
		return XP_ERR;
	for (size_t i = 0; i < xp_agent.nobjects; i++) {
		struct xp_object *o = xp_agent.objects[i];
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
	char *colon = xp_glob_colon(pat);
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
			  xp_module_runs(a->mod) ? '*' : '-', s->fullname, s->types, where,
			  a->probe->glob, a->probe->handler_name, a->mod->path,
			  a->mod->unloading ? " (unloading)" : a->mod->enabled ? "" : " (disabled)");
	}
}

static int cmd_sites(char *args, struct textbuf *out)
{
	const char *objglob, *siteglob;
	char *pat = next_word(&args);
	if (!no_more_args(args, "sites", out) || !glob_ok("sites", out, pat))
		return XP_ERR;
	char pat_copy[1024];
	snprintf(pat_copy, sizeof(pat_copy), "%s", pat ? pat : "");
	/* Split outside bracket sets, the parts of a well formed pattern are
	 * well formed too. */
	split_pattern(pat, &objglob, &siteglob);
	/* "memcached:*" is more often provider:glob than object:glob: when
	 * the left part names no object, the whole pattern is a site glob. */
	if (objglob) {
		int any = 0;
		for (size_t i = 0; i < xp_agent.nobjects && !any; i++)
			any = xp_object_matches(xp_agent.objects[i], objglob);
		if (!any) {
			objglob = NULL;
			siteglob = pat_copy;
		}
	}
	for (size_t i = 0; i < xp_agent.nobjects; i++) {
		struct xp_object *o = xp_agent.objects[i];
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

/* load [--session] PATH [--session]: with --session the module belongs to
 * this connection and is unloaded when it closes, however it closes (a
 * tool killed by SIGKILL included), so a tool that dies leaves the
 * process unslowed. */
static int cmd_load(char *args, struct textbuf *out)
{
	const char *path = NULL, *w;
	int session = 0, extra = 0;
	while ((w = next_word(&args))) {
		if (strcmp(w, "--session") == 0)
			session = 1;
		else if (!path)
			path = w;
		else
			extra = 1;
	}
	if (!path || extra) {
		tb_puts(out, "usage: load [--session] PATH\n");
		return XP_ERR;
	}
	if (session && !xp_agent.session) {
		tb_puts(out, "load: --session needs a control connection\n");
		return XP_ERR;
	}
	int rc = xp_module_load(path, out); /* > 0: loaded, some probes refused */
	if (rc >= 0 && session)
		xp_agent.modules[xp_agent.nmodules - 1]->owner = xp_agent.session;
	return rc ? XP_ERR : XP_OK;
}

void xp_session_end(unsigned long id)
{
	xp_trace_session_end(id, &xp_agent.pending);
	for (size_t i = 0; i < xp_agent.nmodules; i++) {
		struct xp_module *m = xp_agent.modules[i];
		if (!id || m->owner != id)
			continue;
		int rc = m->unloading ? 0 : xp_module_unload_begin(m);
		if (rc == 0) {
			m->owner = 0;
		} else if (id != XP_SESSION_ENDED) { /* said once; retried quietly */
			m->owner = XP_SESSION_ENDED;
			tb_printf(&xp_agent.pending, "%s: its session ended but unloading failed: %s; "
				  "retried until it goes\n", m->name, strerror(-rc));
		}
	}
}

static int cmd_modules(char *args, struct textbuf *out)
{
	const char *glob = next_word(&args);
	if (!no_more_args(args, "modules", out) || !glob_ok("modules", out, glob))
		return XP_ERR;
	for (size_t i = 0; i < xp_agent.nmodules; i++) {
		struct xp_module *m = xp_agent.modules[i];
		if (glob && fnmatch(glob, m->name, 0) && fnmatch(glob, m->path, 0))
			continue;
		tb_printf(out, "%c %s (%s): %u probe%s, %zu attachment%s%s%s%s\n",
			  xp_module_runs(m) ? '*' : ' ', m->name, m->path, m->desc->nprobes,
			  m->desc->nprobes == 1 ? "" : "s", m->nattached,
			  m->nattached == 1 ? "" : "s",
			  m->desc->command ? ", has commands" : "",
			  m->owner == XP_SESSION_ENDED ? ", its session ended: unload retried" :
			  m->owner ? ", unloaded when its session ends" : "",
			  !m->unloading ? "" : m->commands ? ", unloading (a command still runs)"
							   : ", unloading (a thread is still in a handler)");
	}
	return XP_OK;
}

static size_t probe_site_count(const struct xp_module *m,
			       const struct xprobes_probe_desc *p)
{
	size_t n = 0;
	for (size_t i = 0; i < xp_agent.nobjects; i++)
		for (size_t j = 0; j < xp_agent.objects[i]->nsites; j++) {
			const struct xp_site *s = xp_agent.objects[i]->sites[j];
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
	if (!no_more_args(args, "probes", out) || !glob_ok("probes", out, pat))
		return XP_ERR;
	split_pattern(pat, &modglob, &probeglob);
	for (size_t i = 0; i < xp_agent.nmodules; i++) {
		struct xp_module *m = xp_agent.modules[i];
		if (modglob && fnmatch(modglob, m->name, 0) && fnmatch(modglob, m->path, 0))
			continue;
		for (unsigned j = 0; j < m->desc->nprobes; j++) {
			const struct xprobes_probe_desc *p = &m->desc->probes[j];
			if (probeglob && fnmatch(probeglob, p->glob, 0) &&
			    fnmatch(probeglob, p->handler_name, 0))
				continue;
			size_t n = probe_site_count(m, p);
			char *types = sig_canonical_dup(p->types);
			tb_printf(out, "%c %s: %s -> %s(%s): %zu site%s\n",
				  xp_module_runs(m) ? '*' : ' ', m->name, p->glob,
				  p->handler_name, types ? types : p->types, n, n == 1 ? "" : "s");
			free(types);
		}
	}
	return XP_OK;
}

/* ---- commands that finish later ---------------------------------------
 *
 * disable and unload wait for a grace period, and a module's command runs
 * on a thread of its own: the control thread never blocks on either.  The
 * command returns XP_WAIT with a wait object, and the control loop polls
 * it (xp_command_poll) between serving other clients.  Past its deadline
 * the client is told what is still awaited and on which thread, and the
 * operation goes on in the background.
 */

#define WAIT_REPORT_MS 1000          /* disable, unload: say what we wait for */
#define COMMAND_TIMEOUT_MS 10000     /* a module's command */
#define MAX_JOBS 8                   /* module commands running or queued */

enum wait_kind { WAIT_DISABLE, WAIT_UNLOAD, WAIT_JOB };

/* A module command on its own thread.  The thread writes reply and then
 * done; everything else is the control thread's. */
struct job {
	struct xp_module *m;
	char *args;
	struct textbuf reply;
	int started;
	int done;          /* atomic: the thread has returned from the module */
	pid_t tid;         /* atomic: the thread, once it runs */
	int abandoned;     /* nobody waits for the reply any more */
	int failed;        /* never ran: the reply says why */
	long long since;
	struct job *next;
};
static struct job *jobs;
static int njobs;

struct xp_wait {
	enum wait_kind kind;
	unsigned module_id;
	char *name;
	unsigned long ticket;
	struct job *job;
	long long deadline;
};

/* XPROBES_COMMAND_TIMEOUT_MS in the target's environment overrides the
 * limit (tests; a module known to be slow). */
static long long command_timeout_ms(void)
{
	static long long ms;
	if (!ms) {
		const char *e = getenv("XPROBES_COMMAND_TIMEOUT_MS");
		long long v = e ? atoll(e) : 0;
		ms = v > 0 ? v : COMMAND_TIMEOUT_MS;
	}
	return ms;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct xp_module *module_by_id(unsigned id)
{
	for (size_t i = 0; i < xp_agent.nmodules; i++)
		if (xp_agent.modules[i]->id == id)
			return xp_agent.modules[i];
	return NULL;
}

/* The wait object is made before the change it waits for, so that a
 * failure to make it leaves nothing changed. */
static struct xp_wait *wait_new(enum wait_kind kind, const struct xp_module *m,
				long long timeout_ms, struct textbuf *out)
{
	struct xp_wait *w = xp_calloc(1, sizeof(*w));
	char *name = xp_strdup(m->name);
	if (!w || !name) {
		free(w);
		free(name);
		tb_printf(out, "out of memory; %s is as it was\n", m->name);
		return NULL;
	}
	*w = (struct xp_wait){ kind, m->id, name, 0, NULL, now_ms() + timeout_ms };
	return w;
}

static void wait_free(struct xp_wait *w)
{
	free(w->name);
	free(w);
}

static struct xp_module *module_arg(char **args, const char *cmd, struct textbuf *out)
{
	const char *name = next_word(args);
	if (!name) {
		tb_printf(out, "usage: %s MODULE%s\n", cmd, strcmp(cmd, "command") ? "" : " [ARGS]");
		return NULL;
	}
	struct xp_module *m = xp_module_find(name, out);
	if (m && m->unloading) {
		tb_printf(out, "%s is being unloaded (see 'modules')\n", m->name);
		return NULL;
	}
	return m;
}

static int cmd_enable_disable(char *args, struct textbuf *out, struct xp_wait **w, int enable)
{
	const char *cmd = enable ? "enable" : "disable";
	struct xp_module *m = module_arg(&args, cmd, out);
	if (!m || !no_more_args(args, cmd, out))
		return XP_ERR;
	struct xp_wait *wait = NULL;
	if (!enable && m->enabled && !(wait = wait_new(WAIT_DISABLE, m, WAIT_REPORT_MS, out)))
		return XP_ERR;
	unsigned long ticket = 0;
	int rc = xp_module_set_enabled(m, enable, &ticket);
	if (rc) {
		if (wait)
			wait_free(wait);
		if (rc == -EALREADY) {
			tb_printf(out, "%s was already %sd\n", m->name, cmd);
			return XP_OK;
		}
		tb_printf(out, "%s: %s; %s is as it was\n", cmd, strerror(-rc), m->name);
		return XP_ERR;
	}
	if (enable) {
		tb_printf(out, "enabled %s\n", m->name);
		return XP_OK;
	}
	wait->ticket = ticket;
	*w = wait;
	return XP_WAIT;
}

static int cmd_enable(char *args, struct textbuf *out, struct xp_wait **w)
{
	return cmd_enable_disable(args, out, w, 1);
}

static int cmd_disable(char *args, struct textbuf *out, struct xp_wait **w)
{
	return cmd_enable_disable(args, out, w, 0);
}

static int cmd_unload(char *args, struct textbuf *out, struct xp_wait **w)
{
	struct xp_module *m = module_arg(&args, "unload", out);
	if (!m || !no_more_args(args, "unload", out))
		return XP_ERR;
	struct xp_wait *wait = wait_new(WAIT_UNLOAD, m, WAIT_REPORT_MS, out);
	if (!wait)
		return XP_ERR;
	int rc = xp_module_unload_begin(m);
	if (rc) {
		wait_free(wait);
		tb_printf(out, "unload: %s; %s is as it was\n", strerror(-rc), m->name);
		return XP_ERR;
	}
	*w = wait;
	return XP_WAIT;
}

/* Module commands write through a plain function pointer: each job's
 * thread has its own reply. */
static __thread struct textbuf *module_reply;

static int module_out(const char *msg)
{
	if (!module_reply || !msg)
		return -1;
	return tb_puts(module_reply, msg);
}

static void *job_thread(void *arg)
{
	struct job *j = arg;
	xp_trace_thread_exclude();
	__atomic_store_n(&j->tid, gettid(), __ATOMIC_RELAXED);
	module_reply = &j->reply;
	j->m->desc->command(j->args, module_out);
	module_reply = NULL;
	__atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Start j on a thread of its own.  0 or a negative errno. */
static int job_start(struct job *j)
{
	int rc = xp_thread_start(job_thread, j, "xprobes-cmd");
	if (rc)
		return rc;
	j->started = 1;
	j->since = now_ms();
	return 0;
}

static int job_running_for(const struct xp_module *m)
{
	for (struct job *j = jobs; j; j = j->next)
		if (j->m == m && j->started && !__atomic_load_n(&j->done, __ATOMIC_ACQUIRE))
			return 1;
	return 0;
}

static void job_free(struct job *j)
{
	for (struct job **p = &jobs; *p; p = &(*p)->next) {
		if (*p == j) {
			*p = j->next;
			break;
		}
	}
	njobs--;
	j->m->commands--;
	tb_free(&j->reply);
	free(j->args);
	free(j);
}

/* One command per module at a time (modules need not be thread-safe):
 * start queued jobs whose module is free; free abandoned ones that ended.
 * Returns 1 while any job exists. */
int xp_jobs_progress(void)
{
	for (struct job *j = jobs, *next; j; j = next) {
		next = j->next;
		if (j->started && j->abandoned && __atomic_load_n(&j->done, __ATOMIC_ACQUIRE))
			job_free(j);
	}
	/* Oldest first: the list is kept in arrival order. */
	for (struct job *j = jobs; j; j = j->next) {
		if (j->started || job_running_for(j->m))
			continue;
		int rc = job_start(j);
		if (rc) {
			tb_reset(&j->reply);
			tb_printf(&j->reply, "command: cannot start a thread for %s's command: %s\n",
				  j->m->name, strerror(-rc));
			j->started = 1;
			j->failed = 1;
			__atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
		}
	}
	return jobs != NULL;
}

void xp_jobs_after_fork_child(void)
{
	/* Their threads did not survive fork(): the modules' commands never
	 * return here.  Finish them as failed, for nobody. */
	for (struct job *j = jobs; j; j = j->next) {
		j->started = 1;
		j->abandoned = 1;
		__atomic_store_n(&j->done, 1, __ATOMIC_RELAXED);
	}
}

static int cmd_command(char *args, struct textbuf *out, struct xp_wait **w)
{
	struct xp_module *m = module_arg(&args, "command", out);
	if (!m)
		return XP_ERR;
	if (!m->desc->command) {
		tb_printf(out, "module %s has no command handler\n", m->name);
		return XP_ERR;
	}
	if (njobs >= MAX_JOBS) {
		tb_printf(out, "command: %d module commands are running or queued; try again later\n",
			  njobs);
		return XP_ERR;
	}
	struct job *j = xp_calloc(1, sizeof(*j));
	char *copy = xp_strdup(args);
	struct xp_wait *wait = j && copy ? wait_new(WAIT_JOB, m, command_timeout_ms(), out) : NULL;
	if (!wait) {
		free(j);
		free(copy);
		tb_puts(out, "command: out of memory\n");
		return XP_ERR;
	}
	j->m = m;
	j->args = copy;
	tb_init(&j->reply, MODULE_REPLY_LIMIT);
	struct job **tail = &jobs;
	while (*tail)
		tail = &(*tail)->next;
	*tail = j;
	njobs++;
	m->commands++;
	wait->job = j;
	*w = wait;
	xp_jobs_progress();
	return XP_WAIT;
}

static void job_reply(struct job *j, struct textbuf *out)
{
	struct textbuf *r = &j->reply;
	if (r->len)
		tb_append(out, r->data, r->len);
	if (r->len && r->data[r->len - 1] != '\n')
		tb_puts(out, "\n");
	if (r->truncated)
		tb_puts(out, "(module output truncated at 1 MiB)\n");
}

int xp_command_poll(struct xp_wait *w, struct textbuf *out)
{
	int status = XP_OK;
	switch (w->kind) {
	case WAIT_DISABLE:
		if (!xp_sync_done(w->ticket))
			return XP_WAIT;
		tb_printf(out, "disabled %s\n", w->name);
		break;
	case WAIT_UNLOAD:
		xp_modules_reap();
		if (module_by_id(w->module_id))
			return XP_WAIT;
		tb_printf(out, "unloaded %s\n", w->name);
		break;
	case WAIT_JOB:
		if (!__atomic_load_n(&w->job->done, __ATOMIC_ACQUIRE))
			return XP_WAIT;
		job_reply(w->job, out);
		status = w->job->failed ? XP_ERR : XP_OK;
		job_free(w->job);
		break;
	}
	wait_free(w);
	return status;
}

long long xp_command_deadline(const struct xp_wait *w)
{
	return w->deadline;
}

/* What an unfinished operation waits for, for a user. */
static void describe_wait(const struct xp_wait *w, struct textbuf *out)
{
	pid_t tid = 0;
	struct xp_module *m = module_by_id(w->module_id);
	if (w->kind == WAIT_JOB) {
		tid = __atomic_load_n(&w->job->tid, __ATOMIC_RELAXED);
		tb_printf(out,
			  "command: %s's command has not returned after %lld ms; it goes on in "
			  "thread %d, and %s cannot be unloaded until it returns\n",
			  w->name, now_ms() - w->job->since, (int)tid, w->name);
		return;
	}
	xp_sync_progress(&tid);
	if (m && m->commands && w->kind == WAIT_UNLOAD)
		tb_printf(out,
			  "unload: %s is detached from every site but one of its commands is still "
			  "running; it is unmapped when that returns (see 'modules')\n",
			  w->name);
	else
		tb_printf(out,
			  "%s: %s's handlers are detached, but thread %d is still inside a handler "
			  "(grace periods are shared: it may be another module's); %s when it "
			  "returns (see 'modules')\n",
			  w->kind == WAIT_UNLOAD ? "unload" : "disable", w->name, (int)tid,
			  w->kind == WAIT_UNLOAD ? "it is unmapped" : "it is fully disabled");
}

int xp_command_abandon(struct xp_wait *w, struct textbuf *out)
{
	if (out)
		describe_wait(w, out);
	if (w->kind == WAIT_JOB)
		w->job->abandoned = 1;
	wait_free(w);
	return XP_ERR;
}

/* Names for the shell's tab completion, one per line. */
static int cmd_complete(char *args, struct textbuf *out)
{
	const char *what = next_word(&args);
	if (what && strcmp(what, "modules") == 0) {
		for (size_t i = 0; i < xp_agent.nmodules; i++)
			tb_printf(out, "%s\n", xp_agent.modules[i]->name);
	} else if (what && strcmp(what, "sites") == 0) {
		for (size_t i = 0; i < xp_agent.nobjects; i++)
			for (size_t j = 0; j < xp_agent.objects[i]->nsites; j++)
				tb_printf(out, "%s\n", xp_agent.objects[i]->sites[j]->fullname);
	} else {
		tb_puts(out, "usage: complete modules|sites\n");
		return XP_ERR;
	}
	return XP_OK;
}

static const struct command commands[] = {
	{ "help", "help", "list commands", cmd_help, NULL },
	{ "version", "version", "agent version", cmd_version, NULL },
	{ "socket", "socket", "where the agent listens", cmd_socket, NULL },
	{ "objects", "objects [GLOB]", "loaded objects that have sites", cmd_objects, NULL },
	{ "sites", "sites [OBJGLOB:][SITEGLOB]", "sites and what is attached (*)", cmd_sites, NULL },
	{ "load", "load [--session] PATH", "load a probe module and attach its probes", cmd_load, NULL },
	{ "modules", "modules [GLOB]", "loaded modules (* = enabled)", cmd_modules, NULL },
	{ "probes", "probes [MODGLOB:][PROBEGLOB]", "probes of loaded modules", cmd_probes, NULL },
	{ "enable", "enable MODULE", "enable a module's handlers", NULL, cmd_enable },
	{ "disable", "disable MODULE", "disable them (returns once none runs)", NULL, cmd_disable },
	{ "unload", "unload MODULE", "detach and unmap once quiescent", NULL, cmd_unload },
	{ "command", "command MODULE [ARGS]", "run a module's command", NULL, cmd_command },
	{ "trace", "trace start|stop|status|clear|buffers ...", "function-graph tracer",
	  xp_trace_command, NULL },
	{ "complete", "complete modules|sites", NULL, cmd_complete, NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

int xp_command_start(const char *line, struct textbuf *out, struct xp_wait **w)
{
	*w = NULL;
	char *copy = xp_strdup(line);
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
			xp_rescan(&xp_agent.pending);
			/* What rescans found (a probe refused on a library dlopen()ed
			 * since) goes with the next reply the user sees: not the
			 * tool's `version` handshake, nor tab completion, nor a
			 * module's command, whose reply tools parse (mctop, mclat). */
			if (xp_agent.pending.len && strcmp(name, "version") && strcmp(name, "complete") &&
			    strcmp(name, "command")) {
				tb_puts(out, "since the last command:\n");
				tb_append(out, xp_agent.pending.data, xp_agent.pending.len);
				if (xp_agent.pending.truncated)
					tb_puts(out, "(more not kept)\n");
				tb_reset(&xp_agent.pending);
			}
			rc = c->run ? c->run(args, out) : c->run_wait(args, out, w);
		} else {
			tb_printf(out, "unknown command '%s' (try 'help')\n", name);
		}
	}
	free(copy);
	return rc;
}

int xp_run_command(const char *line, struct textbuf *out)
{
	struct xp_wait *w;
	int rc = xp_command_start(line, out, &w);
	for (unsigned spins = 0; rc == XP_WAIT; spins++) {
		int busy = xp_sync_progress(NULL) | xp_jobs_progress();
		rc = xp_command_poll(w, out);
		if (rc == XP_WAIT && busy && spins > 100) {
			struct timespec ts = { 0, 100 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
	return rc;
}
