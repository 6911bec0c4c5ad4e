/* Recording into a directory (trace_recorder.h).  The pieces: the agent's
 * rings drained by trace_stream.c, written by trace_uftrace.c. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#define RECORD_KIB "65536"
/* And 1 GiB for all of them, unless -B says otherwise: memcached with 64
 * workers gets 16 MiB rings, not 4 GiB; a thread the budget leaves no
 * ring is counted as lost. */
#define RECORD_BUDGET_KIB "1048576"

static volatile sig_atomic_t stop_asked;

static void on_stop(int sig)
{
	(void)sig;
	stop_asked = 1;
}

/* SIGINT and SIGTERM end the recording, not the tool: no SA_RESTART, so
 * a wait in progress returns at once. */
static void catch_stop(struct sigaction old[2])
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	stop_asked = 0;
	sigaction(SIGINT, &sa, &old[0]);
	sigaction(SIGTERM, &sa, &old[1]);
}

static void release_stop(const struct sigaction old[2])
{
	sigaction(SIGINT, &old[0], NULL);
	sigaction(SIGTERM, &old[1], NULL);
}

/* A whole small file of /proc/PID (cmdline: NULs made spaces). */
static char *proc_text(pid_t pid, const char *what)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *text = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		if (n + 4096 + 1 > cap) {
			char *grown = realloc(text, cap = n + 65536);
			if (!grown) {
				free(text);
				fclose(f);
				return NULL;
			}
			text = grown;
		}
		size_t got = fread(text + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
	}
	fclose(f);
	text[n] = '\0';
	if (strcmp(what, "cmdline") == 0)
		for (size_t i = 0; i + 1 < n; i++)
			if (text[i] == '\0')
				text[i] = ' ';
	return text;
}

/* An object's symbols are read from the file the process maps, checked
 * (trace_names_open), never from the path the target names: a hostile
 * target could name a FIFO, or a file only the tool's user may read. */
struct checked {
	int fd;
	char path[32];
};

static const char *checked_open(struct trace_names *names, const char *path, struct checked *c)
{
	c->fd = trace_names_open(names, path);
	if (c->fd < 0)
		return "/dev/null"; /* no symbols: its functions show as addresses */
	snprintf(c->path, sizeof(c->path), "/proc/self/fd/%d", c->fd);
	return c->path;
}

static void checked_close(struct checked *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* Objects the recording names, by load address: one loaded after the
 * start (a dlopen()) is added to the directory (a DLOP line and its
 * symbols) when a pass finds it. */
struct known {
	uint64_t *base;
	size_t n;
};

static int known_has(const struct known *k, uint64_t base)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->base[i] == base)
			return 1;
	return 0;
}

