/* SPDX-License-Identifier: MIT */
/* mclat: where a memcached request's time goes, stage by stage.
 *
 *   mclat [-p PID] [--percentiles] [--hist STAGE] [--json] [--batches]
 *         [--no-bpf] [--module PATH] [--all | --sample FRACTION]
 *         [--sample-batches N]
 *         [--metrics ADDR:PORT [--no-ui]]
 *         [--slow THRESHOLD -o DIR [--slow-libcalls] [--slow-depth N]]
 *         [INTERVAL [COUNT]]
 *
 * Loads bpf/mclat.bpf.c's programs (kernel stages) and modules/mclat.so
 * into memcached (the user-space stage), polls both every POLL_MS, joins
 * them (join.c) and prints one interval every INTERVAL seconds.  Without
 * BPF it reports the memcached stage alone and says what is missing.
 *
 * By default it samples: the programs are attached and the
 * module records for a window at the start of each interval (FRACTION of
 * it, or until the programs saw --sample-batches' replies), and are
 * detached in between, where the hooks cost nothing (an
 * attached program that does nothing already costs memcached 9%,
 * bench/bpf_floor).  Batches a window's edge cut are counted, never
 * measured (window.c).  --all attaches once, as before.
 * See mclat(1).
 */
#define _GNU_SOURCE
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
#include "mclat.h"
#include "slow.h"

/* Each poll is a module command: a session round trip and a thread in the
 * agent, ~180 us of memcached's CPU on this VM (perf), so not too often;
 * at 50 ms a worker at 160,000 batches a second half fills its ring in
 * the module (modules/mclat.c, MCLAT_RING) and the 4 MiB kernel ring holds
 * ten times what 50 ms brings. */
#define POLL_MS 50
/* A module batch is published a few ns after its end time is taken: the
 * module's clock minus this is a time before which all are published. */
#define HORIZON_MARGIN_NS 20000000ull
/* The default share of each interval sampled: at saturation (~90k
 * batches a second here) 5% is ~4,500 measured batches a second. */
#define SAMPLE_DEFAULT 0.05
/* A window also closes once the programs have seen this many replies per
 * second of interval (--sample-batches): at saturation (~90,000 batches a
 * second on a quiet machine) that is ~22 ms instead of 50, and memcached
 * pays for the programs only that long, with as many batches measured as
 * the goal asks (1,000 a second) and room for those the edges cut.
 * Below ~40,000 a second the fraction closes the window first. */
#define SAMPLE_BATCHES_DEFAULT 2000
/* How often the budget is looked at inside a window: a load from the
 * programs' memory, no system call, nothing asked of memcached. */
#define BUDGET_STEP_MS 2

struct opts {
	pid_t pid;
	double interval;
	long count; /* 0: until interrupted */
	int no_bpf;
	double sample; /* share of each interval in a window; 1: --all */
	long sample_batches; /* replies per second of interval that end a window; 0: none */
	const char *metrics; /* --metrics ADDR:PORT */
	int no_ui;           /* --no-ui: nothing on stdout */
	struct print_opts print;
	const char *module;
	uint64_t slow_ns;     /* --slow THRESHOLD; 0: none */
	const char *slow_dir; /* -o DIR */
	int slow_libcalls;    /* --slow-libcalls: library calls in the graphs too */
	unsigned slow_depth;  /* --slow-depth N; 0: every level */
};

