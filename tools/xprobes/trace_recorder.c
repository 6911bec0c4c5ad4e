/* SPDX-License-Identifier: MIT */
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
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>


#define RECORD_KIB "65536"
/* And 1 GiB for all of them, unless -B says otherwise: memcached with 64
 * workers gets 16 MiB rings, not 4 GiB; a thread the budget leaves no
 * ring is counted as lost. */
#define RECORD_BUDGET_KIB "1048576"

static volatile sig_atomic_t stop_asked, stop_by_kernel, overdue, session_fd = -1;

/* A second after the stop (or -d's end, armed at the start), a target
 * still not answering a call (a reply that never comes, or drips) has
 * the session's socket shut: every call on it then fails at once, and
 * the recording ends with what was drained. */
#define OVERDUE_S 1

/* The signal, and whether the kernel sent it (a terminal's ^C reaches
 * the whole foreground process group) or a process did (kill, timeout,
 * a supervisor: to the tool alone, perhaps). */
static void on_stop(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (!stop_asked) {
		alarm(OVERDUE_S);
		stop_by_kernel = si && si->si_code == SI_KERNEL;
	}
	stop_asked = sig;
}

static void on_overdue(int sig)
{
	(void)sig;
	if (session_fd >= 0) {
		overdue = 1;
		shutdown(session_fd, SHUT_RDWR);
	}
}

/* SIGINT and SIGTERM end the recording, not the tool: no SA_RESTART, so
 * a wait in progress returns at once. */
static void catch_stop(struct sigaction old[3], int fd)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_stop;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	stop_asked = 0;
	overdue = 0;
	session_fd = fd;
	sigaction(SIGINT, &sa, &old[0]);
	sigaction(SIGTERM, &sa, &old[1]);
	sa.sa_handler = on_overdue;
	sigaction(SIGALRM, &sa, &old[2]);
}

/* When a pass must end, whatever the target sends (trace_stream_cut):
 * while recording, at a stop asked or -d's end; then, draining what was
 * written up to the stop, FINAL_MS later at most. */
#define FINAL_MS 500

struct deadline {
	long long until_ms; /* -d's end, or 0 */
	long long final_ms; /* the last drain's end, or 0 while recording */
};

static long long now_ms(void);

static int past_deadline(void *ctx)
{
	const struct deadline *d = ctx;
	long long now = now_ms();
	if (d->final_ms)
		return now >= d->final_ms;
	return stop_asked || (d->until_ms && now >= d->until_ms);
}

