/* SPDX-License-Identifier: MIT */
/* The tool's `trace` commands.  The agent knows patch sites by address
 * only and has no symbol tables, so function globs (-F/-N) are matched
 * here, against the names libelf gives each site, and sent as `trace
 * select ADDR...`.  Reading and printing are the tool's too: the agent just
 * says where the buffers are (trace_read.c).
 *
 * -t (minimum duration) is a printing filter: the agent records every
 * call, and `trace cat -t` / `trace stat -t` hide shorter ones.  `trace
 * start -t` sets the default for the cat and stat that follow in the same
 * xprobes session (the interactive shell, a pipe, several -c). */
#define _GNU_SOURCE
#include "xprobes.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../lib/base/base.h"

#define MAX_WORDS 256

static uint64_t session_min_ns; /* trace start -t, for later cat and stat */
static struct argspecs *session_args; /* trace start -A/-R, for later cat and snapshot */


/* Microseconds with up to three decimals, as integer nanoseconds. */
static int parse_us(const char *s, uint64_t *ns)
{
	uint64_t v = 0;
	int digits = 0, decimals = -1;
	for (; *s; s++) {
		if (*s == '.' && decimals < 0) {
			decimals = 0;
			continue;
		}
		if (!isdigit((unsigned char)*s) || decimals == 3 || v > UINT64_MAX / 10 - 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
		digits++;
		if (decimals >= 0)
			decimals++;
	}
	for (int d = decimals < 0 ? 0 : decimals; d < 3; d++) {
		if (v > UINT64_MAX / 10)
			return -1;
		v *= 10;
	}
	*ns = v;
	return digits ? 0 : -1;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *v)
{
	char *end;
	errno = 0;
	*v = strtoul(s, &end, 10);
	return errno || end == s || *end || *s == '-' || *v > max ? -1 : 0;
}

static int push(char ***v, size_t *n, const char *s)
{
	char **grown = realloc(*v, (*n + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	*v = grown;
	(*v)[(*n)++] = (char *)s;
	return 0;
}

/* -F or -N (c) GLOB, onto include or exclude: 0, 1 out of memory, or -1
 * after saying the glob is not one. */
static int add_glob(const char *prog, int c, const char *glob, char ***include, size_t *ninclude,
		    char ***exclude, size_t *nexclude)
{
	const char *why = xp_glob_error(glob);
	if (why) {
		fprintf(stderr, "%s: -%c '%s' is not a valid glob: %s\n", prog, c, glob, why);
		return -1;
	}
	return (c == 'F' ? push(include, ninclude, glob) : push(exclude, nexclude, glob)) ? 1 : 0;
}

static int add_arg(struct trace_opts *o, const char *fmt, const char *opt, unsigned long v)
{
	size_t len = strlen(o->agent_args);
	int n = snprintf(o->agent_args + len, sizeof(o->agent_args) - len, fmt, opt, v);
	return n < 0 || (size_t)n >= sizeof(o->agent_args) - len ? -1 : 0;
}

void trace_opts_free(struct trace_opts *o)
{
	free(o->include);
	free(o->exclude);
	if (o->args)
		argspecs_free(o->args);
	free(o->args);
	o->args = NULL;
	o->include = o->exclude = NULL;
	o->ninclude = o->nexclude = 0;
}

int trace_parse_start(int n, char **words, int run_form, struct trace_opts *o)
{
	static const struct option longs[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "overwrite", no_argument, NULL, 'O' },
		{ "requests", no_argument, NULL, 'q' },
		{ "argument", required_argument, NULL, 'A' },
		{ "retval", required_argument, NULL, 'R' },
		{ "auto-args", no_argument, NULL, 'a' },
		{ "libcall", no_argument, NULL, 'l' },
		{ "no-libcall", no_argument, NULL, 'L' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const shorts[] = {
		[TRACE_FORM_START] = "+F:N:D:t:T:b:B:A:R:a",
		[TRACE_FORM_RUN] = "+F:N:D:t:T:b:B:o:A:R:a",
		[TRACE_FORM_RECORD] = "+F:N:D:t:T:b:B:o:d:A:R:a",
	};
	*o = (struct trace_opts){ .view = TRACE_GRAPH };
	int libcall = 1; /* as uftrace: library calls unless --no-libcall */
	optind = 0; /* getopt starts over (glibc) */
	opterr = 1;
	int c;
	while ((c = getopt_long(n, words, shorts[run_form],
				run_form == TRACE_FORM_RUN ? longs : longs + 1, NULL)) != -1) {
		unsigned long v;
		uint64_t dur;
		int bad = 0;
		switch (c) {
		case 'F':
		case 'N':
			bad = add_glob(words[0], c, optarg, &o->include, &o->ninclude, &o->exclude,
				       &o->nexclude);
			if (bad < 0) {
				trace_opts_free(o);
				return -1;
			}
			break;
		case 'D':
			bad = parse_uint(optarg, 1u << 20, &v) || add_arg(o, " %s %lu", "-D", v);
			break;
		case 'T':
			bad = parse_uint(optarg, 0x7fffffff, &v) || !v || add_arg(o, " %s %lu", "-T", v);
			break;
		case 'b':
			bad = parse_uint(optarg, 1ul << 22, &v) || !v || add_arg(o, " %s %lu", "-b", v);
			break;
		case 'B':
			bad = parse_uint(optarg, 0xfffffffful, &v) || v < 64 ||
			      add_arg(o, " %s %lu", "-B", v);
			break;
		case 't':
			bad = parse_us(optarg, &o->min_ns);
			o->have_min = 1;
			break;
		case 'o': o->out = optarg; break;
		case 'd':
			/* Seconds to 3 decimals read as microseconds are ms. */
			bad = parse_us(optarg, &dur) || dur < 1 || dur > 86400000;
			o->duration_ms = (long long)dur;
			break;
		case 'O': bad = add_arg(o, " %s", "--overwrite", 0); break;
		case 'q': bad = add_arg(o, " %s", "--requests", 0); break;
		case 'A':
		case 'R': {
			char why[TRACE_WHY_SIZE];
			if (!o->args && !(o->args = calloc(1, sizeof(*o->args)))) {
				bad = 1;
				break;
			}
			if (argspec_option(o->args, optarg, why, sizeof(why)) == 0) {
				o->args_long |= argopts_add(o->args_text, c == 'A' ? "-A" : "-R", optarg);
				break;
			}
			fprintf(stderr, "%s: -%c '%s': %s\n", words[0], c, optarg, why);
			trace_opts_free(o);
			return -1;
		}
		case 'a': /* -a: specs from each traced object's DWARF (trace_start.c) */
			if (!o->args && !(o->args = calloc(1, sizeof(*o->args))))
				bad = 1;
			else
				o->args->autoargs = 1;
			o->args_long |= argopts_add(o->args_text, "-a", NULL);
			break;
		case 'l': libcall = 1; break;
		case 'L': libcall = 0; break;
		case 'f':
			bad = !strcmp(optarg, "graph") ? (o->view = TRACE_GRAPH, 0)
			      : !strcmp(optarg, "chrome") ? (o->view = TRACE_CHROME, 0)
			      : !strcmp(optarg, "folded") ? (o->view = TRACE_FOLDED, 0) : 1;
			o->view_given = 1;
			break;
		default:
			trace_opts_free(o);
			return -1; /* getopt said what */
		}
		if (bad) {
			if (c == 'f')
				fprintf(stderr, "%s: bad value for --format (graph, chrome or "
						"folded): '%s'\n", words[0], optarg);
			else if (c == 'd')
				fprintf(stderr, "%s: bad value for -d (seconds, from 0.001 to 86400): "
						"'%s'\n", words[0], optarg);
			else
				fprintf(stderr, "%s: bad value for -%c: '%s'\n", words[0], c, optarg);
			trace_opts_free(o);
			return -1;
		}
	}
	if (run_form != TRACE_FORM_RUN && optind < n) {
		fprintf(stderr, "%s: unexpected '%s'\n", words[0], words[optind]);
		trace_opts_free(o);
		return -1;
	}
	if (!libcall && o->args)
		o->args_long |= argopts_add(o->args_text, "--no-libcall", NULL);
	/* The agent's start traces library calls only when asked. */
	if (libcall && add_arg(o, " %s", "--libcall", 0)) {
		fprintf(stderr, "%s: too many options\n", words[0]);
		trace_opts_free(o);
		return -1;
	}
	return optind;
}

/* View v of t (-1: the statistics), cut to what f's -F/-N/-D show. */
static int show(FILE *out, const struct tf_trace *all, int v, enum tf_sort by,
		const struct tf_filter *f)
{
	struct tf_trace t;
	struct tf_thread *owned;
	if (tf_select(all, f, &t, &owned) != 0) {
		fprintf(stderr, "xprobes: trace: out of memory\n");
		return -1;
	}
	int rc = v < 0 ? tf_stat(out, &t, f, by)
		 : v == TRACE_CHROME ? tf_chrome(out, &t, f)
		 : v == TRACE_FOLDED ? tf_folded(out, &t, f) : tf_graph(out, &t, f);
	tf_select_free(owned, t.nthreads);
	return rc;
}

int trace_print(struct session *s, FILE *out, enum trace_view v, const struct tf_filter *f,
		const struct argspecs *args)
{
	struct trace_data d;
	if (trace_read(s, f->tid, &d) != 0) {
		trace_data_free(&d);
		return 1;
	}
	struct tf_trace t = {
		.threads = d.threads, .nthreads = d.nthreads, .pid = (int)s->pid,
		.origin_ns = d.clock.start_ns,
		.names = { trace_names_func, trace_names_site, d.names, trace_names_sym },
		.args = args,
	};
	int rc = show(out, &t, (int)v, TF_SORT_TOTAL, f);
	int none = d.nthreads == 0;
	if (none && (v == TRACE_GRAPH || f->tid))
		fprintf(stderr, "xprobes: trace: nothing recorded%s\n", f->tid ? " by that thread" : "");
	/* Asking for a thread that recorded nothing is a failure; an empty
	 * trace is not.  A refused file (trace_names.c) is: the target lied. */
	rc = rc || (f->tid && none) || trace_names_refused(d.names);
	trace_data_free(&d);
	return rc ? 1 : 0;
}

/* A recording (trace record -o DIR, or uftrace record): view v (-1: the
 * statistics, sorted by) of it. */
static int print_recording(const char *dir, FILE *out, int v, enum tf_sort by,
			   const struct tf_filter *f)
{
	struct uft_recording r;
	if (uft_load(dir, &r) != 0) {
		fprintf(stderr, "xprobes: trace: %s\n", r.err);
		return 1;
	}
	for (size_t i = 0; i < r.nthreads; i++)
		r.threads[i].name = r.thread_names ? sanitize_text(r.thread_names[i]) : NULL;
	struct tf_trace t = { .threads = r.threads, .nthreads = r.nthreads, .pid = r.pid,
			      .origin_ns = r.origin_ns, .names = r.names, .args = r.args };
	int rc = show(out, &t, v, by, f);
	if (!r.nthreads && v == TRACE_GRAPH)
		fprintf(stderr, "xprobes: trace: nothing recorded in %s\n", dir);
	int none = f->tid && !r.nthreads;
	uft_free(&r);
	return rc || none ? 1 : 0;
}

static int open_out(const char *path, FILE **out)
{
	*out = stdout;
	if (path && !(*out = fopen(path, "w"))) {
		fprintf(stderr, "xprobes: trace: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int close_out(FILE *out, const char *path, int rc)
{
	if (out == stdout) {
		fflush(stdout);
		return rc;
	}
	if (fclose(out) != 0 && !rc) {
		fprintf(stderr, "xprobes: trace: writing %s: %s\n", path, strerror(errno));
		return 1;
	}
	return rc;
}

/* trace cat [--tid N] [--format graph|chrome|folded] [-t min_us] [-F glob]... [-N glob]...
 *           [-D depth] [-o file] [-d DIR]
 * trace stat [--tid N] [-s calls|total|self|avg|max] [-t min_us] [-F glob]... [-N glob]...
 *            [-D depth] [-o file] [-d DIR] */
static int cmd_read(struct session *s, int n, char **words, int is_stat)
{
	static const struct option cat_longs[] = {
		{ "tid", required_argument, NULL, 'p' },
		{ "format", required_argument, NULL, 'f' },
		{ "snapshot", no_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct option stat_longs[] = {
		{ "tid", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	struct tf_filter f = { .min_ns = session_min_ns };
	struct argspecs *fetched = NULL; /* the start's -A/-R/-a, another session's */
	const struct argspecs *args = session_args;
	enum trace_view v = TRACE_GRAPH;
	enum tf_sort by = TF_SORT_TOTAL;
	const char *path = NULL, *dir = NULL;
	unsigned long tid;
	int c, format_given = 0;
	optind = 0;
	opterr = 1;
	int rc = 1;
	while ((c = getopt_long(n, words, is_stat ? "s:t:o:d:F:N:D:" : "t:o:d:F:N:D:",
				is_stat ? stat_longs : cat_longs, NULL)) != -1) {
		int bad = 0;
		unsigned long depth;
		switch (c) {
		case 'F':
		case 'N':
			bad = add_glob(words[0], c, optarg, &f.include, &f.ninclude, &f.exclude,
				       &f.nexclude);
			if (bad < 0)
				goto done;
			break;
		case 'D':
			bad = parse_uint(optarg, 1u << 20, &depth) || !depth;
			f.max_depth = (uint32_t)depth;
			break;
		case 'p':
			bad = parse_uint(optarg, 0x7fffffff, &tid) || !tid;
			f.tid = (int)tid;
			break;
		case 'f':
			bad = !strcmp(optarg, "graph") ? (v = TRACE_GRAPH, 0)
			      : !strcmp(optarg, "chrome") ? (v = TRACE_CHROME, 0)
			      : !strcmp(optarg, "folded") ? (v = TRACE_FOLDED, 0) : 1;
			format_given = 1;
			break;
		case 's': bad = tf_sort_parse(optarg, &by); break;
		case 't': bad = parse_us(optarg, &f.min_ns); break;
		case 'o': path = optarg; break;
		case 'd': dir = optarg; break;
		case 'S': break; /* reading never stops the trace: the name says so */
		default: goto done;
		}
		if (bad) {
			static const char *const what[] = {
				['p'] = "--tid (a thread id)", ['f'] = "--format (graph, chrome or folded)",
				['s'] = "-s (calls, total, self, avg or max)",
				['t'] = "-t (microseconds, up to 3 decimals)",
				['D'] = "-D (a depth, 1 to 1048576)",
				['F'] = "-F (out of memory)", ['N'] = "-N (out of memory)",
			};
			fprintf(stderr, "%s: bad value for %s: '%s'\n", words[0], what[c], optarg);
			goto done;
		}
	}
	if (optind < n) {
		fprintf(stderr, "%s: unexpected '%s'\n", words[0], words[optind]);
		goto done;
	}
	if (!dir && !s) {
		fprintf(stderr, "%s: -d DIR is needed without a process\n", words[0]);
		rc = 2;
		goto done;
	}
	/* Values need the specs: this session's start's, or the ones the
	 * start left with the agent (trace_argopts.c). */
	if (s && !dir && !is_stat && !args) {
		if (trace_args_fetch(s, words[0], &fetched) != 0)
			goto done;
		args = fetched;
	}
	/* trace snapshot -o DIR: a uftrace data directory, unless --format
	 * asks for a printed view in the file. */
	if (s && path && !format_given && !strcmp(words[0], "trace snapshot")) {
		if (dir || f.ninclude || f.nexclude || f.max_depth || f.min_ns) {
			fprintf(stderr, "xprobes: %s: -o DIR takes --tid alone (or give --format "
					"to print to a file)\n", words[0]);
			goto done;
		}
		rc = trace_snapshot_dir(s, path, f.tid, args);
		goto done;
	}
	FILE *out;
	if (open_out(path, &out) != 0)
		goto done;
	if (dir) {
		rc = print_recording(dir, out, is_stat ? -1 : (int)v, by, &f);
	} else if (is_stat) {
		struct trace_data d;
		rc = trace_read(s, f.tid, &d) != 0;
		struct tf_trace t = {
			.threads = d.threads, .nthreads = d.nthreads, .pid = (int)s->pid,
			.names = { trace_names_func, trace_names_site, d.names, trace_names_sym },
		};
		if (!rc)
			rc = show(out, &t, -1, by, &f) != 0 || trace_names_refused(d.names);
		trace_data_free(&d);
	} else {
		rc = trace_print(s, out, v, &f, args);
	}
	rc = close_out(out, path, rc);
done:
	if (fetched)
		argspecs_free(fetched);
	free(fetched);
	free(f.include);
	free(f.exclude);
	return rc;
}

/* `xprobes trace cat|stat -d DIR ...`: a recording, no process. */
int trace_offline_main(int argc, char **argv)
{
	int is_stat = !strcmp(argv[0], "stat");
	argv[0] = is_stat ? "xprobes trace stat" : "xprobes trace cat";
	return cmd_read(NULL, argc, argv, is_stat);
}

static const char usage[] =
	"trace start [-F glob]... [-N glob]... [-D depth] [-t min_us] [-T tid]... [-b KiB] [-B KiB]\n"
	"            [-A glob@spec]... [-R glob@retval]... [-a] [--overwrite] [--requests] [--no-libcall]\n"
	"trace record -o DIR [-d seconds] [start options]: until Ctrl-C, -d or the program's exit\n"
	"trace stop | status | clear\n"
	"trace cat [--tid N] [--format graph|chrome|folded] [-t min_us] [-F glob]... [-N glob]...\n"
	"          [-D depth] [-o file] [-d DIR]\n"
	"trace snapshot ...  (trace cat: the buffers are copied, tracing goes on)\n"
	"trace snapshot -o DIR [--tid N]: the buffers as a uftrace data directory\n"
	"trace stat [--tid N] [-s calls|total|self|avg|max] [-t min_us] [-F glob]... [-N glob]...\n"
	"           [-D depth] [-o file] [-d DIR]\n";

int trace_command(struct session *s, const char *line)
{
	char *copy = strdup(line), *words[MAX_WORDS], *save;
	int n = 0;
	if (!copy)
		return 1;
	for (char *w = strtok_r(copy, " \t", &save); w && n < MAX_WORDS; w = strtok_r(NULL, " \t", &save))
		words[n++] = w;
	int rc = -2;
	if (n == 0 || strcmp(words[0], "trace") || (n > 1 && !strcmp(words[1], "select"))) {
		rc = -2;
	} else if (n == 1 || !strcmp(words[1], "help")) {
		fputs(usage, stdout);
		rc = 0;
	} else if (n == MAX_WORDS) {
		fprintf(stderr, "xprobes: trace: too many words\n");
		rc = 1;
	} else if (!strcmp(words[1], "start")) {
		struct trace_opts o;
		words[1] = "trace start";
		rc = trace_parse_start(n - 1, words + 1, TRACE_FORM_START, &o) < 0 ? 1 : trace_start(s, &o, stdout);
		if (rc == 0) { /* the agent holds these specs now (or none) */
			if (session_args)
				argspecs_free(session_args);
			free(session_args);
			session_args = o.args;
			o.args = NULL;
		}
		if (rc == 0 && o.have_min) {
			session_min_ns = o.min_ns;
			printf("-t: trace cat and trace stat in this xprobes session hide calls under "
			       "%" PRIu64 ".%03" PRIu64 " us (the agent records them all)\n",
			       o.min_ns / 1000, o.min_ns % 1000);
		}
		trace_opts_free(&o);
	} else if (!strcmp(words[1], "record")) {
		struct trace_opts o;
		words[1] = "trace record";
		rc = trace_parse_start(n - 1, words + 1, TRACE_FORM_RECORD, &o) < 0 ? 1 : 0;
		if (rc == 0 && !o.out) {
			fprintf(stderr, "trace record: -o DIR is needed (where the recording goes)\n");
			rc = 1;
		}
		if (rc == 0) {
			/* The children it forks from now on too (not the
			 * programs it execs: they never see the variable). */
			o.follow = trace_follow_new();
			rc = trace_record_dir(s, &o, o.out, NULL);
			trace_follow_free(o.follow);
		}
		trace_opts_free(&o);
	} else if (!strcmp(words[1], "cat") || !strcmp(words[1], "stat") ||
		   !strcmp(words[1], "snapshot")) {
		/* snapshot: trace cat by ftrace's name for it (the buffers are
		 * copied, tracing goes on) */
		int is_stat = !strcmp(words[1], "stat");
		words[1] = is_stat ? "trace stat" : !strcmp(words[1], "cat") ? "trace cat"
						  : "trace snapshot";
		rc = cmd_read(s, n - 1, words + 1, is_stat);
	}
	free(copy);
	return rc;
}
