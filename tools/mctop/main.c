/* SPDX-License-Identifier: MIT */
/* mctop [-p PID] [interval] [count]: options, then one front end (the
 * full-screen UI, -C blocks, --json lines, or --no-ui serving --metrics
 * only), and a clean detach on every way out, signals included. */
#define _GNU_SOURCE
#include <libgen.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../include/xprobes/version.h"
#include "../common/common.h"
#include "core.h"

/* ui.c and metrics.c are other files' work: until they are in the tree
 * their functions are missing (NULL) rather than a link error. */
#pragma weak mctop_ui
#pragma weak mctop_metrics_start
#pragma weak mctop_metrics_update
#pragma weak mctop_metrics_stop

static void usage(FILE *to)
{
	fputs("usage: mctop [options] [-p PID] [interval] [count]\n"
	      "The hottest keys of a running memcached, every interval seconds (default 1),\n"
	      "count times (default: until quit).  Without -p, the one memcached running.\n"
	      "  -p, --pid PID         the memcached process\n"
	      "      --port PORT       its TCP port, for its watch stream when it has no probe\n"
	      "                        sites (default: the lowest it listens on)\n"
	      "  -C                    print one block per interval (for logs)\n"
	      "      --json            print one JSON object per interval, one line each\n"
	      "      --no-ui           no table at all (serve --metrics only)\n"
	      "      --cumulative      rates since attach instead of over the last interval\n"
	      "  -r, --rows N          rows shown (default: the screen's; 20 for -C/--json)\n"
	      "  -c, --commands LIST   count only these: get,set,add,replace,append,prepend,\n"
	      "                        cas,touch,incr,decr,delete\n"
	      "      --prefix PAT      group keys: up to PAT's first occurrence, or by the\n"
	      "                        first capture when PAT is a regex with '('\n"
	      "      --sort ORDER      calls, size, reqs, bw, newest or lat (default calls)\n"
	      "  -o, --output FILE     where the W key writes the table as JSON\n"
	      "      --metrics ADDR:PORT  serve the top keys as OpenMetrics over HTTP\n"
	      "      --budget SIZE     the module's memory limit (default 8M): from about 4M\n"
	      "                        (the module's least, by memcached's threads) to 1T;\n"
	      "                        K, M, G, T suffixes (powers of 1024)\n"
	      "      --latency EVERY   commands timed for LAT: auto (all; one in 8 at random\n"
	      "                        on a busy worker thread) or N, every Nth (1, 2 ... 1024)\n"
	      "  -h, --help            this text\n"
	      "      --version\n"
	      "See mctop(1).\n",
	      to);
}

static int bad(const char *fmt, const char *arg)
{
	fputs("mctop: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\n(mctop --help lists the options)\n", stderr);
	return 2;
}

static int parse_long(const char *s, long min, long max, long *v)
{
	char *end;
	errno = 0;
	long x = strtol(s, &end, 10);
	if (errno || !*s || *end || x < min || x > max)
		return -1;
	*v = x;
	return 0;
}

/* "32M", "512k", "1G", "65536": bytes. */
static int parse_sort(const char *s, enum mctop_sort *by)
{
	static const char *const names[] = { [SORT_CALLS] = "calls", [SORT_SIZE] = "size",
					     [SORT_REQS] = "reqs", [SORT_BW] = "bw",
					     [SORT_NEWEST] = "newest", [SORT_LAT] = "lat" };
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i])) {
			*by = (enum mctop_sort)i;
			return 0;
		}
	return -1;
}

enum { OPT_JSON = 256, OPT_CUMULATIVE, OPT_PREFIX, OPT_METRICS, OPT_NO_UI, OPT_BUDGET, OPT_LATENCY,
       OPT_SORT, OPT_VERSION, OPT_PORT };

