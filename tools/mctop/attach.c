/* SPDX-License-Identifier: MIT */
/* Attaching: find memcached, connect to its agent (injecting one when it
 * has none), load modules/mctop.so tied to this connection, and let go of
 * it again.
 *
 * The module is loaded with "load --session": the agent unloads it when
 * the connection that loaded it closes, however mctop ends (SIGKILL
 * included), so memcached is never left slowed by a module nobody reads.
 * An agent too old for --session gets a plain load, unloaded at close.
 * A module another mctop already loaded is used as it is and left alone. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/common.h"
#include "core.h"

#define MODULE_NAME "mctop.so"

/* One agent command; the reply (malloc'd) in *text.  0 ok, 1 failed, -1 lost. */
static int agent_call(struct mctop *m, char **text, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int agent_call(struct mctop *m, char **text, const char *fmt, ...)
{
	char *line;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0) {
		*text = NULL;
		return -1;
	}
	int rc = session_call(&m->s, line, text);
	free(line);
	if (rc >= 0 && !*text)
		rc = -1;
	return rc;
}

static int load_module(struct mctop *m);

/* The module went away under us: another mctop loaded it with --session
 * and ended.  Load it again, ours now; its counts start afresh, which
 * mctop_sample takes as a reset. */
static int module_gone(const char *text)
{
	return strstr(text, "unknown module") || strstr(text, "is being unloaded");
}

char *mctop_call(struct mctop *m, const char *fmt, ...)
{
	char *args, *text;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&args, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	int rc = agent_call(m, &text, "command %s %s", m->module, args);
	if (rc == 1 && module_gone(text) && !m->reloading) {
		m->reloading = 1;
		free(text);
		text = NULL;
		rc = load_module(m) == 0 ? agent_call(m, &text, "command %s %s", m->module, args) : -1;
		m->reloading = 0;
	}
	free(args);
	if (rc == 1) {
		fprintf(stderr, "mctop: the module refused: %s", sanitize_text(text));
		free(text);
		return NULL;
	}
	return rc == 0 ? text : NULL;
}

/* What 'modules mctop.so' says: 0 not loaded, 1 loaded (path in out),
 * 2 still being unloaded, -1 lost. */
static int module_state(struct mctop *m, char *out, size_t outsz)
{
	char *text;
	if (agent_call(m, &text, "modules " MODULE_NAME) != 0) {
		free(text);
		return -1;
	}
	/* "* mctop.so (/path/mctop.so): 9 probes, ..." */
	int state = 0;
	const char *p = strstr(text, " " MODULE_NAME " (");
	if (p) {
		p += strlen(" " MODULE_NAME " (");
		const char *end = strstr(p, "): ");
		if (end && (size_t)(end - p) < outsz) {
			memcpy(out, p, (size_t)(end - p));
			out[end - p] = '\0';
			/* One whose session ended is on its way out too. */
			state = strstr(end, "unloading") || strstr(end, "session ended") ? 2 : 1;
		}
	}
	free(text);
	return state;
}

/* The module's range for --budget ("budget: LEAST bytes to 1 TiB"), said
 * in the unit the user typed: "--budget 1M refused: 4M to 1048576M". */
static void budget_refused(const struct mctop *m, unsigned long long least)
{
	char lo[32], hi[32];
	cli_format_size(least, m->o.budget_shift, 1, lo, sizeof(lo));
	cli_format_size(MCTOP_MAX_BUDGET, m->o.budget_shift, 0, hi, sizeof(hi));
	if (m->o.budget_shift)
		fprintf(stderr, "mctop: --budget %s refused: the module takes %s to %s (its "
				"least, %llu bytes, grows with memcached's threads)\n",
			m->o.budget_arg, lo, hi, least);
	else
		fprintf(stderr, "mctop: --budget %s refused: the module takes %s to %s bytes "
				"(its least grows with memcached's threads)\n",
			m->o.budget_arg, lo, hi);
}

/* Module setting WORD to VALUE for option --WORD, also for a module
 * another mctop loaded: asked for, so done.  The module answers "WORD ..."
 * once set, and why not otherwise ("mctop: budget: MIN bytes to 1 TiB"). */
static int set_module(struct mctop *m, const char *word, const char *value)
{
	char *answer = mctop_call(m, "%s %s", word, value);
	int rc = answer ? 0 : -1;
	size_t n = strlen(word);
	if (answer && (strncmp(answer, word, n) != 0 || answer[n] != ' ')) {
		unsigned long long least;
		if (!strcmp(word, "budget") &&
		    sscanf(answer, "mctop: budget: %llu bytes to", &least) == 1)
			budget_refused(m, least);
		else
			fprintf(stderr, "mctop: --%s %s refused: %s", word, value,
				sanitize_text(answer));
		rc = -1;
	}
	free(answer);
	return rc;
}