static int add_new_objects(struct session *s, struct uft_writer *w, struct trace_names *names,
			   struct known *k)
{
	struct trace_object *objs;
	size_t nobjs;
	if (trace_objects(s, &objs, &nobjs) != 0)
		return 1;
	int rc = 0;
	for (size_t i = 0; i < nobjs && !rc; i++) {
		if (known_has(k, objs[i].base))
			continue;
		uint64_t *grown = reallocarray(k->base, k->n + 1, sizeof(*grown));
		if (!grown) {
			rc = 1;
			break;
		}
		k->base = grown;
		k->base[k->n++] = objs[i].base;
		struct checked file;
		struct uft_object o = { .path = objs[i].path, .base = objs[i].base,
					.file = checked_open(names, objs[i].path, &file) };
		trace_names_add_object(names, objs[i].base, objs[i].path);
		if (w && uft_object(w, &o) != 0) {
			fprintf(stderr, "xprobes: trace record: %s\n", uft_error(w));
			rc = 1;
		}
		checked_close(&file);
	}
	trace_objects_free(objs, nobjs);
	return rc;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Wait for the next pass: PASS_MS, cut short by a signal or, in the run
 * form, by the program's line.  1 when the program said "exit" or went. */
static int wait_pass(int run_sock, int busy)
{
	struct pollfd p = { .fd = run_sock, .events = POLLIN };
	int ms = busy ? 0 : 5;
	if (run_sock < 0) {
		if (ms) {
			struct timespec pause = { 0, ms * 1000000L };
			nanosleep(&pause, NULL);
		}
		return 0;
	}
	if (poll(&p, 1, ms) <= 0)
		return 0;
	char line[16];
	size_t n = 0;
	char c;
	while (n + 1 < sizeof(line) && read(run_sock, &c, 1) == 1 && c != '\n')
		line[n++] = c;
	line[n] = '\0';
	return 1; /* "exit", or end of file: either way the program is done */
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* DIR, with what uftrace's readers need of the process: its executable,
 * command line, maps, and the symbols of every traced object.  names
 * (kept until the writer closes) names the XProbes sites hit. */
static struct uft_writer *open_writer(struct session *s, const char *dir,
				      struct trace_names **names)
{
	struct trace_object *objs;
	size_t nobjs;
	if (trace_objects(s, &objs, &nobjs) != 0)
		return NULL;
	char exe[4096] = "", link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)s->pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	char *cmdline = proc_text(s->pid, "cmdline"), *maps = proc_text(s->pid, "maps");
	struct uft_object *uo = calloc(nobjs ? nobjs : 1, sizeof(*uo));
	struct checked *files = calloc(nobjs ? nobjs : 1, sizeof(*files));
	struct uft_writer *w = NULL;
	*names = trace_names_new(s->pid);
	if (uo && files && *names) {
		for (size_t i = 0; i < nobjs; i++) {
			uo[i] = (struct uft_object){ .path = objs[i].path, .base = objs[i].base,
						     .file = checked_open(*names, objs[i].path,
									  &files[i]) };
			trace_names_add_object(*names, objs[i].base, objs[i].path);
		}
		struct uft_session us = {
			.pid = (int)s->pid, .exe = exe, .cmdline = cmdline ? cmdline : exe,
			.mono_ns = clock_ns(CLOCK_MONOTONIC), .real_ns = clock_ns(CLOCK_REALTIME),
			.maps = maps, .objects = uo, .nobjects = nobjs,
			.site_name = trace_names_site, .site_ctx = *names,
		};
		if (!(w = uft_open(dir, &us)))
			fprintf(stderr, "xprobes: trace record: %s\n", uft_error(NULL));
	} else {
		fprintf(stderr, "xprobes: trace record: out of memory\n");
	}
	for (size_t i = 0; files && i < nobjs; i++)
		checked_close(&files[i]);
	free(files);
	free(uo);
	free(cmdline);
	free(maps);
	trace_objects_free(objs, nobjs);
	return w;
}

static int sink_thread(void *ctx, int tid, const char *name)
{
	if (uft_thread(ctx, tid, name) == 0)
		return 0;
	fprintf(stderr, "xprobes: trace record: %s\n", uft_error(ctx));
	return -1;
}

static int sink_events(void *ctx, int tid, const struct tf_event *ev, size_t n)
{
	if (uft_append(ctx, tid, ev, n) == 0)
		return 0;
	fprintf(stderr, "xprobes: trace record: %s\n", uft_error(ctx));
	return -1;
}

/* The agent knows `trace start --follow`: asked without its path, it
 * says so (an older one: "unknown option"), and nothing changes. */
static int can_follow(struct session *s)
{
	char *text = NULL;
	int rc = session_call(s, "trace start --follow", &text);
	int yes = rc == 1 && text && strstr(text, "--follow needs");
	free(text);
	return yes;
}

static int w_failed(struct uft_writer *w)
{
	return uft_error(w)[0] != '\0';
}

/* Following: drain the followed rings with the program's clock. */
static int follow_pass(struct trace_follow *f, struct trace_stream *t, int *busy)
{
	int fbusy = 0;
	int rc = trace_follow_pass(f, trace_stream_clock(t), &fbusy);
	*busy |= fbusy;
	return rc;
}

/* Following, the program's first image said "exit" (or exec'd: end of
 * file): tracing stops there as without following, and it may go at
 * once, since its rings stay with the follower; the recording goes on
 * while its children live.  1. */
static int follow_root_exit(struct session *s, int run_sock)
{
	char *text = NULL;
	session_call(s, "trace stop", &text);
	free(text);
	(void)!send(run_sock, "go\n", 3, MSG_NOSIGNAL);
	return 1;
}

int trace_record_dir(struct session *s, const struct trace_opts *o, const char *dir,
		     int run_sock, int *program_exited)
{
	struct trace_names *names = NULL;
	*program_exited = 0;
	if (strstr(o->agent_args, "--overwrite")) {
		/* A flight recorder keeps its newest records for trace cat; a
		 * drainer would copy the same ones again on every pass. */
		fprintf(stderr, "xprobes: trace record: --overwrite does not go with -o DIR "
				"(use trace start --overwrite, then trace cat)\n");
		return 2;
	}
	struct uft_writer *w = open_writer(s, dir, &names);
	if (!w) {
		trace_names_free(names);
		return 1;
	}
	/* The objects uft_open wrote: before the start, since the program
	 * runs on (and may dlopen()) as soon as it is told tracing is on. */
	struct known known = { NULL, 0 };
	if (add_new_objects(s, NULL, names, &known) != 0) {
		uft_close(w);
		trace_names_free(names);
		free(known.base);
		return 1;
	}
	struct trace_opts started = *o;
	size_t len = strlen(started.agent_args);
	/* Unless -b says otherwise, rings of 64 MiB a thread: what fib(30)
	 * writes while the drainer shares this 2-core machine's cores (at
	 * 1 MiB, the trace's default, a third was lost; design.md).  Pages
	 * are only touched as the ring fills. */
	snprintf(started.agent_args + len, sizeof(started.agent_args) - len, "%s%s --session",
		 strstr(started.agent_args, " -b ") ? "" : " -b " RECORD_KIB,
		 strstr(started.agent_args, " -B ") ? "" : " -B " RECORD_BUDGET_KIB);
	struct trace_follow *follow = o->follow;
	if (follow && !can_follow(s)) { /* an older agent: the process alone, as it did */
		fprintf(stderr, "xprobes: trace record: the agent of process %d cannot follow its "
				"children and programs; recording it alone\n", (int)s->pid);
		follow = NULL;
	}
	if (follow) { /* its rings, and its children's, come to the follower */
		len = strlen(started.agent_args);
		snprintf(started.agent_args + len, sizeof(started.agent_args) - len, " --follow %s",
			 trace_follow_path(follow));
	}
	int rc = trace_start(s, &started, stderr);
	if (rc != 0) {
		uft_close(w);
		trace_names_free(names);
		free(known.base);
		return 1;
	}
	/* -d counts from now: making the rings (tens of MiB a thread,
	 * faulted in before the start) must not eat into it. */
	long long until_ms = o->duration_ms ? now_ms() + o->duration_ms : 0;
	if (run_sock >= 0) /* the program waits to be told tracing is on */
		(void)!send(run_sock, "go\n", 3, MSG_NOSIGNAL);
	struct trace_sink sink = { sink_thread, sink_events, w };
	/* -t: calls shorter than MIN_US are left out as they are drained. */
	struct trace_minfilter *mf = o->min_ns ? trace_minfilter_new(o->min_ns, &sink) : NULL;
	if (mf)
		sink = trace_minfilter_sink(mf);
	struct trace_stream *t = o->min_ns && !mf ? NULL : trace_stream_new(s, &sink);
	if (follow)
		trace_follow_bind(follow, s->pid, w, &sink, o, s->timeout_ms);
	int root_done = 0; /* following: the program's first image ended or exec'd */
	struct trace_stream_stats st = { 0 };
	struct sigaction old[2];
	catch_stop(old);
	int busy = 0;
	rc = t ? 0 : 1;
	uint64_t gen = 0;
	while (rc == 0 && !stop_asked && (!until_ms || now_ms() < until_ms)) {
		if (!root_done && (rc = trace_stream_pass(t, &st, &busy)) != 0) {
			if (rc > 0 || !follow)
				break;
			root_done = 1; /* exec'd, or gone: the follower goes on */
			rc = 0;
		}
		if (!root_done && st.stopped) {
			fprintf(stderr, "xprobes: trace record: tracing was stopped in process %d "
					"by another client; what was recorded is kept\n", (int)s->pid);
			break;
		}
		if (!root_done && st.objects_gen != gen) { /* a library loaded since */
			gen = st.objects_gen;
			if ((rc = add_new_objects(s, w, names, &known)) != 0) {
				if (!follow || w_failed(w))
					break;
				rc = 0; /* its agent went (an exec): the follower goes on */
			}
		}
		if (follow && (rc = follow_pass(follow, t, &busy)) != 0)
			break;
		if (wait_pass(root_done ? -1 : run_sock, busy)) {
			*program_exited = 1;
			if (!follow)
				break;
			/* Libraries it loaded since the last pass (an exec'd
			 * program's agent is gone: nothing to ask). */
			if (add_new_objects(s, w, names, &known) != 0 && w_failed(w))
				break;
			root_done = follow_root_exit(s, run_sock);
		}
		if (follow && root_done && !trace_follow_live(follow))
			break;
	}
	if (rc >= 0 && t && root_done) {
		rc = trace_stream_finish(t);
	} else if (rc >= 0 && t) {
		/* Stop, then drain what was written up to the stop.  Calls
		 * still on the stacks record their exits later: not waited for. */
		char *text = NULL;
		int stopped = session_call(s, "trace stop", &text);
		free(text);
		rc = stopped < 0 ? -1 : add_new_objects(s, w, names, &known);
		if (rc == 0)
			rc = trace_stream_pass(t, &st, &busy);
		if (rc == 0)
			rc = trace_stream_finish(t);
	}
	if (follow) {
		trace_follow_stop_all(follow);
		/* Every followed ring once more: what was written up to now,
		 * those of processes that ended included (the follower holds
		 * them); then the drops no record has said yet. */
		uint64_t refused = 0;
		if (follow_pass(follow, t, &busy) != 0 && rc >= 0)
			rc = 1;
		if (trace_follow_finish(follow, &refused) != 0 && rc >= 0)
			rc = 1;
		if (refused)
			fprintf(stderr, "xprobes: trace record: %" PRIu64 " processes or rings of "
					"followed processes left out (past the bounds, or not rings)\n",
				refused);
		trace_follow_stats(follow, &st.records, &st.threads, &st.lost);
	}
	free(known.base);
	release_stop(old);
	uint64_t short_calls = 0;
	if (mf && trace_minfilter_finish(mf, &short_calls) != 0 && rc == 0)
		rc = 1;
	trace_minfilter_free(mf);
	if (rc < 0) {
		fprintf(stderr, "xprobes: trace record: process %d went away; what was drained "
				"before is kept\n", (int)s->pid);
		rc = 0;
	}
	trace_stream_free(t);
	uint64_t skipped = uft_skipped(w);
	if (uft_close(w) != 0) {
		fprintf(stderr, "xprobes: trace record: %s\n", uft_error(NULL));
		rc = 1;
	}
	trace_names_free(names);
	if (skipped)
		fprintf(stderr, "xprobes: trace record: %" PRIu64 " records not kept in uftrace's "
				"format (exits of calls entered before the start)\n", skipped);
	fprintf(stderr, "xprobes: trace record: %" PRIu64 " records of %u thread%s in %s, %" PRIu64
			" lost%s\n", st.records, st.threads, st.threads == 1 ? "" : "s", dir,
		st.lost + st.unbuffered,
		st.lost ? " (the reader fell behind: marked where they were lost)" : "");
	if (mf)
		fprintf(stderr, "xprobes: trace record: %" PRIu64 " calls shorter than %" PRIu64
				".%03" PRIu64 " us left out (-t)\n", short_calls, o->min_ns / 1000,
			o->min_ns % 1000);
	if (st.unbuffered)
		fprintf(stderr, "xprobes: trace record: %" PRIu64 " of them by threads the -B budget "
				"left without a ring\n", st.unbuffered);
	return rc;
}
