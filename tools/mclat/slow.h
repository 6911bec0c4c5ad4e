/* SPDX-License-Identifier: MIT */
/* mclat --slow THRESHOLD -o DIR (slow.c): the function graph of each
 * request slower than THRESHOLD, into a uftrace data directory. */
#ifndef MCLAT_SLOW_H
#define MCLAT_SLOW_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct session;
struct lat_batch;

/* "1ms", "500us", "2.5ms", "1s", "800ns" (a bare number: microseconds, as
 * trace -t takes it) into *ns, > 0; -1 if it is none of those. */
int slow_parse_threshold(const char *arg, uint64_t *ns);

struct slow {
	pid_t child; /* xprobes PID trace record -o DIR --requests; 0: none */
	const char *dir;
	uint64_t threshold_ns;
	FILE *stages; /* DIR/mclat-stages.json, once a slow batch is measured */
	int stages_failed;
};

/* Starts the recorder (a child: `xprobes PID trace record -o DIR
 * --requests`, with --no-libcall unless libcalls, and -D depth unless
 * depth is 0), waits until s's process says tracing is on, then sets the
 * module's threshold.  0, or -1 after a message. */
int slow_start(struct slow *sl, struct session *s, const char *module, const char *dir,
	       uint64_t threshold_ns, int libcalls, unsigned depth);
/* A read batch mclat measured (kernel stages with BPF): if its memcached
 * stage reached the threshold, its stages go to DIR/mclat-stages.json,
 * one --batches JSON object a line, beside the graphs. */
void slow_batch(struct slow *sl, const struct lat_batch *b);

/* After the module is unloaded (its open requests dropped): the recorder
 * stopped, its directory finished.  0, or 1 if it failed. */
int slow_finish(struct slow *sl);

#endif
