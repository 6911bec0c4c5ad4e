/* SPDX-License-Identifier: MIT */
/* Command line.  Every bad option or combination ends the program with
 * one line saying what is wrong and exit status 2. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xprobes/version.h>

#include "../common/common.h"
#include "mcload.h"

static const char usage_text[] =
	"usage: mcload [options]\n"
	"  -s, --server HOST:PORT    memcached to load (default 127.0.0.1:11211)\n"
	"  -c, --connections N       connections (default 4)\n"
	"  -T, --threads N           threads sharing them (default 1)\n"
	"  -B, --binary              binary protocol (--protocol text|binary; default text)\n"
	"  -k, --keys K              distinct keys (default 100000)\n"
	"  -z, --zipf S              Zipf popularity with exponent S (default 0: uniform)\n"
	"      --seed N              random seed (default 1)\n"
	"  -r, --ratio G:S           gets to sets (default 9:1)\n"
	"  -v, --value-size N|MIN-MAX  set value bytes, 0 to 1M, K and M suffixes\n"
	"                            (default 100)\n"
	"  -m, --multiget W          keys per get (default 1)\n"
	"  -R, --rate OPS            open loop: requests/s over all connections\n"
	"  -P, --pipeline N          closed loop: requests in flight per connection (default 1)\n"
	"  -d, --seconds S           run time (default 10 unless --requests)\n"
	"  -n, --requests N          stop after N requests in all\n"
	"      --key-prefix STR      key names: STR then the key number (default \"key:\")\n"
	"      --binary-keys         key number as 8 raw bytes (binary protocol only)\n"
	"      --truth FILE          write per-key counts sent: key TAB gets TAB sets\n"
	"      --truth-format tsv|json\n"
	"      --json                print the results as one JSON object\n"
	"  -h, --help                this text\n"
	"  -V, --version\n";

__attribute__((format(printf, 1, 2), noreturn))
static void bad(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("mcload: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs(" (mcload --help for the options)\n", stderr);
	va_end(ap);
	exit(2);
}

static uint64_t whole(const char *opt, const char *arg, uint64_t min, uint64_t max)
{
	char *end;
	if (arg[0] < '0' || arg[0] > '9')
		bad("%s: '%s' is not a whole number", opt, arg);
	errno = 0;
	unsigned long long v = strtoull(arg, &end, 10);
	if (*end || errno)
		bad("%s: '%s' is not a whole number", opt, arg);
	if (v < min || v > max)
		bad("%s: %s is out of range (%llu to %llu)", opt, arg,
		    (unsigned long long)min, (unsigned long long)max);
	return v;
}

static double real(const char *opt, const char *arg, double min, double max)
{
	char *end;
	double v = strtod(arg, &end);
	if (end == arg || *end || !isfinite(v))
		bad("%s: '%s' is not a number", opt, arg);
	if (v < min || v > max)
		bad("%s: %s is out of range (%g to %g)", opt, arg, min, max);
	return v;
}

/* A byte count, 0 or with a K, M... suffix; out of range is said in the
 * unit typed ("2M is out of range (0 to 1M)"). */
static uint64_t bytes(const char *opt, const char *arg, uint64_t max)
{
	unsigned long long v;
	unsigned shift = 0;
	if (strcmp(arg, "0") == 0)
		return 0;
	if (cli_parse_size(arg, &v, &shift))
		bad("%s: '%s' is not a size (bytes, or with a K or M suffix)", opt, arg);
	if (v > max) {
		char most[32];
		cli_format_size(max, shift, 0, most, sizeof(most));
		bad("%s: %s is out of range (0 to %s)", opt, arg, most);
	}
	return v;
}

