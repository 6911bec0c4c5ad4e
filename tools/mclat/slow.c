/* SPDX-License-Identifier: MIT */
/* mclat --slow THRESHOLD -o DIR: the function graph of every request slower
 * than THRESHOLD, each one graph named "COMMAND KEY TIME" under the worker
 * that served it, in a uftrace data directory.
 *
 * Two parts.  In memcached, modules/mclat.so (`slow NS`) opens the
 * tracer's request recording at each process__command__start and closes
 * it at process__command__end, keeping it if the command took NS or more.
 * Outside, the recorder that drains the agent's rings into DIR is
 * `xprobes PID trace record -o DIR --requests`, run as a child: mclat may
 * not link xprobes' objects (tools/LAYERS), and moving the recorder (the
 * drainer, the uftrace writer, the symbol tables) into tools/common for
 * one caller would be most of xprobes; the child is the same recorder
 * users run, with its losses and summary on mclat's stderr.  The child
 * dies with mclat (PR_SET_PDEATHSIG: SIGTERM, which it takes as Ctrl-C,
 * stopping the tracer and finishing DIR), and its agent session carries
 * --session, so tracing also stops if the child itself is killed.
 *
 * Beside the graphs, the kernel's stages of the slow read batches mclat
 * measured (all with --all, those in the windows when sampling) go to
 * DIR/mclat-stages.json: a batch is matched to its graph by thread and
 * time, which the recorder's clock and mclat's share (CLOCK_MONOTONIC). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/common.h"
#include "mclat.h"
#include "slow.h"

/* How long the recorder may take to start tracing (making its rings,
 * patching memcached's functions) before mclat gives up. */
#define START_TIMEOUT_MS 60000

int slow_parse_threshold(const char *arg, uint64_t *ns)
{
	static const struct {
		const char *unit;
		double ns;
	} units[] = { { "ns", 1 }, { "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 }, { "", 1e3 } };
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (errno || end == arg || !(v > 0) || isinf(v) || *arg == '-' || *arg == '+')
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].unit) != 0)
			continue;
		double n = v * units[i].ns;
		if (n < 1 || n > 86400e9) /* under a nanosecond, or over a day */
			return -1;
		*ns = (uint64_t)n;
		return 0;
	}
	return -1;
}

static char *xprobes_path(void)
{
	static const char *const candidates[] = { "%s/xprobes" };
	char *found = exe_dir_find(candidates, 1);
	if (!found)
		fprintf(stderr, "mclat: --slow needs the xprobes program next to mclat\n");
	return found;
}

static int tracing_on(struct session *s)
{
	char *reply = NULL;
	int rc = session_call(s, "trace status", &reply);
	int on = rc == 0 && reply && strstr(reply, "tracing: on\n") &&
		 strstr(reply, "(requests: only what modules keep)");
	free(reply);
	return rc < 0 ? -1 : on;
}

static void stop_child(struct slow *sl)
{
	if (sl->child > 0) {
		kill(sl->child, SIGINT);
		while (waitpid(sl->child, NULL, 0) < 0 && errno == EINTR) {
		}
		sl->child = 0;
	}
}

