/* SPDX-License-Identifier: MIT */
/* mctop: the live hot-key table of a running memcached.
 *
 * The pieces, one file each:
 *   main.c     options (getopt_long), then one of the front ends below
 *   attach.c   finds memcached, injects the agent if it has none, loads
 *              modules/mctop.so, unloads it again on every exit path
 *   sample.c   one look at the module ("top N raw"): parses it and turns
 *              two looks into a frame of per-interval rates
 *   sort.c     the orders the table can be shown in
 *   prefix.c   --prefix: keys grouped by a prefix or a regex capture
 *   print.c    -C blocks, --json lines, and the JSON the W key writes
 *   ui.c       the full-screen ncurses table
 *   watch.c    a memcached without probe sites: its own watch stream,
 *              counted here and rendered in the module's raw format
 *   metrics.c  --metrics ADDR:PORT: mctop's OpenMetrics families (served by
 *              the tools' shared exporter, tools/common/exporter.c)
 *
 * The module's side of the conversation (modules/mctop.c) is the text
 * described at MCTOP_RAW_VERSION; everything else is this header.
 */
#ifndef MCTOP_H
#define MCTOP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ---- What modules/mctop.so answers to "top N raw [by=CMD,...]" ----
 *
 *   mctop 1 now_ns=N total=N tracked=N untracked=N threads=N counters=N bytes=N budget=N bound=N
 *           lat_every=N   (on the same line; optional, 1 when absent)
 *   KEY \t calls \t err \t objsize \t bytes \t lat_sum_ns \t lat_n \t first_ns \t clients
 *       \t get_hits \t get_misses \t sets \t adds \t replaces \t appends \t prepends \t cas
 *       \t touches \t incrs \t decrs \t deletes \t h0,h1,...,h31
 *   ... (at most N key lines, busiest first by calls, or by the sum of the
 *        by= commands' counts)
 *   end
 *
 * Header fields: now_ns the module's CLOCK_MONOTONIC; total commands seen
 * since load/reset; tracked keys held in counters; untracked commands no
 * counter could take (a full feed, a worker past the budget); threads the
 * worker threads with a feed; counters allocated; bytes of memory the
 * table, feeds and reading use; budget their limit; bound the most any
 * key that is not listed can have been called (the table's floor).
 *
 * Key lines: KEY escaped (bytes outside 0x21..0x7e and '\\' as \xNN, so no
 * whitespace); calls and err: calls - err <= true calls <= calls; objsize
 * the latest value size (-1: none seen); bytes value bytes moved; lat_sum_ns
 * and lat_n the summed latency of the commands that touched the key (from
 * process__command__start to process__command__end on its connection:
 * a pipelined batch counts as one), of the timed ones only (a busy worker
 * thread times one in 8, see "latency" below); first_ns when the key took its counter
 * (CLOCK_MONOTONIC); clients an estimate of the distinct connections that
 * used it; then exact per-command counts since first_ns; then the log2
 * latency histogram: h[i] counts latencies in [2^i, 2^(i+1)) ns.
 *
 * Other module commands: "budget BYTES" (the memory limit of the tables,
 * default MCTOP_DEFAULT_BUDGET; answers "budget N"), "latency auto|N"
 * (which commands are timed; answers "latency ..."), "reset", and
 * "top [N] [json]" for people.
 */
#define MCTOP_RAW_VERSION 1
#define MCTOP_HIST 32
#define MCTOP_KEY_MAX 250                        /* memcached's KEY_MAX_LENGTH */
#define MCTOP_KEY_ESCAPED (4 * MCTOP_KEY_MAX + 1) /* every byte as \xNN, NUL */
#define MCTOP_DEFAULT_BUDGET (8u << 20)
#define MCTOP_MAX_BUDGET (1ull << 40)            /* the module's most: 1 TiB */

/* Per-command counts, in the order of the key lines. */
enum mctop_cmd {
	MC_GET_HIT, MC_GET_MISS, MC_SET, MC_ADD, MC_REPLACE, MC_APPEND, MC_PREPEND, MC_CAS,
	MC_TOUCH, MC_INCR, MC_DECR, MC_DELETE, MC_NCMD
};

/* One row of the table. */
struct mctop_key {
	/* The key text (tools/common/keytext.c: UTF-8 as it is, other bytes
	 * and controls \xHH, backslash \\); a group's name with --prefix. */
	char key[MCTOP_KEY_ESCAPED];
	int key_escaped;             /* the text is not the key's bytes */
	uint64_t members;            /* keys in the row: 1, or a group's */
	uint64_t calls, err;         /* since attach: calls - err <= true <= calls */
	int64_t objsize;             /* latest value size, -1 if none */
	uint64_t bytes;              /* value bytes moved since attach */
	double reqs;                 /* calls per second over the interval (or since attach) */
	double bw_kbps;              /* value bytes as kilobits (1000 bits) per second, same span */
	double lat_us;               /* mean latency, same span; < 0 when none measured */
	uint64_t first_ns;           /* when it was first tracked (module's CLOCK_MONOTONIC) */
	uint64_t clients;            /* distinct connections, estimated */
	uint64_t ncmd[MC_NCMD];      /* since first tracked */
	uint64_t hist[MCTOP_HIST];   /* latency log2 ns buckets, same span as lat_us */
};

/* One interval's table and its header. */
struct mctop_frame {
	pid_t pid;
	char target[64];      /* "memcached -p 11211" style: comm and port */
	double uptime_s;      /* of the target process */
	double span_s;        /* what reqs/bw/lat are over: the interval, or since attach */
	double cmds_per_s;    /* all commands, tracked or not, over that span */
	uint64_t total;       /* commands since attach */
	uint64_t tracked;     /* keys held in counters */
	uint64_t untracked;   /* commands no counter could take */
	uint64_t bound;       /* error bound: the most a key not shown can have */
	size_t budget, used;  /* the module's memory, bytes */
	uint64_t lat_every;   /* LAT is of one command in N (a busy worker thread's) */
	int no_lat;           /* the source measures no latency at all (the watch stream) */
	const char *source;   /* "probes", or "memcached watch" (no probe sites) */
	uint64_t lost;        /* commands the source lost since attach (watch: skipped lines) */
	struct mctop_key *keys;
	size_t nkeys;
};

enum mctop_sort { SORT_CALLS, SORT_SIZE, SORT_REQS, SORT_BW, SORT_NEWEST, SORT_LAT };

struct mctop_opts {
	pid_t pid;             /* -p, 0: the one running memcached */
	unsigned port;         /* --port: memcached's, for the watch fallback; 0: from /proc */
	double interval_s;     /* positional, default 1 */
	long count;            /* positional, 0: until quit */
	int stream;            /* -C */
	int json;              /* --json */
	int cumulative;        /* --cumulative */
	long rows;             /* -r, 0: as many as fit (UI) / 20 (streams) */
	unsigned cmd_mask;     /* -c, bits of enum mctop_cmd; 0: all */
	const char *prefix;    /* --prefix PAT, NULL: none */
	const char *output;    /* -o FILE for W */
	const char *metrics;   /* --metrics ADDR:PORT, NULL: none */
	int no_ui;             /* --no-ui */
	size_t budget;         /* --budget, 0: the module's default */
	unsigned budget_shift; /* the unit it was typed in (10: K...), to answer in */
	const char *budget_arg; /* as typed */
	const char *latency;   /* --latency auto|N, NULL: the module's (auto) */
	enum mctop_sort sort;  /* --sort */
	int ascending;
};

struct mctop; /* the attached session and the previous look (sample.c) */

/* Attach to o->pid (or find memcached), load the module; NULL after a
 * message on stderr.  mctop_close unloads it and detaches. */
struct mctop *mctop_open(const struct mctop_opts *o);
void mctop_close(struct mctop *m);

/* Look now and fill *f (freeing what it held); 0, or -1 after a message
 * (the target exited, the connection was lost). */
int mctop_sample(struct mctop *m, struct mctop_frame *f);
void mctop_frame_free(struct mctop_frame *f);
/* Forget every key (the module's reset) and restart the rates. */
int mctop_reset(struct mctop *m);

void mctop_sort(struct mctop_frame *f, enum mctop_sort by, int ascending);
const char *mctop_sort_name(enum mctop_sort by); /* "CALLS", "REQ/S", ... */

/* "omitted", the one definition every output uses (table, JSON, the
 * full-screen header, --metrics, mctop(1)): the tracked keys that are not
 * in the rows this output shows (keys_shown: the rows' members), plus the
 * commands no counter could take. */
static inline uint64_t mctop_omitted(const struct mctop_frame *f, uint64_t keys_shown)
{
	return (f->tracked > keys_shown ? f->tracked - keys_shown : 0) + f->untracked;
}

/* The keys in f's first n rows (a --prefix group holds several). */
static inline uint64_t mctop_members(const struct mctop_frame *f, size_t n)
{
	uint64_t m = 0;
	for (size_t i = 0; i < n && i < f->nkeys; i++)
		m += f->keys[i].members;
	return m;
}

/* The frame as one JSON object on one line (at most rows keys, 0: all);
 * its fields name their units (docs/json.md). */
int mctop_print_json(const struct mctop_frame *f, size_t rows, FILE *out);
/* The frame as a -C block. */
int mctop_print_block(const struct mctop_frame *f, size_t rows, FILE *out);

/* Front ends: each returns the process exit status. */
int mctop_ui(struct mctop *m, const struct mctop_opts *o);

struct mctop_metrics;
/* Serve OpenMetrics at ADDR:PORT from a thread of its own; NULL after a
 * message.  _update publishes a new frame (top rows only: bounded label
 * cardinality). */
struct mctop_metrics *mctop_metrics_start(const char *addr, size_t rows);
void mctop_metrics_update(struct mctop_metrics *mm, const struct mctop_frame *f);
void mctop_metrics_stop(struct mctop_metrics *mm);

#endif
