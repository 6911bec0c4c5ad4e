/* mclat: where a memcached request's time goes, stage by stage (issue 12).
 *
 *   mclat [-p PID] [--percentiles] [--hist STAGE] [--json] [--batches]
 *         [--no-bpf] [--module PATH] [INTERVAL [COUNT]]
 *
 * Loads bpf/mclat.bpf.c's programs (kernel stages) and modules/mclat.so
 * into memcached (the user-space stage), polls both every POLL_MS, joins
 * them (join.c) and prints one interval every INTERVAL seconds.  Without
 * BPF it reports the memcached stage alone and says what is missing.
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

#include "../common/common.h"
#include "mclat.h"

/* Each poll is a module command: a session round trip and a thread in the
 * agent, ~180 us of memcached's CPU on this VM (perf), so not too often;
 * at 50 ms a worker at 160,000 batches a second half fills its ring in
 * the module (modules/mclat.c, MCLAT_RING) and the 4 MiB kernel ring holds
 * ten times what 50 ms brings. */
#define POLL_MS 50
/* A module batch is published a few ns after its end time is taken: the
 * module's clock minus this is a time before which all are published. */
#define HORIZON_MARGIN_NS 20000000ull

struct opts {
	pid_t pid;
	double interval;
	long count; /* 0: until interrupted */
	int no_bpf;
	struct print_opts print;
	const char *module;
};

static void usage(FILE *to)
{
	fputs("usage: mclat [-p PID] [--percentiles] [--hist STAGE] [--json] [--batches] [--no-bpf]\n"
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
	      "  count     read batches in the interval\n"
	      "  -p, --pid PID        memcached's pid (default: the one running memcached)\n"
	      "      --percentiles    p50/p90/p99/max and mean of each stage\n"
	      "      --hist STAGE     log2 histogram of one stage\n"
	      "      --json           one JSON object per interval\n"
	      "      --batches        with --json: also one object per read batch (ns)\n"
	      "      --no-bpf         no kernel programs: the memcached stage alone\n"
	      "      --module PATH    the probe module (default: modules/mclat.so next to mclat)\n"
	      "  -h, --help\n"
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

/* 0, 1 (--help) or 2 (bad input, after a message). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	enum { OPT_JSON = 256, OPT_PCT, OPT_HIST, OPT_BATCHES, OPT_NOBPF, OPT_MODULE };
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "percentiles", no_argument, NULL, OPT_PCT },
		{ "hist", required_argument, NULL, OPT_HIST },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "batches", no_argument, NULL, OPT_BATCHES },
		{ "no-bpf", no_argument, NULL, OPT_NOBPF },
		{ "module", required_argument, NULL, OPT_MODULE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	char *end;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:h", longopts, NULL)) != -1) {
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
		case 'h':
			usage(stdout);
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
	if (o->print.batches && !o->print.json)
		return bad("%s goes with --json", "--batches");
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
	unsigned long long kernel_lost_seen;
	int stock; /* no probe sites: the kernel stages alone (no module, no session) */
};

static void on_batch(const struct lat_batch *b, void *arg)
{
	struct run *r = arg;
	if (interval_add(&r->iv, b) != 0)
		r->iv.lost++;
	if (r->o->print.batches)
		print_batch_json(b, stdout);
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
	return 0;
}

static int run_loop(struct run *r)
{
	unsigned char shown[NSTAGES] = { 0 };
	for (int i = 0; i < NSTAGES; i++)
		shown[i] = r->stock ? i != ST_MEMCACHED && i != ST_TX : r->k || i == ST_MEMCACHED;
	r->o->print.shown = shown;
	uint64_t step = (uint64_t)(r->o->interval * 1e9), next = mono_ns() + step;
	long printed = 0;
	int rc = 0;
	while (!cli_stop) {
		if (gather(r, 0) != 0) {
			rc = 1;
			break;
		}
		uint64_t now = mono_ns();
		if (now >= next) {
			print_interval(&r->iv, &r->o->print, stdout);
			interval_reset(&r->iv);
			if (fflush(stdout) != 0 || ferror(stdout))
				return errno == EPIPE ? 0 : 1;
			if (r->o->count && ++printed >= r->o->count)
				return 0;
			next += step;
			if (next < now)
				next = now + step; /* the machine stalled: no burst of empty lines */
		}
		uint64_t wait = POLL_MS * 1000000ull;
		if (next - now < wait)
			wait = next - now;
		struct timespec ts = { (time_t)(wait / 1000000000u), (long)(wait % 1000000000u) };
		nanosleep(&ts, NULL);
	}
	/* Interrupted: what has come so far, as a last (short) interval. */
	if (rc == 0 && gather(r, 1) == 0)
		print_interval(&r->iv, &r->o->print, stdout);
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
			"and total; memcached and tx need its probe sites\n", (int)r->o->pid);
	fprintf(stderr, "mclat: tracing memcached %d (port %u) with BPF: us per read batch "
			"(pipelined requests share one)\n", (int)r->o->pid, port);
	int rc = 1;
	r->j = join_new(1, on_batch, r, &r->iv);
	if (r->j)
		rc = run_loop(r);
	join_free(r->j);
	kernel_close(r->k);
	interval_free(&r->iv);
	return rc;
}

int main(int argc, char **argv)
{
	struct opts o = { .interval = 1, .print = { .hist = -1 } };
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
	if (!r.k)
		fprintf(stderr, "mclat: without BPF only the memcached stage is measured "
				"(process__command__start to _end); rx, tcpip_rx, epoll, wait, read, "
				"tx and total need the kernel programs\n");
	struct session s = { .fd = -1, .timeout_ms = SESSION_DEFAULT_TIMEOUT_MS };
	r.s = &s;
	int ours = 0;
	r.j = join_new(r.k != NULL, on_batch, &r, &r.iv);
	if (!r.j || attach_connect(&s, o.pid, "mclat") != 0 ||
	    module_load(&s, module, &ours) != 0) {
		rc = 1;
		goto out;
	}
	char how[160] = "without BPF";
	if (r.k && kernel_raw_syscalls(r.k))
		snprintf(how, sizeof(how), "with BPF (raw syscall tracepoints: %s)",
			 kernel_raw_syscalls(r.k));
	else if (r.k)
		snprintf(how, sizeof(how), "with BPF");
	fprintf(stderr, "mclat: tracing memcached %d (port %u) %s: us per read batch "
			"(pipelined requests share one)\n",
		(int)o.pid, port, how);
	rc = run_loop(&r);
	if (ours)
		module_unload(&s, module);
out:
	session_close(&s);
	join_free(r.j);
	kernel_close(r.k);
	interval_free(&r.iv);
	free(module);
	return rc;
}