/* "A:B" or, with SEP '-', "N" alone meaning N-N (sizes with bytes()). */
static void pair(const char *opt, const char *arg, char sep, uint64_t max,
		 unsigned *a, unsigned *b)
{
	char first[32];
	const char *s = strchr(arg, sep);
	if (!s && sep == '-') {
		*a = *b = (unsigned)bytes(opt, arg, max);
		return;
	}
	if (!s || (size_t)(s - arg) >= sizeof first)
		bad("%s: expected A%cB, got '%s'", opt, sep, arg);
	memcpy(first, arg, (size_t)(s - arg));
	first[s - arg] = 0;
	*a = (unsigned)(sep == '-' ? bytes(opt, first, max) : whole(opt, first, 0, max));
	*b = (unsigned)(sep == '-' ? bytes(opt, s + 1, max) : whole(opt, s + 1, 0, max));
}

static void server(struct config *cfg, const char *arg)
{
	const char *colon = strrchr(arg, ':');
	if (!colon || colon == arg || !colon[1])
		bad("--server: expected HOST:PORT, got '%s'", arg);
	size_t hl = (size_t)(colon - arg);
	if (arg[0] == '[' && colon[-1] != ']')
		bad("--server: '%s': the IPv6 address lacks its closing ']' ([ADDR]:PORT)", arg);
	if (arg[0] == '[' && colon[-1] == ']') {   /* [v6]:port */
		arg++;
		hl -= 2;
	}
	if (hl >= sizeof cfg->host || strlen(colon + 1) >= sizeof cfg->port)
		bad("--server: '%s' is too long", arg);
	memcpy(cfg->host, arg, hl);
	cfg->host[hl] = 0;
	whole("--server port", colon + 1, 1, 65535);
	strcpy(cfg->port, colon + 1);
}

static void resolve(struct config *cfg)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *ai;
	int e = getaddrinfo(cfg->host, cfg->port, &hints, &ai);
	if (e)
		bad("--server: cannot resolve '%s': %s", cfg->host, gai_strerror(e));
	memcpy(&cfg->addr, ai->ai_addr, ai->ai_addrlen);
	cfg->addrlen = ai->ai_addrlen;
	freeaddrinfo(ai);
}

