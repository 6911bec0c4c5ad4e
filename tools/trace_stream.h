/* Draining a live trace while the program runs (issue 28): every thread's
 * ring is copied out as it fills and its tail moved on, so the agent's
 * buffers never fill while the tool keeps up, and what it cannot keep up
 * with is dropped in the target (never waited for), counted there, and
 * marked where it happened by a LOST record. */
#ifndef XP_TRACE_STREAM_H
#define XP_TRACE_STREAM_H

#include <signal.h>
#include <stdint.h>

#include "session.h"
#include "trace_format.h"

/* Where drained records go: thread() once per thread, before its first
 * events (name: its comm, "" if gone), events() in each thread's order.
 * Each returns 0, or -1 after printing why (the recording then stops). */
struct trace_sink {
	int (*thread)(void *ctx, int tid, const char *name);
	int (*events)(void *ctx, int tid, const struct tf_event *ev, size_t n);
	void *ctx;
};

struct trace_stream_stats {
	uint64_t records;   /* drained and given to the sink */
	uint64_t lost;      /* dropped in the target, by the buffers' counts */
	unsigned threads;
};

/* Drain s's process into sink until *stop is set (a signal), until_ms
 * (CLOCK_MONOTONIC ms, 0: no limit) passes, or the process goes away;
 * then stop tracing and drain what is left (unless the process is gone).
 * 0, or 1 after a message. */
int trace_stream(struct session *s, const struct trace_sink *sink, volatile sig_atomic_t *stop,
		 long long until_ms, struct trace_stream_stats *st);

/* One pass over every buffer, for a caller with its own loop (the run
 * form drains at the program's exit): 0, 1 after a message, -1 when the
 * process is gone. */
struct trace_stream;
struct trace_stream *trace_stream_new(struct session *s, const struct trace_sink *sink);
int trace_stream_pass(struct trace_stream *t, struct trace_stream_stats *st, int *busy);
void trace_stream_free(struct trace_stream *t);

#endif