/* Options into *o; -1 to exit 0 (help, version), 0, or 2 after a message. */
static int parse_options(int argc, char **argv, struct mctop_opts *o)
{
	static const struct option longs[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "port", required_argument, NULL, OPT_PORT },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "cumulative", no_argument, NULL, OPT_CUMULATIVE },
		{ "rows", required_argument, NULL, 'r' },
		{ "commands", required_argument, NULL, 'c' },
		{ "prefix", required_argument, NULL, OPT_PREFIX },
		{ "output", required_argument, NULL, 'o' },
		{ "metrics", required_argument, NULL, OPT_METRICS },
		{ "no-ui", no_argument, NULL, OPT_NO_UI },
		{ "budget", required_argument, NULL, OPT_BUDGET },
		{ "latency", required_argument, NULL, OPT_LATENCY },
		{ "sort", required_argument, NULL, OPT_SORT },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ 0 },
	};
	char why[512];
	int c;

	*o = (struct mctop_opts){ .interval_s = 1 };
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:Cr:c:o:h", longs, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (cli_parse_pid(optarg, &o->pid))
				return bad("-p wants a process id, not '%s'", optarg);
			break;
		case OPT_PORT: {
			long port;
			if (parse_long(optarg, 1, 65535, &port))
				return bad("--port wants a TCP port (1 to 65535), not '%s'", optarg);
			o->port = (unsigned)port;
			break;
		}
		case 'C': o->stream = 1; break;
		case OPT_JSON: o->json = 1; break;
		case OPT_CUMULATIVE: o->cumulative = 1; break;
		case 'r':
			if (parse_long(optarg, 1, 100000, &o->rows))
				return bad("-r wants a number of rows (1 to 100000), not '%s'", optarg);
			break;
		case 'c':
			if (mctop_cmd_mask(optarg, &o->cmd_mask, why, sizeof(why)))
				return bad("-c: %s", why);
			break;
		case OPT_PREFIX: {
			struct mctop_prefix p;
			if (mctop_prefix_init(&p, optarg, why, sizeof(why)))
				return bad("%s", why);
			mctop_prefix_free(&p);
			o->prefix = optarg;
			break;
		}
		case 'o': {
			/* Checked now, not when W is first pressed minutes later. */
			char *dir = strdup(optarg);
			int ok = dir && *optarg && access(dirname(dir), W_OK) == 0;
			int err = errno;
			free(dir);
			if (!*optarg)
				return bad("%s", "-o wants a file name");
			if (!ok) {
				fprintf(stderr, "mctop: -o %s: cannot write in its directory: %s\n",
					optarg, strerror(err));
				return 2;
			}
			o->output = optarg;
			break;
		}
		case OPT_METRICS:
			if (!strchr(optarg, ':'))
				return bad("--metrics wants ADDR:PORT (such as 127.0.0.1:9150), not '%s'",
					   optarg);
			o->metrics = optarg;
			break;
		case OPT_NO_UI: o->no_ui = 1; break;
		case OPT_BUDGET:
		{
			unsigned long long b;
			char most[32], why[96];
			if (cli_parse_size(optarg, &b, &o->budget_shift))
				return bad("--budget wants a size such as 32M (K, M, G, T suffixes), "
					   "not '%s'", optarg);
			/* The most is the module's fixed one; its least depends on
			 * memcached's threads, so the module answers that. */
			cli_format_size(MCTOP_MAX_BUDGET, o->budget_shift, 0, most, sizeof(most));
			if (b > MCTOP_MAX_BUDGET) {
				snprintf(why, sizeof(why), "--budget %.20s is more than the most, %s",
					 optarg, most);
				return bad("%s", why);
			}
			o->budget = (size_t)b;
			o->budget_arg = optarg;
			break;
		}
		case OPT_LATENCY: {
			/* Sent as parsed ("+8" and " 8" are 8 to strtol, not
			 * to the module). */
			static char every[8];
			long n;
			if (strcmp(optarg, "auto") == 0) {
				o->latency = "auto";
				break;
			}
			if (parse_long(optarg, 1, 1024, &n) || (n & (n - 1)))
				return bad("--latency wants auto or a power of two from 1 to 1024, "
					   "not '%s'", optarg);
			snprintf(every, sizeof(every), "%ld", n);
			o->latency = every;
			break;
		}
		case OPT_SORT:
			if (parse_sort(optarg, &o->sort))
				return bad("--sort wants calls, size, reqs, bw, newest or lat, not '%s'",
					   optarg);
			break;
		case 'h': usage(stdout); return -1;
		case OPT_VERSION: printf("mctop %s\n", XPROBES_VERSION); return -1;
		case ':': return bad("%s needs a value", argv[optind - 1]);
		default:
			if (cli_negative_number(argc, argv, optind))
				return bad("'%s': the interval and the count are positive numbers",
					   cli_negative_number(argc, argv, optind));
			return bad("unknown option '%s'", optopt && optopt < 256
				   ? (snprintf(why, sizeof(why), "-%c", optopt), why) : argv[optind - 1]);
		}
	}
	if (optind < argc) {
		char *end;
		double s = strtod(argv[optind], &end);
		if (!*argv[optind] || *end || !isfinite(s) || s < 0.01 || s > 86400)
			return bad("the interval is seconds (0.01 to 86400), not '%s'", argv[optind]);
		o->interval_s = s;
		optind++;
	}
	if (optind < argc) {
		if (parse_long(argv[optind], 1, 0x7fffffffL, &o->count))
			return bad("the count is a number of intervals (1 or more), not '%s'",
				   argv[optind]);
		optind++;
	}
	if (optind < argc)
		return bad("unexpected argument '%s' after [interval] [count]", argv[optind]);
	if (o->stream && o->json)
		return bad("%s", "-C and --json are two formats: choose one");
	if (o->no_ui && !o->metrics && !o->stream && !o->json)
		return bad("%s", "--no-ui shows nothing: add --metrics ADDR:PORT, -C or --json");
	return 0;
}

