/* SPDX-License-Identifier: MIT */
/* mcsnoop: every memcached command as one line.
 *
 *   mcsnoop [-p PID] [-c CMDS] [-k GLOB] [--json] [-d SECONDS] [-n COUNT]
 *
 * Loads modules/mcsnoop.so into memcached for this session and asks it
 * for its events every POLL_MS (at once again while it says more are
 * waiting).  Drops are reported on stderr as "mcsnoop: N events dropped",
 * so stdout holds only events.  See mcsnoop(1).
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
#include "mcsnoop.h"

#define POLL_MS 25
#define READ_MAX 4096

struct opts {
	pid_t pid;
	struct snoop_filter filter;
	int json;
	double duration; /* 0: until interrupted */
	long count;      /* 0: no limit */
	const char *module;
	unsigned port;   /* --port, for the watch stream; 0: from /proc */
};

static void usage(FILE *to)
{
	fputs("usage: mcsnoop [-p PID] [-c CMDS] [-k GLOB] [--json] [-d SECONDS] [-n COUNT]\n"
	      "  -p, --pid PID         memcached's pid (default: the one running memcached)\n"
	      "  -c, --commands CMDS   only these, comma-separated: get set add replace append\n"
	      "                        prepend cas touch incr decr delete\n"
	      "  -k, --key GLOB        only keys matching GLOB (fnmatch(3), on the key text)\n"
	      "      --json            one JSON object per line instead of the table\n"
	      "  -d, --duration SECS   stop after SECS seconds\n"
	      "  -n, --count N         stop after N events shown\n"
	      "      --module PATH     the probe module (default: modules/mcsnoop.so next to mcsnoop)\n"
	      "      --port PORT       memcached's TCP port, for its watch stream when it has no\n"
	      "                        probe sites (default: the lowest it listens on)\n"
	      "  -h, --help\n"
	      "      --version\n"
	      "Drops are reported on stderr as 'mcsnoop: N events dropped'.  See mcsnoop(1).\n",
	      to);
}

static int bad(const char *fmt, const char *arg)
{
	fputs("mcsnoop: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs(" (mcsnoop --help for the options)\n", stderr);
	return 2;
}

/* 0, 1 (--help, --version) or 2 (bad input, after a message). */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	enum { OPT_JSON = 256, OPT_MODULE, OPT_VERSION, OPT_PORT };
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "commands", required_argument, NULL, 'c' },
		{ "key", required_argument, NULL, 'k' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "duration", required_argument, NULL, 'd' },
		{ "count", required_argument, NULL, 'n' },
		{ "module", required_argument, NULL, OPT_MODULE },
		{ "port", required_argument, NULL, OPT_PORT },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	char *end;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:c:k:d:n:h", longopts, NULL)) != -1) {
		errno = 0;
		switch (c) {
		case 'p':
			if (cli_parse_pid(optarg, &o->pid))
				return bad("-p wants a process id, got '%s'", optarg);
			break;
		case 'c':
			if (snoop_cmd_mask(optarg, &o->filter.cmd_mask) != 0)
				return 2;
			break;
		case 'k':
			o->filter.key_glob = optarg;
			break;
		case OPT_JSON:
			o->json = 1;
			break;
		case 'd':
			o->duration = strtod(optarg, &end);
			if (errno || *end || end == optarg || !(o->duration > 0) || isinf(o->duration))
				return bad("-d wants a positive number of seconds, got '%s'", optarg);
			break;
		case 'n':
			o->count = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || o->count <= 0)
				return bad("-n wants a positive count, got '%s'", optarg);
			break;
		case OPT_MODULE:
			o->module = optarg;
			break;
		case OPT_PORT: {
			long port = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || port < 1 || port > 65535)
				return bad("--port wants a TCP port (1 to 65535), got '%s'", optarg);
			o->port = (unsigned)port;
			break;
		}
		case 'h':
			usage(stdout);
			return 1;
		case OPT_VERSION:
			printf("mcsnoop %s\n", XPROBES_VERSION);
			return 1;
		case ':':
			return bad("%s needs an argument", argv[optind - 1]);
		default: {
			/* A short option may sit in a cluster (-xj): name it alone. */
			char opt[3] = { '-', (char)optopt, '\0' };
			return bad("unknown option '%s'", optopt ? opt : argv[optind - 1]);
		}
		}
	}
	if (optind < argc)
		return bad("unexpected argument '%s'", argv[optind]);
	return 0;
}

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Print the events of one `read` reply that pass the filter; returns
 * what the end line says is still waiting (1), 0, or -1 if the reply
 * has no end line.  *shown counts the events printed. */
