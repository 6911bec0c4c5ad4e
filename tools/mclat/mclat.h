/* SPDX-License-Identifier: MIT */
/* mclat: where a memcached request's time goes, stage by stage.
 *
 *   main.c     options, signals, the interval loop
 *   kernel.c   bpf/mclat.bpf.c's skeleton: load, attach, its ring buffer
 *   module.c   modules/mclat.so in memcached: load, `read`, unload
 *   reply.c    the `read` answer parsed
 *   join.c     kernel events and module batches joined by (thread, fd)
 *              and time into per-batch stage times
 *   window.c   the sampling windows: does a batch lie inside one
 *   stats.c    per-interval means, percentiles, log2 histograms
 *   print.c    the line, --percentiles, --hist, --json
 *   metrics.c  --metrics: each stage a Prometheus histogram
 */
#ifndef MCLAT_H
#define MCLAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "../common/common.h"

#include <linux/types.h>

#include "../../bpf/mclat.h"

enum stage { ST_RX, ST_TCPIP_RX, ST_EPOLL, ST_WAIT, ST_READ, ST_MEMCACHED, ST_TX, ST_TOTAL,
	     NSTAGES };
extern const char *const stage_names[NSTAGES];
/* The stage named name, or -1. */
int stage_index(const char *name);

/* One read batch's stage times; measured[s] says which were. */
struct lat_batch {
	int tid, fd;
	uint64_t at_ns; /* CLOCK_MONOTONIC at the first stage's start */
	uint64_t ns[NSTAGES];
	unsigned char measured[NSTAGES];
};

/* ---- stats.c: one interval's values of every stage ---- */
struct stage_values {
	uint64_t *v;
	size_t n, cap;
	int sorted;
};
struct interval {
	struct stage_values st[NSTAGES];
	unsigned long count;     /* batches with every printed stage */
	unsigned long unmatched; /* kernel batches without a module batch */
	unsigned long partial;   /* batches missing a kernel boundary */
	unsigned long noreply;   /* kernel batches that sent no reply */
	unsigned long long lost; /* events dropped by a full ring */
	unsigned long cut;       /* batches a window's edge cut (not counted) */
	uint64_t window_ns;      /* time the windows were open in the interval */
	uint64_t length_ns;      /* the interval's length */
	uint64_t attach_ns;      /* time spent attaching the programs */
	uint64_t detach_ns;      /* and detaching them */
	unsigned long windows;   /* windows opened in the interval */
};
int interval_add(struct interval *iv, const struct lat_batch *b);
void interval_reset(struct interval *iv);
void interval_free(struct interval *iv);
/* The share of the interval the windows were open, 0..1. */
double interval_sampled(const struct interval *iv);
/* NAN without values: no data is not 0. */
double stage_mean_us(struct stage_values *s);
/* p in 0..100; max with p = 100; NAN without values. */
double stage_pct_us(struct stage_values *s, double p);

/* ---- window.c ---- */
#define WINDOWS 8
struct windows {
	int all; /* --all: one window, always open */
	unsigned n, next;
	uint64_t open_ns[WINDOWS], close_ns[WINDOWS];
};
void windows_open(struct windows *w, uint64_t open_ns);
void windows_close(struct windows *w, uint64_t close_ns);
/* 1 if [from_ns, to_ns] lies inside one of the last windows. */
int windows_hold(const struct windows *w, uint64_t from_ns, uint64_t to_ns);

/* ---- print.c ---- */
struct print_opts {
	int json, percentiles, batches;
	int hist;              /* a stage, or -1 */
	const unsigned char *shown; /* shown[s]: the stage is measured in this mode */
};
void print_interval(struct interval *iv, const struct print_opts *po, FILE *out);
void print_batch_json(const struct lat_batch *b, FILE *out);
void print_window_json(uint64_t open_ns, uint64_t close_ns, FILE *out);

/* ---- metrics.c ---- */
struct metrics;
/* Serve on addr (ADDR:PORT) the stages shown[s]; NULL after a message. */
struct metrics *metrics_start(const char *addr, const unsigned char *shown);
/* Add an interval's batches (before it is reset) and publish. */
void metrics_update(struct metrics *m, const struct interval *iv, double sampled);
void metrics_stop(struct metrics *m);

/* ---- kernel.c ---- */
struct kernel;
/* Load and attach the BPF programs for pid (port: memcached's TCP port,
 * 0 for every socket).  NULL with the reason in why. */
struct kernel *kernel_open(pid_t pid, uint16_t port, char *why, size_t whylen);
/* Hand every event waiting in the ring buffer to cb; -1 on error. */
int kernel_poll(struct kernel *k, void (*cb)(const struct mclat_event *, void *), void *arg);
unsigned long long kernel_lost(struct kernel *k);
/* Replies the programs have seen leave (a count that only grows, read
 * from their memory without a system call): the batch budget's gauge. */
unsigned long long kernel_replies(struct kernel *k);
/* Sampling: the programs on (a window is open) or off, at once (a flag
 * they read first).  kernel_open leaves them off. */
void kernel_sampling(struct kernel *k, int on);
/* The programs off and the links away (the hooks cost nothing), on a
 * thread of its own; kernel_attach brings them back, after waiting for
 * it (kernel_detached: the wait alone, and how long the last detaching
 * took, in ns).  The events already in the ring are still read.
 * kernel_attach: 0 or -errno. */
void kernel_detach(struct kernel *k);
uint64_t kernel_detached(struct kernel *k);
int kernel_attach(struct kernel *k);
void kernel_close(struct kernel *k);
/* Why the syscall boundaries come from the raw sys_enter/sys_exit
 * tracepoints (every system call on the machine runs a program); NULL
 * when they come from the syscalls:* trace events of the calls watched. */
const char *kernel_raw_syscalls(const struct kernel *k);

/* ---- module.c ---- */
char *module_path(const char *given);
int module_load(struct session *s, const char *path, int *ours);
void module_unload(struct session *s, const char *path);
struct module_batch {
	int tid, fd;
	uint64_t start_ns, end_ns;
};
/* One `read`: cb for each batch; *now_ns the module's clock when asked,
 * *dropped its drops since; returns 1 if more are waiting, 0, or -1. */
int module_read(struct session *s, const char *path,
		void (*cb)(const struct module_batch *, void *), void *arg, uint64_t *now_ns,
		unsigned long long *dropped);

/* `window open` / `window close`: the module records only in windows. */
int module_window(struct session *s, const char *path, int open);

/* ---- reply.c ---- */
/* Parse a `read` answer: cb for each batch, *now_ns and *dropped from it;
 * returns its "more" (0 or 1), or -1 with the reason in why. */
int module_parse_reply(const char *reply, void (*cb)(const struct module_batch *, void *),
		       void *arg, uint64_t *now_ns, unsigned long long *dropped, char *why,
		       size_t whylen);

/* ---- join.c ---- */
struct join;
struct join *join_new(int with_kernel, void (*out)(const struct lat_batch *, void *), void *arg,
		      struct interval *iv, const struct windows *w);
void join_kernel(const struct mclat_event *e, void *join);
void join_module(const struct module_batch *m, void *join);
/* A memcached without probe sites: the kernel event alone gives rx,
 * tcpip_rx, epoll, wait, read and total (memcached and tx need the
 * module's end of the batch), handed out at once. */
void join_kernel_alone(const struct mclat_event *e, void *join);
/* Module batches that ended before horizon_ns are all in: join every
 * kernel event whose reply left before it (final: every one). */
void join_run(struct join *j, uint64_t horizon_ns, int final);
void join_free(struct join *j);

#endif