static void release_stop(const struct sigaction old[3])
{
	alarm(0);
	session_fd = -1;
	sigaction(SIGINT, &old[0], NULL);
	sigaction(SIGTERM, &old[1], NULL);
	sigaction(SIGALRM, &old[2], NULL);
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
 * symbols) when a pass finds it.  At most MAX_OBJECTS, what a recording
 * may hold to be read back (trace_uftrace.c's reader), found through an
 * index: a target listing ever new objects costs no more. */
#define MAX_OBJECTS 65536u

struct known {
	struct u64map index; /* base -> its place */
	size_t n;
	int said;            /* that the rest are left out */
};

static int known_has(const struct known *k, uint64_t base)
{
	uint32_t at;
	return u64map_get(&k->index, base, &at) == 0;
}

static void known_free(struct known *k)
{
	u64map_free(&k->index);
}

/* dl: a stop or deadline ends the loop (the rest are taken next time, if
 * there is one); NULL: before the start, every object. */
static int add_new_objects(struct session *s, struct uft_writer *w, struct trace_names *names,
			   struct known *k, void *dl)
{
	struct trace_object *objs;
	size_t nobjs;
	if (trace_objects(s, &objs, &nobjs) != 0)
		return 1;
	int rc = 0;
	for (size_t i = 0; i < nobjs && !rc && !(dl && past_deadline(dl)); i++) {
		if (known_has(k, objs[i].base))
			continue;
		if (k->n >= MAX_OBJECTS) {
			if (!k->said)
				fprintf(stderr, "xprobes: trace record: process %d lists more than %u "
						"objects; the rest have no names in the recording\n",
					(int)s->pid, MAX_OBJECTS);
			k->said = 1;
			continue;
		}
		if (u64map_put(&k->index, objs[i].base, (uint32_t)k->n++)) {
			rc = 1;
			break;
		}
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
struct uft_writer *trace_open_writer(struct session *s, const char *dir,
				     struct trace_names **names, const struct argspecs *args)
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
	*names = trace_names_new(s);
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
			.site_name = trace_names_site, .site_ctx = *names, .args = args,
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

/* What the bounds on one target left out (trace_uftrace.c, trace_stream.c). */
static void say_bounded(uint64_t deep, uint64_t limited, const struct trace_stream_stats *st)
{
	if (deep)
		fprintf(stderr, "xprobes: trace record: %" PRIu64 " records of calls deeper than "
				"the 1024 a thread's stack keeps left out (marked as lost)\n", deep);
	if (limited)
		fprintf(stderr, "xprobes: trace record: %" PRIu64 " records of threads or probe "
				"sites past the 65536 of each a recording keeps left out\n", limited);
	if (st->left)
		fprintf(stderr, "xprobes: trace record: %" PRIu64 " records still in the rings when "
				"the recording had to end (marked as lost)\n", st->left);
	if (st->refused)
		fprintf(stderr, "xprobes: trace record: %" PRIu64 " buffers listed past the 65536 "
				"a recording drains were left alone\n", st->refused);
}

/* The run form: the program's end into info, before it is closed. */
static void end_run(struct trace_run_ctl *run, struct uft_writer *w)
{
	int status;
	struct rusage ru;
	if (!run || !run->finish)
		return;
	run->stop_signal = stop_asked;
	run->stop_by_terminal = stop_by_kernel;
	if (run->finish(run, &status, &ru))
		uft_exit(w, status, &ru);
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
		     struct trace_run_ctl *run)
{
	struct trace_names *names = NULL;
	int run_sock = run ? run->sock : -1;
	if (strstr(o->agent_args, "--overwrite")) {
		/* A flight recorder keeps its newest records for trace cat; a
		 * drainer would copy the same ones again on every pass. */
		fprintf(stderr, "xprobes: trace record: --overwrite does not go with -o DIR "
				"(use trace start --overwrite, then trace cat)\n");
		return 2;
	}
	struct uft_writer *w = trace_open_writer(s, dir, &names, o->args);
	if (!w) {
		trace_names_free(names);
		return 1;
	}
	/* The objects uft_open wrote: before the start, since the program
	 * runs on (and may dlopen()) as soon as it is told tracing is on. */
	struct known known = { 0 };
	if (add_new_objects(s, NULL, names, &known, NULL) != 0) {
		uft_close(w);
		trace_names_free(names);
		known_free(&known);
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
	if (rc == 0 && uft_write_dbgs(w) != 0) {
		fprintf(stderr, "xprobes: trace record: %s\n", uft_error(w));
		rc = 1;
	}
	if (rc != 0) {
		uft_close(w);
		trace_names_free(names);
		known_free(&known);
		return 1;
	}
	/* -d counts from now: making the rings (tens of MiB a thread,
	 * faulted in before the start) must not eat into it. */
	long long until_ms = o->duration_ms ? now_ms() + o->duration_ms : 0;
	struct sigaction old[3];
	catch_stop(old, s->fd); /* before the program runs on: a signal then is one to it */
	if (run) { /* the program waits to be told tracing is on */
		(void)!send(run_sock, "go\n", 3, MSG_NOSIGNAL);
		run->started = 1;
	}
	struct trace_sink sink = { sink_thread, sink_events, w };
	/* -t: calls shorter than MIN_US are left out as they are drained. */
	struct trace_minfilter *mf = o->min_ns ? trace_minfilter_new(o->min_ns, &sink) : NULL;
	if (mf)
		sink = trace_minfilter_sink(mf);
	struct trace_stream *t = o->min_ns && !mf ? NULL : trace_stream_new(s, &sink);
	if (strstr(o->agent_args, "--requests"))
		trace_stream_quiet(t);
	if (follow)
		trace_follow_bind(follow, s->pid, w, &sink, o, s->timeout_ms);
	int root_done = 0; /* following: the program's first image ended or exec'd */
	struct trace_stream_stats st = { 0 };
	struct deadline dl = { until_ms, 0 };
	if (t)
		trace_stream_cut(t, past_deadline, &dl);
	if (o->duration_ms && !stop_asked)
		alarm((unsigned)((o->duration_ms + 999) / 1000) + OVERDUE_S);
	int busy = 0;
	rc = t ? 0 : 1;
	uint64_t gen = 0;
	while (rc == 0 && !stop_asked && (!until_ms || now_ms() < until_ms)) {
		if (!root_done && (rc = trace_stream_pass(t, &st, &busy)) != 0) {
			if (rc > 0 || !follow)
				break;
			root_done = 1; /* exec'd, or gone: the follower goes on */
			rc = 0;
			if (run) /* not held at its end: nothing to tell it */
				run->let_go = 1;
		}
		if (!root_done && st.stopped) {
			fprintf(stderr, "xprobes: trace record: tracing was stopped in process %d "
					"by another client; what was recorded is kept\n", (int)s->pid);
			break;
		}
		if (!root_done && st.objects_gen != gen) { /* a library loaded since */
			gen = st.objects_gen;
			if ((rc = add_new_objects(s, w, names, &known, &dl)) != 0) {
				if (!follow || w_failed(w))
					break;
				rc = 0; /* its agent went (an exec): the follower goes on */
			}
		}
		if (follow && (rc = follow_pass(follow, t, &busy)) != 0)
			break;
		if (wait_pass(root_done ? -1 : run_sock, busy)) {
			run->exited = 1;
			if (!follow)
				break;
			/* Libraries it loaded since the last pass (an exec'd
			 * program's agent is gone: nothing to ask). */
			if (add_new_objects(s, w, names, &known, &dl) != 0 && w_failed(w))
				break;
			root_done = follow_root_exit(s, run_sock);
			run->let_go = 1;
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
		dl.final_ms = now_ms() + FINAL_MS;
		int stopped = session_call(s, "trace stop", &text);
		free(text);
		rc = stopped < 0 ? -1 : add_new_objects(s, w, names, &known, &dl);
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
	known_free(&known);
	release_stop(old);
	uint64_t short_calls = 0;
	if (mf && trace_minfilter_finish(mf, &short_calls) != 0 && rc == 0)
		rc = 1;
	trace_minfilter_free(mf);
	if (rc < 0) {
		fprintf(stderr, overdue ? "xprobes: trace record: process %d did not answer within "
					  "a second of the stop; what was drained before is kept\n"
					: "xprobes: trace record: process %d went away; what was drained "
					  "before is kept\n", (int)s->pid);
		rc = 0;
		if (run) /* it ended (or cut its socket): reaped, not told to go on */
			run->exited = 1;
	}
	trace_stream_free(t);
	end_run(run, w);
	uint64_t skipped = uft_skipped(w), deep, limited;
	uft_bounded(w, &deep, &limited);
	if (uft_close(w) != 0) {
		fprintf(stderr, "xprobes: trace record: %s\n", uft_error(NULL));
		rc = 1;
	}
	trace_names_free(names);
	if (skipped)
		fprintf(stderr, "xprobes: trace record: %" PRIu64 " records not kept in uftrace's "
				"format (calls deeper than it holds)\n", skipped);
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
	say_bounded(deep, limited, &st);
	return rc;
}