/* What the options ask of the module, loaded or found. */
static int configure(struct mctop *m)
{
	char budget[32];
	snprintf(budget, sizeof(budget), "%zu", m->o.budget);
	if (m->o.budget && set_module(m, "budget", budget))
		return -1;
	return m->o.latency ? set_module(m, "latency", m->o.latency) : 0;
}

/* Load the module, or find it loaded.  0, or -1 after a message.
 * Two mctops started together can both see it absent; the one whose load
 * loses the race ("already loaded") looks again and shares the winner's. */
static int load_module(struct mctop *m)
{
	char path[4096];
	int state;
	int lost_races = 0;
again:
	/* A module being unloaded (a killed mctop's, say) goes within moments. */
	for (int i = 0; (state = module_state(m, m->module, sizeof(m->module))) == 2; i++) {
		if (i == 200) {
			fprintf(stderr, "mctop: %s in process %d is still being unloaded after 10 s\n",
				m->module, (int)m->s.pid);
			return -1;
		}
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
	if (state < 0)
		return -1;
	/* The test suite's way to lose that race every time: the first look
	 * reports no module, as if another mctop loaded it just after. */
	if (state == 1 && !lost_races && getenv("MCTOP_TEST_LOSE_LOAD_RACE"))
		state = 0;
	if (state == 1) /* another mctop's: shared, and not ours to unload */
		return configure(m);
	static const char *const beside[] = { "%s/modules/" MODULE_NAME,
					      "%s/../lib/xprobes/modules/" MODULE_NAME };
	char *found = exe_dir_find(beside, sizeof(beside) / sizeof(beside[0]));
	if (!found) {
		fprintf(stderr, "mctop: cannot find the probe module %s beside mctop "
				"(modules/ or ../lib/xprobes/modules/)\n", MODULE_NAME);
		return -1;
	}
	snprintf(path, sizeof(path), "%s", found);
	free(found);
	char *text;
	int rc = agent_call(m, &text, "load --session %s", path);
	if (rc == 1 && text && (strstr(text, "usage") || strstr(text, "unexpected argument") ||
				strstr(text, "must be absolute"))) {
		/* An agent without --session. */
		free(text);
		rc = agent_call(m, &text, "load %s", path);
		m->unload_at_close = rc == 0;
	}
	if (rc == 1 && text && strstr(text, "already loaded") && lost_races++ < 3) {
		free(text);
		goto again;
	}
	if (rc == 1)
		fprintf(stderr, "mctop: loading %s into process %d failed: %s", path,
			(int)m->s.pid, sanitize_text(text));
	free(text);
	if (rc != 0)
		return -1;
	snprintf(m->module, sizeof(m->module), "%s", path);
	return configure(m);
}

struct mctop *mctop_attach(const struct mctop_opts *o)
{
	struct mctop *m = calloc(1, sizeof(*m));
	if (!m) {
		fprintf(stderr, "mctop: out of memory\n");
		return NULL;
	}
	m->o = *o;
	m->s = (struct session){ .fd = -1, .timeout_ms = SESSION_DEFAULT_TIMEOUT_MS };
	pid_t pid = o->pid ? o->pid : attach_find_one("memcached", "mctop");
	if (pid <= 0)
		goto fail;
	if (attach_use_watch(pid, o->port)) {
		/* A stock memcached: its own watch stream, nothing injected. */
		m->s.pid = pid;
		fprintf(stderr, "mctop: process %d has no probe sites (a memcached not built with "
				"xprobes-dtrace): reading its watch stream instead; no latency\n",
			(int)pid);
		if (o->latency)
			fprintf(stderr, "mctop: --latency %s does nothing here: the watch stream has "
					"no latency\n", o->latency);
		m->watch = mctop_watch_start(pid, o->port, o->budget);
		if (!m->watch)
			goto fail;
	} else if (attach_connect(&m->s, pid, "mctop") != 0) {
		goto fail;
	}
	pid = m->s.pid; /* a thread id becomes its process */
	if (o->prefix) {
		char why[512];
		if (mctop_prefix_init(&m->prefix, o->prefix, why, sizeof(why))) {
			fprintf(stderr, "mctop: %s\n", why);
			goto fail;
		}
		m->have_prefix = 1;
	}
	if (!m->watch && load_module(m) != 0)
		goto fail;
	mctop_target_name(pid, m->target, sizeof(m->target));
	m->boot_ticks = mctop_start_ticks(pid);
	return m;
fail:
	mctop_close(m);
	return NULL;
}

void mctop_close(struct mctop *m)
{
	if (!m)
		return;
	if (m->unload_at_close && m->s.fd >= 0) {
		char *text;
		if (agent_call(m, &text, "unload %s", m->module) == 1)
			fprintf(stderr, "mctop: unloading %s failed: %s", m->module,
				sanitize_text(text));
		free(text);
	}
	session_close(&m->s); /* and with it a --session module */
	mctop_watch_stop(m->watch);
	if (m->have_prefix)
		mctop_prefix_free(&m->prefix);
	mctop_raw_free(&m->base);
	mctop_raw_free(&m->prev);
	free(m);
}