static void usage(FILE *to)
{
	fputs("usage: mclat [-p PID] [--percentiles] [--hist STAGE] [--json] [--batches] [--no-bpf]\n"
	      "             [--all | --sample FRACTION] [--sample-batches N]\n"
	      "             [--metrics ADDR:PORT [--no-ui]]\n"
	      "             [--slow THRESHOLD -o DIR [--slow-libcalls] [--slow-depth N]]\n"
	      "             [INTERVAL [COUNT]]\n"
	      "Where memcached's requests spend their time, every INTERVAL seconds (default 1),\n"
	      "COUNT times (default: until interrupted), as means in microseconds per read batch\n"
	      "(one read() of a connection; pipelined requests in it share one batch):\n"
	      "  rx        netif_receive_skb to tcp_probe: device to TCP, IP included (the kernel\n"
	      "            has no tracepoint between them, so driver-to-IP and IP are one stage)\n"
	      "  tcpip_rx  tcp_probe to sk_data_ready: TCP until the data is queued and epoll woken\n"
	      "  epoll     sk_data_ready to the worker's epoll_wait return (0 if it was not waiting)\n"
	      "  wait      epoll return to the worker's read() on that connection\n"
	      "  read      read() entry until its bytes are copied out (sock_recv_length)\n"
	      "  memcached from there to process__command__end (replies start)\n"
	      "  tx        replies start until the first reply skb reaches the device\n"
	      "            (net_dev_start_xmit)\n"
	      "  total     rx's start to tx's end; the stages sum to it for every batch\n"
	      "  count     read batches measured in the interval\n"
	      "  sampled   the share of the interval mclat watched (see --sample)\n"
	      "A stage with no batch in the interval shows '-' (null in JSON), not 0.\n"
	      "  -p, --pid PID        memcached's pid (default: the one running memcached)\n"
	      "      --percentiles    p50/p90/p99/max and mean of each stage\n"
	      "      --hist STAGE     log2 histogram of one stage\n"
	      "      --json           one JSON object per interval\n"
	      "      --batches        with --json: also one object per read batch (ns)\n"
	      "      --no-bpf         no kernel programs: the memcached stage alone\n"
	      "      --module PATH    the probe module (default: modules/mclat.so next to mclat)\n"
	      "      --sample FRACTION  watch this share of each interval (0.05 or 5%%, the\n"
	      "                       default): a window at its start, nothing attached after;\n"
	      "                       batches a window's edge cuts are counted as cut=\n"
	      "      --sample-batches N  end a window early once the programs saw N replies\n"
	      "                       per second of INTERVAL (default 2000; 0: never)\n"
	      "      --all            watch every request (costs memcached ~25%% at saturation)\n"
	      "      --metrics ADDR:PORT  serve each stage as a Prometheus histogram over HTTP\n"
	      "      --no-ui          print nothing (with --metrics: run headless)\n"
	      "      --slow THRESHOLD the function graph of every request that takes THRESHOLD\n"
	      "                       or more (1ms, 500us; a bare number is us), into -o DIR\n"
	      "                       (a uftrace data directory); needs a memcached built with\n"
	      "                       the tracer's flags as well as xprobes-dtrace; memcached's\n"
	      "                       functions, not its library calls\n"
	      "      --slow-libcalls  library calls in the graphs too (pthread_mutex_lock, memcmp...;\n"
	      "                       costs memcached more at every request)\n"
	      "      --slow-depth N   calls at most N levels under the request in the graphs\n"
	      "                       (1: the command's own calls); deeper ones are not\n"
	      "                       followed, which costs memcached less at every request\n"
	      "  -o, --output DIR     where --slow writes (a new or empty directory)\n"
	      "  -h, --help\n"
	      "      --version\n"
	      "Kernel stages need BPF (root, or CAP_BPF and CAP_PERFMON).  Without it mclat\n"
	      "prints memcached= (process__command__start to _end) and count= only.\n",
	      to);
}

static int bad(const char *fmt, const char *arg)
{
	fputs("mclat: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs(" (mclat --help for the options)\n", stderr);
	return 2;
}

/* "0.05" or "5%" into *f, in (0, 1]; -1 if it is neither. */
static int parse_fraction(const char *arg, double *f)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (end != arg && *end == '%' && !end[1]) {
		v /= 100;
		end++;
	}
	if (errno || end == arg || *end || !(v > 0) || v > 1)
		return -1;
	*f = v;
	return 0;
}