int slow_start(struct slow *sl, struct session *s, const char *module, const char *dir,
	       uint64_t threshold_ns, int libcalls, unsigned depth)
{
	char *xprobes = xprobes_path();
	if (!xprobes)
		return -1;
	char pid[16], dep[16];
	snprintf(pid, sizeof(pid), "%d", (int)s->pid);
	snprintf(dep, sizeof(dep), "%u", depth);
	/* The recorder's arguments after -o DIR --requests. */
	const char *more[4] = { NULL, NULL, NULL, NULL };
	int nmore = 0;
	if (!libcalls)
		more[nmore++] = "--no-libcall";
	if (depth) {
		more[nmore++] = "-D";
		more[nmore++] = dep;
	}
	pid_t parent = getpid();
	sl->child = fork();
	if (sl->child < 0) {
		fprintf(stderr, "mclat: fork: %s\n", strerror(errno));
		free(xprobes);
		sl->child = 0;
		return -1;
	}
	if (sl->child == 0) {
		/* Its messages are mclat's, on stderr; stdout is mclat's lines. */
		/* Its own process group: a Ctrl-C reaches mclat alone, which
		 * unloads the module before it stops the recorder. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent ||
		    setpgid(0, 0) != 0 || dup2(2, 1) < 0)
			_exit(127);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* Library calls left out unless asked for: at saturation they
		 * were 40% of what recording every request cost memcached
		 * (docs/experiments.md), and a hooked slot costs a thread
		 * with no request open too. */
		execl(xprobes, xprobes, pid, "trace", "record", "-o", dir, "--requests", more[0],
		      more[1], more[2], (char *)NULL);
		fprintf(stderr, "mclat: cannot run %s: %s\n", xprobes, strerror(errno));
		_exit(127);
	}
	free(xprobes);
	struct timespec step = { 0, 20 * 1000000 };
	for (int waited = 0;; waited += 20) {
		int status, on = tracing_on(s);
		if (on > 0)
			break;
		if (on < 0 || waitpid(sl->child, &status, WNOHANG) == sl->child) {
			if (on >= 0)
				sl->child = 0;
			fprintf(stderr, "mclat: --slow: the recorder (xprobes %s trace record) did "
					"not start%s\n", pid, on < 0 ? ": memcached went away" : "");
			stop_child(sl);
			return -1;
		}
		if (waited >= START_TIMEOUT_MS || cli_stop) {
			fprintf(stderr, "mclat: --slow: the recorder did not start tracing within "
					"%d s\n", START_TIMEOUT_MS / 1000);
			stop_child(sl);
			return -1;
		}
		nanosleep(&step, NULL);
	}
	if (!libcalls)
		fprintf(stderr, "mclat: --slow: memcached's functions only, no library calls "
				"(--slow-libcalls records them too, at more cost)\n");
	if (depth)
		fprintf(stderr, "mclat: --slow: calls %u deep at most under each request's "
				"command (--slow-depth)\n", depth);
	const char *base = strrchr(module, '/');
	char line[4200], *reply = NULL;
	snprintf(line, sizeof(line), "command %s slow %llu", base ? base + 1 : module,
		 (unsigned long long)threshold_ns);
	int rc = session_call(s, line, &reply);
	if (rc != 0 || !reply || strncmp(reply, "slow ", 5) != 0) {
		fprintf(stderr, "mclat: unexpected answer from the module: %.200s\n",
			reply ? reply : "");
		free(reply);
		stop_child(sl);
		return -1;
	}
	free(reply);
	sl->dir = dir;
	sl->threshold_ns = threshold_ns;
	return 0;
}

void slow_batch(struct slow *sl, const struct lat_batch *b)
{
	if (!sl->threshold_ns || !b->measured[ST_MEMCACHED] || b->ns[ST_MEMCACHED] < sl->threshold_ns ||
	    sl->stages_failed)
		return;
	if (!sl->stages) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/mclat-stages.json", sl->dir);
		sl->stages = fopen(path, "wx");
		if (!sl->stages) {
			fprintf(stderr, "mclat: --slow: %s: %s (the stages are not kept)\n", path,
				strerror(errno));
			sl->stages_failed = 1;
			return;
		}
	}
	print_batch_json(b, sl->stages);
}

int slow_finish(struct slow *sl)
{
	if (sl->stages && fclose(sl->stages) != 0)
		fprintf(stderr, "mclat: --slow: writing %s/mclat-stages.json: %s\n", sl->dir,
			strerror(errno));
	sl->stages = NULL;
	if (sl->child <= 0)
		return 0;
	int status = 0;
	kill(sl->child, SIGINT);
	while (waitpid(sl->child, &status, 0) < 0 && errno == EINTR) {
	}
	sl->child = 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	fprintf(stderr, "mclat: --slow: the recorder failed (%s %d)\n",
		WIFEXITED(status) ? "exit status" : "signal",
		WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	return 1;
}
