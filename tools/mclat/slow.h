/* SPDX-License-Identifier: MIT */
/* mclat --slow THRESHOLD -o DIR (slow.c): the function graph of each
 * request slower than THRESHOLD, into a uftrace data directory. */
#ifndef MCLAT_SLOW_H
#define MCLAT_SLOW_H

#include <stdint.h>
#include <sys/types.h>

struct session;

/* "1ms", "500us", "2.5ms", "1s", "800ns" (a bare number: microseconds, as
 * trace -t takes it) into *ns, > 0; -1 if it is none of those. */
int slow_parse_threshold(const char *arg, uint64_t *ns);

struct slow {
	pid_t child; /* xprobes PID trace record -o DIR --requests; 0: none */
};

/* Starts the recorder (a child: `xprobes PID trace record -o DIR
 * --requests`), waits until s's process says tracing is on, then sets
 * the module's threshold.  0, or -1 after a message. */
int slow_start(struct slow *sl, struct session *s, const char *module, const char *dir,
	       uint64_t threshold_ns);
/* After the module is unloaded (its open requests dropped): the recorder
 * stopped, its directory finished.  0, or 1 if it failed. */
int slow_finish(struct slow *sl);

#endif