/* 0, 1 (--help, --version) or 2 (bad input, after a message). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	enum { OPT_JSON = 256, OPT_PCT, OPT_HIST, OPT_BATCHES, OPT_NOBPF, OPT_MODULE, OPT_ALL,
	       OPT_SAMPLE, OPT_METRICS, OPT_NO_UI, OPT_VERSION, OPT_SLOW, OPT_SAMPLE_BATCHES,
	       OPT_SLOW_LIBCALLS, OPT_SLOW_DEPTH };
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "percentiles", no_argument, NULL, OPT_PCT },
		{ "hist", required_argument, NULL, OPT_HIST },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "batches", no_argument, NULL, OPT_BATCHES },
		{ "no-bpf", no_argument, NULL, OPT_NOBPF },
		{ "module", required_argument, NULL, OPT_MODULE },
		{ "all", no_argument, NULL, OPT_ALL },
		{ "sample", required_argument, NULL, OPT_SAMPLE },
		{ "sample-batches", required_argument, NULL, OPT_SAMPLE_BATCHES },
		{ "metrics", required_argument, NULL, OPT_METRICS },
		{ "no-ui", no_argument, NULL, OPT_NO_UI },
		{ "slow", required_argument, NULL, OPT_SLOW },
		{ "slow-libcalls", no_argument, NULL, OPT_SLOW_LIBCALLS },
		{ "slow-depth", required_argument, NULL, OPT_SLOW_DEPTH },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	int c, sample_given = 0;
	char *end;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:ho:", longopts, NULL)) != -1) {
		errno = 0;
		switch (c) {
		case 'p':
			if (cli_parse_pid(optarg, &o->pid))
				return bad("-p wants a process id, got '%s'", optarg);
			break;
		case OPT_PCT:
			o->print.percentiles = 1;
			break;
		case OPT_HIST:
			if ((o->print.hist = stage_index(optarg)) < 0)
				return bad("--hist wants a stage (rx tcpip_rx epoll wait read memcached "
					   "tx total), got '%s'", optarg);
			break;
		case OPT_JSON:
			o->print.json = 1;
			break;
		case OPT_BATCHES:
			o->print.batches = 1;
			break;
		case OPT_NOBPF:
			o->no_bpf = 1;
			break;
		case OPT_MODULE:
			o->module = optarg;
			break;
		case OPT_ALL:
			if (sample_given++)
				return bad("%s: --all and --sample are one choice", "--all");
			o->sample = 1;
			break;
		case OPT_SAMPLE:
			if (sample_given++)
				return bad("%s: --all and --sample are one choice", "--sample");
			if (parse_fraction(optarg, &o->sample))
				return bad("--sample wants a fraction in (0, 1] (0.05 or 5%%), got '%s'",
					   optarg);
			break;
		case OPT_SAMPLE_BATCHES:
			o->sample_batches = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || o->sample_batches < 0)
				return bad("--sample-batches wants a count (0: no budget), got '%s'",
					   optarg);
			break;
		case OPT_METRICS:
			if (!strchr(optarg, ':'))
				return bad("--metrics wants ADDR:PORT (such as 127.0.0.1:9151), not '%s'",
					   optarg);
			o->metrics = optarg;
			break;
		case OPT_NO_UI:
			o->no_ui = 1;
			break;
		case OPT_SLOW:
			if (slow_parse_threshold(optarg, &o->slow_ns))
				return bad("--slow wants a time (1ms, 500us, 2.5ms; a bare number is "
					   "microseconds), got '%s'", optarg);
			break;
		case OPT_SLOW_LIBCALLS:
			o->slow_libcalls = 1;
			break;
		case OPT_SLOW_DEPTH: {
			errno = 0;
			unsigned long d = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || optarg[0] == '-' || d < 1 || d > 65535)
				return bad("--slow-depth wants a number of levels from 1 to 65535, "
					   "got '%s'", optarg);
			o->slow_depth = (unsigned)d;
			break;
		}
		case 'o':
			o->slow_dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case OPT_VERSION:
			printf("mclat %s\n", XPROBES_VERSION);
			return 1;
		case ':':
			return bad("%s needs an argument", argv[optind - 1]);
		default: {
			char opt[3] = { '-', (char)optopt, '\0' };
			if (cli_negative_number(argc, argv, optind))
				return bad("'%s': the interval and the count are positive numbers",
					   cli_negative_number(argc, argv, optind));
			return bad("unknown option '%s'", optopt ? opt : argv[optind - 1]);
		}
		}
	}
	if (optind < argc) {
		errno = 0;
		o->interval = strtod(argv[optind], &end);
		if (errno || *end || end == argv[optind] || !(o->interval > 0) || isinf(o->interval))
			return bad("INTERVAL wants a positive number of seconds, got '%s'",
				   argv[optind]);
		optind++;
	}
	if (optind < argc) {
		errno = 0;
		o->count = strtol(argv[optind], &end, 10);
		if (errno || *end || end == argv[optind] || o->count <= 0)
			return bad("COUNT wants a positive number, got '%s'", argv[optind]);
		optind++;
	}
	if (optind < argc)
		return bad("unexpected argument '%s'", argv[optind]);
	if (o->slow_ns && !o->slow_dir)
		return bad("%s needs -o DIR (where the slow requests' graphs go)", "--slow");
	if (o->slow_dir && !o->slow_ns)
		return bad("%s goes with --slow THRESHOLD", "-o");
	if (o->slow_libcalls && !o->slow_ns)
		return bad("%s goes with --slow THRESHOLD", "--slow-libcalls");
	if (o->slow_depth && !o->slow_ns)
		return bad("%s goes with --slow THRESHOLD", "--slow-depth");
	if (o->print.batches && !o->print.json)
		return bad("%s goes with --json", "--batches");
	if (o->no_ui && !o->metrics)
		return bad("%s shows nothing: add --metrics ADDR:PORT", "--no-ui");
	if (o->no_ui && (o->print.json || o->print.percentiles || o->print.hist >= 0))
		return bad("%s prints nothing: drop --json, --percentiles and --hist", "--no-ui");
	return 0;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct run {
	struct opts *o;
	struct session *s;
	const char *module;
	struct kernel *k;
	struct join *j;
	struct interval iv;
	struct windows w;
	unsigned long long kernel_lost_seen;
	uint64_t window_open_ns; /* 0: no window open */
	unsigned long long budget;     /* replies that end a window; 0: none */
	unsigned long long replies_at; /* kernel_replies() when it opened */
	struct metrics *metrics;
	int stock; /* no probe sites: the kernel stages alone (no module, no session) */
	struct slow *slow; /* --slow, or NULL */
};