static unsigned digits(uint64_t v)
{
	unsigned n = 1;
	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/* What no single option can check alone. */
static void check(struct config *cfg)
{
	if (cfg->threads > cfg->conns)
		bad("--threads %u is more than --connections %u", cfg->threads, cfg->conns);
	if (cfg->binary_keys && cfg->proto != PROTO_BINARY)
		bad("--binary-keys needs the binary protocol (-B)");
	if (cfg->rate > 0 && cfg->pipeline > 1)
		bad("--pipeline is for the closed loop; --rate sends on its own timeline");
	if (cfg->get_weight + cfg->set_weight == 0)
		bad("--ratio: gets and sets cannot both be 0");
	if (cfg->vmin > cfg->vmax)
		bad("--value-size: minimum %u is above maximum %u", cfg->vmin, cfg->vmax);
	cfg->prefix_len = strlen(cfg->prefix);
	size_t keylen = cfg->prefix_len + (cfg->binary_keys ? 8 : digits(cfg->keys - 1));
	if (keylen > MCLOAD_MAX_KEY)
		bad("--key-prefix: keys would be %zu bytes, memcached's limit is %d",
		    keylen, MCLOAD_MAX_KEY);
	if (cfg->proto == PROTO_TEXT)
		for (const char *p = cfg->prefix; *p; p++)
			if ((unsigned char)*p <= ' ' || *p == 0x7f)
				bad("--key-prefix: the text protocol cannot send spaces or control bytes");
	if (cfg->seconds == 0 && cfg->requests == 0)
		cfg->seconds = 10;
	resolve(cfg);
}

void opts_parse(struct config *cfg, int argc, char **argv)
{
	enum { O_SEED = 256, O_JSON, O_TRUTH, O_TRUTH_FMT, O_PREFIX, O_BINKEYS, O_PROTO };
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 's' },
		{ "connections", required_argument, NULL, 'c' },
		{ "threads", required_argument, NULL, 'T' },
		{ "binary", no_argument, NULL, 'B' },
		{ "protocol", required_argument, NULL, O_PROTO },
		{ "keys", required_argument, NULL, 'k' },
		{ "zipf", required_argument, NULL, 'z' },
		{ "seed", required_argument, NULL, O_SEED },
		{ "ratio", required_argument, NULL, 'r' },
		{ "value-size", required_argument, NULL, 'v' },
		{ "multiget", required_argument, NULL, 'm' },
		{ "rate", required_argument, NULL, 'R' },
		{ "pipeline", required_argument, NULL, 'P' },
		{ "seconds", required_argument, NULL, 'd' },
		{ "requests", required_argument, NULL, 'n' },
		{ "key-prefix", required_argument, NULL, O_PREFIX },
		{ "binary-keys", no_argument, NULL, O_BINKEYS },
		{ "truth", required_argument, NULL, O_TRUTH },
		{ "truth-format", required_argument, NULL, O_TRUTH_FMT },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	*cfg = (struct config){
		.host = "127.0.0.1", .port = "11211", .conns = 4, .threads = 1,
		.keys = 100000, .seed = 1, .get_weight = 9, .set_weight = 1,
		.vmin = 100, .vmax = 100, .width = 1, .pipeline = 1, .prefix = "key:",
	};
	opterr = 0;   /* our own messages, with exit 2 */
	int o;
	while ((o = getopt_long(argc, argv, ":s:c:T:Bk:z:r:v:m:R:P:d:n:hV", longopts, NULL)) != -1) {
		switch (o) {
		case 's': server(cfg, optarg); break;
		case 'c': cfg->conns = (unsigned)whole("--connections", optarg, 1, 10000); break;
		case 'T': cfg->threads = (unsigned)whole("--threads", optarg, 1, 1024); break;
		case 'B': cfg->proto = PROTO_BINARY; break;
		case O_PROTO:
			if (strcmp(optarg, "text") && strcmp(optarg, "binary"))
				bad("--protocol: expected text or binary, got '%s'", optarg);
			cfg->proto = strcmp(optarg, "text") ? PROTO_BINARY : PROTO_TEXT;
			break;
		case 'k': cfg->keys = whole("--keys", optarg, 1, 1ull << 40); break;
		case 'z': cfg->zipf_s = real("--zipf", optarg, 0, 10); break;
		case O_SEED: cfg->seed = whole("--seed", optarg, 0, UINT64_MAX); break;
		case 'r': pair("--ratio", optarg, ':', 1000000, &cfg->get_weight, &cfg->set_weight); break;
		case 'v': pair("--value-size", optarg, '-', MCLOAD_MAX_VALUE, &cfg->vmin, &cfg->vmax); break;
		case 'm': cfg->width = (unsigned)whole("--multiget", optarg, 1, MCLOAD_MAX_WIDTH); break;
		case 'R': cfg->rate = real("--rate", optarg, 0.001, 1e9); break;
		case 'P': cfg->pipeline = (unsigned)whole("--pipeline", optarg, 1, 4096); break;
		case 'd': cfg->seconds = real("--seconds", optarg, 0.001, 1e6); break;
		case 'n': cfg->requests = whole("--requests", optarg, 1, UINT64_MAX); break;
		case O_PREFIX: cfg->prefix = optarg; break;
		case O_BINKEYS: cfg->binary_keys = 1; break;
		case O_TRUTH: cfg->truth_path = optarg; break;
		case O_TRUTH_FMT:
			if (strcmp(optarg, "tsv") && strcmp(optarg, "json"))
				bad("--truth-format: expected tsv or json, got '%s'", optarg);
			cfg->truth_fmt = strcmp(optarg, "tsv") ? TRUTH_JSON : TRUTH_TSV;
			break;
		case O_JSON: cfg->json = 1; break;
		case 'h': fputs(usage_text, stdout); exit(0);
		case 'V': printf("mcload %s\n", XPROBES_VERSION); exit(0);
		case ':': bad("%s needs a value", argv[optind - 1]);
		default:
			if (optopt)
				bad("unknown option '-%c'", optopt);
			bad("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad("unexpected argument '%s'", argv[optind]);
	check(cfg);
}