static int show_reply(char *reply, const struct opts *o, int64_t wall_offset, long *shown)
{
	struct snoop_event e;
	int more = -1;
	for (char *line = reply, *nl; *line && more < 0; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			nl = line + strlen(line) - 1; /* the last, unterminated line */
		else
			*nl = '\0';
		unsigned long long dropped;
		if (snoop_parse_end(line, &dropped, &more) == 0) {
			if (dropped)
				fprintf(stderr, "mcsnoop: %llu events dropped\n", dropped);
			continue;
		}
		if (snoop_parse_event(line, &e) != 0 || !snoop_match(&o->filter, &e))
			continue;
		if (o->count && *shown >= o->count)
			continue; /* read already, past -n: not shown */
		(o->json ? snoop_print_json : snoop_print_text)(&e, wall_offset, stdout);
		++*shown;
	}
	return more;
}

/* Poll until a signal, -d, -n, or an error: the exit status. */
static int snoop(struct session *s, const struct opts *o, const char *module)
{
	char line[256];
	snprintf(line, sizeof(line), "command %s read %d", snoop_module_name(module), READ_MAX);
	int64_t wall_offset = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
	int64_t deadline = o->duration ? clock_ns(CLOCK_MONOTONIC) + (int64_t)(o->duration * 1e9) : 0;
	long shown = 0;
	if (!o->json)
		snoop_print_header(stdout);
	while (!cli_stop) {
		char *reply;
		int rc = session_call(s, line, &reply);
		if (rc < 0)
			return 1;
		if (rc > 0 || strncmp(reply, "mcsnoop 1 ", 10) != 0) {
			fprintf(stderr, "mcsnoop: unexpected answer from the module: %.200s\n", reply);
			free(reply);
			return 1;
		}
		int more = show_reply(reply, o, wall_offset, &shown);
		free(reply);
		if (fflush(stdout) != 0 || ferror(stdout))
			return errno == EPIPE || cli_reader_gone() ? 0 : 1; /* the reader went away: done */
		if (o->count && shown >= o->count)
			break;
		int64_t now = clock_ns(CLOCK_MONOTONIC);
		if (deadline && now >= deadline)
			break;
		if (more == 1)
			continue;
		int64_t wait = POLL_MS * 1000000LL;
		if (deadline && deadline - now < wait)
			wait = deadline - now;
		struct timespec ts = { wait / 1000000000, wait % 1000000000 };
		nanosleep(&ts, NULL); /* a signal ends it early */
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	cli_std_streams("mcsnoop");
	int rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (!o.pid && (o.pid = attach_find_one("memcached", "mcsnoop")) < 0)
		return 1;
	if (attach_use_watch(o.pid, o.port)) {
		/* A stock memcached: its own watch stream, nothing injected. */
		cli_stop_on(SIGINT, SIGTERM, SIGPIPE, 0);
		struct snoop_watch_opts wo = { .port = o.port, .filter = &o.filter, .json = o.json,
					       .duration = o.duration, .count = o.count };
		return snoop_watch(o.pid, &wo);
	}
	char *module = snoop_module_path(o.module);
	if (!module)
		return 1;
	/* SIGINT, SIGTERM and SIGPIPE end the loop (a sleep ends at once; the
	 * agent connection retries its own EINTRs). */
	cli_stop_on(SIGINT, SIGTERM, SIGPIPE, 0);
	struct session s = { .fd = -1, .timeout_ms = SESSION_DEFAULT_TIMEOUT_MS };
	int ours = 0;
	if (attach_connect(&s, o.pid, "mcsnoop") != 0 || snoop_load(&s, module, &ours) != 0) {
		session_close(&s);
		free(module);
		return 1;
	}
	rc = snoop(&s, &o, module);
	if (ours)
		snoop_unload(&s, module);
	session_close(&s);
	free(module);
	return rc;
}