static void on_batch(const struct lat_batch *b, void *arg)
{
	struct run *r = arg;
	if (interval_add(&r->iv, b) != 0)
		r->iv.lost++;
	if (r->o->print.batches)
		print_batch_json(b, stdout);
	if (r->slow)
		slow_batch(r->slow, b);
}

/* Take what both sides have; 0, or -1 when the agent went away. */
static int gather(struct run *r, int final)
{
	uint64_t now_ns = 0;
	int more;
	do {
		if (r->stock)
			break;
		unsigned long long dropped = 0;
		more = module_read(r->s, r->module, join_module, r->j, &now_ns, &dropped);
		if (more < 0)
			return -1;
		r->iv.lost += dropped;
	} while (more == 1);
	if (r->k) {
		if (kernel_poll(r->k, r->stock ? join_kernel_alone : join_kernel, r->j) != 0)
			return -1;
		unsigned long long lost = kernel_lost(r->k);
		r->iv.lost += lost - r->kernel_lost_seen;
		r->kernel_lost_seen = lost;
	}
	join_run(r->j, now_ns > HORIZON_MARGIN_NS ? now_ns - HORIZON_MARGIN_NS : 0, final);
	if (r->o->print.batches)
		fflush(stdout); /* batches as they come, not once an interval */
	return 0;
}

/* A window opens: the programs attached, the module recording, and only
 * then its start taken, so that a batch that began after it had every
 * hook.  0, or -1 if either side failed. */
