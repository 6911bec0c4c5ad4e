/* SPDX-License-Identifier: MIT */
/* mcload: a memcached load generator.
 *
 * One process, M worker threads, N connections spread over them (conn i
 * on thread i % M).  Each thread runs its own epoll loop over non-blocking
 * sockets; nothing is shared between threads on the hot path except the
 * optional ground-truth counters (relaxed atomic adds).
 */
#ifndef MCLOAD_H
#define MCLOAD_H

#include <netdb.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "hist.h"

#define MCLOAD_MAX_KEY    250     /* memcached's limit */
#define MCLOAD_MAX_WIDTH  100     /* keys in one multi-get */
#define MCLOAD_MAX_VALUE  (1024 * 1024)

enum mc_proto { PROTO_TEXT, PROTO_BINARY };
enum truth_fmt { TRUTH_TSV, TRUTH_JSON };

struct config {
	/* Target. */
	char host[256];
	char port[16];
	struct sockaddr_storage addr;
	socklen_t addrlen;

	unsigned conns;           /* -c */
	unsigned threads;         /* -T */
	enum mc_proto proto;

	/* Workload. */
	uint64_t keys;            /* K */
	double zipf_s;            /* 0: uniform */
	uint64_t seed;
	unsigned get_weight, set_weight;
	unsigned vmin, vmax;      /* value size range, inclusive */
	unsigned width;           /* keys per get */
	const char *prefix;
	size_t prefix_len;
	int binary_keys;

	/* Pacing and length. */
	double rate;              /* total requests/s; 0: closed loop */
	unsigned pipeline;        /* closed loop: requests in flight per conn */
	double seconds;           /* 0: no time limit */
	uint64_t requests;        /* 0: no count limit */

	/* Output. */
	int json;
	const char *truth_path;
	enum truth_fmt truth_fmt;
};

/* Per-thread totals, summed into one at the end. */
struct counters {
	uint64_t requests;        /* sent: gets + sets */
	uint64_t gets, sets;
	uint64_t get_keys;        /* keys asked for, over all gets */
	uint64_t completed;       /* responses fully read */
	uint64_t hits, misses;
	uint64_t server_errors;   /* ERROR/CLIENT_ERROR/SERVER_ERROR, bad status */
	uint64_t conn_errors;     /* connections lost or protocol violations */
	uint64_t unanswered;      /* still in flight when the drain gave up */
};

/* Exact per-key counts of what was sent (--truth). */
struct truth {
	_Atomic uint64_t *gets;
	_Atomic uint64_t *sets;
};

struct run {
	const struct config *cfg;
	struct truth truth;       /* arrays NULL without --truth */
	const char *value;        /* cfg->vmax bytes of filler */
	uint64_t t0;              /* common start, CLOCK_MONOTONIC ns */
	uint64_t t_end;           /* t0 + seconds, or UINT64_MAX */
};

/* opts.c: parse argv into cfg; exits 2 with a message on any bad option. */
void opts_parse(struct config *cfg, int argc, char **argv);

/* keys.c: key IDX as sent on the wire; returns its length. */
size_t key_format(const struct config *cfg, uint64_t idx, char *out);
/* keys.c: key IDX escaped for the truth file: bytes other than printable
 * ASCII, backslash and quote as \xNN, or \u00NN when JSON. */
void key_print_escaped(const struct config *cfg, uint64_t idx, int json, FILE *to);

/* worker.c: one thread's whole run over its connections. */
struct wstate;
struct worker {
	const struct run *run;
	unsigned index;           /* thread number */
	unsigned first_conn;      /* conns first_conn, +threads, ... */
	struct counters c;
	struct hist lat;          /* ns from intended send to response */
	uint64_t t_last;          /* when its last response arrived */
	char err[512];            /* why it failed, when it did */
	struct wstate *st;        /* worker.c's own: sockets, epoll */
};
int worker_connect(struct worker *w);    /* 0, or -1 with w->err */
void worker_run(struct worker *w);

/* report.c */
void report_print(const struct config *cfg, const struct counters *c,
		  const struct hist *lat, double elapsed);
int truth_write(const struct config *cfg, const struct truth *t);

uint64_t now_ns(void);

#endif