/* Sleep until *next (CLOCK_MONOTONIC), then move it one interval on; 0,
 * or -1 when a signal asks us to stop. */
static int wait_tick(struct timespec *next, double interval_s)
{
	long long ns = next->tv_nsec + (long long)(interval_s * 1e9);
	next->tv_sec += ns / 1000000000;
	next->tv_nsec = ns % 1000000000;
	while (!cli_stop) {
		int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, next, NULL);
		if (rc == 0)
			return 0;
		if (rc != EINTR)
			return -1;
	}
	return -1;
}

static void publish(void *mm, const struct mctop_frame *f)
{
	mctop_metrics_update(mm, f);
}

/* -C, --json and --no-ui: one frame per interval until count or a signal. */
static int run_stream(struct mctop *m, const struct mctop_opts *o)
{
	struct mctop_frame f = { 0 };
	struct timespec next;
	size_t rows = o->rows ? (size_t)o->rows : 20;
	int status = 0;
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (long n = 0; !o->count || n < o->count; n++) {
		if (wait_tick(&next, o->interval_s) != 0)
			break;
		if (mctop_sample(m, &f) != 0) {
			status = 1;
			break;
		}
		mctop_sort(&f, o->sort, o->ascending);
		int rc = o->json ? mctop_print_json(&f, rows, stdout)
		       : o->stream ? mctop_print_block(&f, rows, stdout) : 0;
		if (rc != 0) { /* stdout closed (a pipe into head): done */
			status = errno == EPIPE || cli_reader_gone() ? 0 : 1;
			break;
		}
	}
	mctop_frame_free(&f);
	return status;
}

int main(int argc, char **argv)
{
	struct mctop_opts o;
	cli_std_streams("mctop");
	int rc = parse_options(argc, argv, &o);
	if (rc)
		return rc < 0 ? 0 : rc;
	int ui = !o.stream && !o.json && !o.no_ui;
	if (ui && !isatty(STDOUT_FILENO)) {
		o.stream = 1; /* piped or logged: blocks rather than a screen */
		ui = 0;
	}
	if (ui && !mctop_ui) {
		fprintf(stderr, "mctop: the full-screen table is not built in; showing -C blocks\n");
		o.stream = 1;
		ui = 0;
	}
	if (o.metrics && !mctop_metrics_start) {
		fprintf(stderr, "mctop: --metrics is not built in\n");
		return 1;
	}

	/* Stop cleanly on these: the loops see cli_stop, then the module is
	 * let go of. */
	cli_stop_on(SIGINT, SIGTERM, SIGHUP, 0);
	signal(SIGPIPE, SIG_IGN);

	struct mctop *m = mctop_open(&o);
	if (!m)
		return 1;
	struct mctop_metrics *mm = NULL;
	if (o.metrics) {
		mm = mctop_metrics_start(o.metrics, o.rows ? (size_t)o.rows : 20);
		if (!mm) {
			mctop_close(m);
			return 1;
		}
		m->on_frame = publish;
		m->on_frame_arg = mm;
	}
	int status = ui ? mctop_ui(m, &o) : run_stream(m, &o);
	mctop_close(m);
	if (mm)
		mctop_metrics_stop(mm);
	return status;
}