static int window_open(struct run *r)
{
	if (r->o->sample >= 1)
		return 0;
	if (r->k) {
		/* The last window's links gone (long since, at 5% of 1 s). */
		r->iv.detach_ns += kernel_detached(r->k);
		uint64_t t0 = mono_ns();
		int err = kernel_attach(r->k);
		r->iv.attach_ns += mono_ns() - t0;
		r->iv.windows++;
		if (err) {
			fprintf(stderr, "mclat: attaching the BPF programs again failed: %s\n",
				strerror(-err));
			return -1;
		}
	}
	if (!r->stock && module_window(r->s, r->module, 1) != 0)
		return -1;
	if (r->k) {
		r->replies_at = kernel_replies(r->k);
		kernel_sampling(r->k, 1); /* every link is there */
	}
	r->window_open_ns = mono_ns();
	windows_open(&r->w, r->window_open_ns);
	if (r->o->print.batches) {
		print_window_json(r->window_open_ns, 0, stdout);
		fflush(stdout);
	}
	return 0;
}

/* The window closes: its end taken first, then the programs stop (their
 * flag), the module stops, and the links go on kernel.c's thread while
 * mclat carries on.  What they sent is read by the next gather. */
static int window_close(struct run *r)
{
	if (!r->window_open_ns)
		return 0;
	uint64_t now = mono_ns();
	windows_close(&r->w, now);
	if (r->k)
		kernel_sampling(r->k, 0);
	if (r->o->print.batches)
		print_window_json(r->window_open_ns, now, stdout);
	r->iv.window_ns += now - r->window_open_ns;
	r->window_open_ns = 0;
	int rc = r->stock ? 0 : module_window(r->s, r->module, 0);
	if (r->k)
		kernel_detach(r->k);
	return rc;
}

/* The window holds the batches the budget asks for. */
static int budget_spent(struct run *r)
{
	return r->budget && r->k && kernel_replies(r->k) - r->replies_at >= r->budget;
}

/* An interval ends: to the exporter and to stdout. */
static void report(struct run *r)
{
	if (r->metrics)
		metrics_update(r->metrics, &r->iv, interval_sampled(&r->iv));
	if (!r->o->no_ui)
		print_interval(&r->iv, &r->o->print, stdout);
}

static int run_loop(struct run *r)
{
	if (r->o->metrics && !(r->metrics = metrics_start(r->o->metrics, r->o->print.shown)))
		return 1;
	if (r->o->sample < 1 && r->k && r->o->sample_batches)
		r->budget = (unsigned long long)((double)r->o->sample_batches * r->o->interval + 0.5);
	uint64_t step = (uint64_t)(r->o->interval * 1e9), start = mono_ns(), next = start + step;
	uint64_t window = (uint64_t)(r->o->sample * (double)step), close_at = 0;
	uint64_t poll_ns = POLL_MS * 1000000ull, gathered = 0;
	long printed = 0;
	int rc = 0;
	if (r->window_open_ns) /* main opened the first */
		close_at = r->window_open_ns + window;
	while (!cli_stop) {
		uint64_t now = mono_ns();
		int closing = r->window_open_ns && (now >= close_at || budget_spent(r));
		if (closing && window_close(r) != 0) {
			rc = 1;
			break;
		}
		/* Inside a window the loop wakes every BUDGET_STEP_MS for the
		 * budget; the module is polled every POLL_MS only. */
		if (closing || !r->window_open_ns || now - gathered >= poll_ns) {
			if (gather(r, 0) != 0) {
				rc = 1;
				break;
			}
			gathered = now;
		}
		now = mono_ns();
		if (now >= next) {
			if (window_close(r) != 0 || gather(r, 0) != 0) {
				rc = 1;
				break;
			}
			gathered = now;
			r->iv.length_ns = now - start;
			if (r->o->sample >= 1)
				r->iv.window_ns = r->iv.length_ns;
			report(r);
			interval_reset(&r->iv);
			if (fflush(stdout) != 0 || ferror(stdout))
				return errno == EPIPE || cli_reader_gone() ? 0 : 1;
			if (r->o->count && ++printed >= r->o->count)
				return 0;
			start = now;
			next += step;
			if (next < now)
				next = now + step; /* the machine stalled: no burst of empty lines */
			if (r->o->sample < 1) {
				if (window_open(r) != 0) {
					rc = 1;
					break;
				}
				close_at = r->window_open_ns + window;
			}
		}
		uint64_t wait = poll_ns, until = r->window_open_ns ? close_at : next;
		now = mono_ns();
		if (r->window_open_ns && r->budget)
			wait = BUDGET_STEP_MS * 1000000ull;
		else if (r->window_open_ns && gathered + poll_ns > now)
			wait = gathered + poll_ns - now;
		/* Between windows nothing is recorded: no poll until the
		 * interval ends (each poll is work for memcached's agent). */
		if (!r->window_open_ns && r->o->sample < 1 && until > now)
			wait = until - now;
		else if (until > now && until - now < wait)
			wait = until - now;
		else if (until <= now)
			wait = 0;
		struct timespec ts = { (time_t)(wait / 1000000000u), (long)(wait % 1000000000u) };
		nanosleep(&ts, NULL);
	}
	/* Interrupted: what has come so far, as a last (short) interval. */
	if (rc == 0 && window_close(r) == 0 && gather(r, 1) == 0) {
		r->iv.length_ns = mono_ns() - start;
		if (r->o->sample >= 1)
			r->iv.window_ns = r->iv.length_ns;
		report(r);
	}
	fflush(stdout);
	return rc;
}

