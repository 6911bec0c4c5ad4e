/* Printing a function-graph trace (issue 11): records already copied out of
 * the target, in, text out.  No process I/O here (names come through
 * callbacks), so tests/unit/test_trace_format.c runs it on synthetic
 * record streams. */
#ifndef XP_TRACE_FORMAT_H
#define XP_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../lib/trace/trace.h"

/* The two (TSC, CLOCK_MONOTONIC ns) pairs `trace buffers` prints. */
struct tf_clock {
	uint64_t start_tsc, start_ns, now_tsc, now_ns;
};

/* TSC to ns on the line through the two pairs, in 128-bit arithmetic (a
 * product of two 64-bit spans does not fit in 64 bits). */
uint64_t tf_tsc_ns(const struct tf_clock *c, uint64_t tsc);

/* One record, decoded. */
struct tf_event {
	uint64_t ns;
	uint64_t addr;  /* function, site record, or (LOST) the count */
	unsigned kind;  /* enum xp_trace_kind */
};

/* Decode n raw records (time = TSC << 2 | kind). */
void tf_decode(const struct xp_trace_rec *rec, size_t n, const struct tf_clock *c,
	       struct tf_event *out);

struct tf_thread {
	int tid;
	const struct tf_event *ev;
	size_t n;
	uint64_t lost;  /* the buffer header's count: drops without a LOST record show at the end */
};

/* Names are looked up only while printing.  Both return a string that
 * stays valid until the formatter returns (the caller's cache). */
struct tf_names {
	const char *(*func)(void *ctx, uint64_t addr);
	const char *(*site)(void *ctx, uint64_t addr); /* "provider:name" */
	void *ctx;
};

struct tf_trace {
	const struct tf_thread *threads;
	size_t nthreads;
	int pid;             /* for chrome's "pid" */
	uint64_t origin_ns;  /* chrome timestamps count from here (the trace's start) */
	struct tf_names names;
};

/* What to show.  A closed call shorter than min_ns is left out with
 * everything it called; tid 0 means every thread. */
struct tf_filter {
	uint64_t min_ns;
	int tid;
};

enum tf_sort { TF_SORT_CALLS, TF_SORT_TOTAL, TF_SORT_SELF, TF_SORT_AVG, TF_SORT_MAX };

/* Each returns 0, or -1 when out of memory or the stream failed. */
int tf_graph(FILE *out, const struct tf_trace *t, const struct tf_filter *f);
int tf_chrome(FILE *out, const struct tf_trace *t, const struct tf_filter *f);
int tf_folded(FILE *out, const struct tf_trace *t, const struct tf_filter *f);
int tf_stat(FILE *out, const struct tf_trace *t, const struct tf_filter *f, enum tf_sort by);

/* "calls", "total", ...: 0 and *by set, or -1. */
int tf_sort_parse(const char *s, enum tf_sort *by);

#endif