/* A memcached without probe sites (Debian's): nothing to inject, no
 * module; the BPF programs alone measure the stages up to the read's
 * end, and the whole.  Says which stages it cannot measure. */
static int run_stock(struct run *r)
{
	uint16_t port = (uint16_t)procnet_listen_port(r->o->pid);
	char why[256];
	if (r->o->no_bpf) {
		fprintf(stderr, "mclat: process %d has no probe sites (a memcached not built with "
				"xprobes-dtrace), and without BPF there is nothing to measure\n",
			(int)r->o->pid);
		return 1;
	}
	r->k = kernel_open(r->o->pid, port, why, sizeof(why));
	if (!r->k) {
		fprintf(stderr, "mclat: %s\nmclat: process %d has no probe sites either: nothing "
				"to measure\n", why, (int)r->o->pid);
		return 1;
	}
	fprintf(stderr, "mclat: process %d has no probe sites (a memcached not built with "
			"xprobes-dtrace): measuring the kernel stages rx, tcpip_rx, epoll, wait, read "
			"and total; memcached and tx need its probe sites\n"
			"mclat: total here runs from rx to the reply's transmission, not to read's "
			"end: it holds memcached and tx, which the stages shown leave out, so the "
			"stages sum to less than total\n", (int)r->o->pid);
	fprintf(stderr, "mclat: tracing memcached %d (port %u) with BPF: us per read batch "
			"(pipelined requests share one)\n", (int)r->o->pid, port);
	int rc = 1;
	unsigned char shown[NSTAGES];
	for (int i = 0; i < NSTAGES; i++)
		shown[i] = i != ST_MEMCACHED && i != ST_TX;
	r->o->print.shown = shown;
	r->w.all = r->o->sample >= 1;
	if (r->o->sample < 1)
		kernel_detach(r->k); /* until the first window */
	else
		kernel_sampling(r->k, 1);
	r->j = join_new(1, on_batch, r, &r->iv, &r->w);
	if (r->j && (r->o->sample >= 1 || window_open(r) == 0))
		rc = run_loop(r);
	metrics_stop(r->metrics);
	join_free(r->j);
	kernel_close(r->k);
	interval_free(&r->iv);
	return rc;
}

int main(int argc, char **argv)
{
	struct opts o = { .interval = 1, .sample = SAMPLE_DEFAULT,
			  .sample_batches = SAMPLE_BATCHES_DEFAULT, .print = { .hist = -1 } };
	cli_std_streams("mclat");
	int rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (!o.pid && (o.pid = attach_find_one("memcached", "mclat")) < 0)
		return 1;
	char *module = module_path(o.module);
	if (!module)
		return 1;
	cli_stop_on(SIGINT, SIGTERM, SIGPIPE, 0);
	struct run r = { .o = &o, .module = module, .stock = attach_use_watch(o.pid, 0) };
	if (r.stock && o.slow_ns) {
		fprintf(stderr, "mclat: --slow: process %d has no probe sites (a memcached not built "
				"with xprobes-dtrace and the tracer's flags)\n", (int)o.pid);
		free(module);
		return 1;
	}
	if (r.stock) {
		rc = run_stock(&r);
		free(module);
		return rc;
	}
	uint16_t port = (uint16_t)procnet_listen_port(o.pid);
	if (!o.no_bpf) {
		char why[256];
		r.k = kernel_open(o.pid, port, why, sizeof(why));
		if (!r.k)
			fprintf(stderr, "mclat: %s\n", why);
	}
	if (r.k && o.sample < 1)
		kernel_detach(r.k); /* until the first window */
	else if (r.k)
		kernel_sampling(r.k, 1);
	if (!r.k)
		fprintf(stderr, "mclat: without BPF only the memcached stage is measured "
				"(process__command__start to _end); rx, tcpip_rx, epoll, wait, read, "
				"tx and total need the kernel programs\n");
	struct session s = { .fd = -1, .timeout_ms = SESSION_DEFAULT_TIMEOUT_MS };
	r.s = &s;
	int ours = 0;
	struct slow sl = { 0 };
	unsigned char shown[NSTAGES];
	for (int i = 0; i < NSTAGES; i++)
		shown[i] = r.k || i == ST_MEMCACHED;
	o.print.shown = shown;
	r.w.all = o.sample >= 1;
	r.j = join_new(r.k != NULL, on_batch, &r, &r.iv, &r.w);
	if (!r.j || attach_connect(&s, o.pid, "mclat") != 0 ||
	    module_load(&s, module, &ours) != 0) {
		rc = 1;
		goto out;
	}
	/* Loaded, the module records: until the first window, not. */
	if (o.sample < 1 && module_window(&s, module, 0) != 0) {
		rc = 1;
		goto unload;
	}
	char how[160] = "without BPF";
	if (r.k && kernel_raw_syscalls(r.k))
		snprintf(how, sizeof(how), "with BPF (raw syscall tracepoints: %s)",
			 kernel_raw_syscalls(r.k));
	else if (r.k)
		snprintf(how, sizeof(how), "with BPF");
	char sampling[96] = "every request (--all)";
	if (o.sample < 1)
		snprintf(sampling, sizeof(sampling), "sampling %.3g%% (%.0f ms of each %.3g s)",
			 100 * o.sample, 1000 * o.sample * o.interval, o.interval);
	if (o.slow_ns && slow_start(&sl, &s, module, o.slow_dir, o.slow_ns, o.slow_libcalls,
				       o.slow_depth) != 0) {
		rc = 1;
		goto unload;
	}
	if (o.slow_ns)
		r.slow = &sl;
	/* The first window is open when the line says mclat is tracing. */
	if (o.sample < 1 && window_open(&r) != 0) {
		rc = 1;
		goto unload;
	}
	fprintf(stderr, "mclat: tracing memcached %d (port %u) %s, %s: us per read batch "
			"(pipelined requests share one)\n",
		(int)o.pid, port, how, sampling);
	rc = run_loop(&r);
unload:
	if (ours)
		module_unload(&s, module);
	/* The module gone, its open requests are dropped: the recorder ends. */
	if (slow_finish(&sl) && rc == 0)
		rc = 1;
out:
	metrics_stop(r.metrics);
	session_close(&s);
	join_free(r.j);
	kernel_close(r.k);
	interval_free(&r.iv);
	free(module);
	return rc;
}
