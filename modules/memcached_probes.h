/* SPDX-License-Identifier: MIT */
/* The sites of memcached's dtrace build that modules attach to, with
 * their types written as memcached_dtrace.d declares them (the agent
 * compares them as text with the sites', so a typedef would not match).
 *
 *   XPROBES_MODULE(command, 0, MEMCACHED_KEY_PROBES(on_),
 *                  MEMCACHED_BATCH_PROBES(on_));
 *
 * needs handlers on_get, on_set, ... on_delete (and on_start, on_end). */
#ifndef XP_MEMCACHED_PROBES_H
#define XP_MEMCACHED_PROBES_H

#include <xprobes/probe.h>

/* One per command and key: get (each key of a multi-get, hits and
 * misses), the stores, touch, cas, incr, decr, delete. */
#define MEMCACHED_KEY_PROBES(p)                                                               \
	XPROBES_PROBE("memcached:command__get", p##get, (int, const char *, int, int, int64_t)), \
	XPROBES_PROBE("memcached:command__set", p##set, (int, const char *, int, int, int64_t)), \
	XPROBES_PROBE("memcached:command__add", p##add, (int, const char *, int, int, int64_t)), \
	XPROBES_PROBE("memcached:command__replace", p##replace,                               \
		      (int, const char *, int, int, int64_t)),                                \
	XPROBES_PROBE("memcached:command__append", p##append,                                 \
		      (int, const char *, int, int, int64_t)),                                \
	XPROBES_PROBE("memcached:command__prepend", p##prepend,                               \
		      (int, const char *, int, int, int64_t)),                                \
	XPROBES_PROBE("memcached:command__cas", p##cas, (int, const char *, int, int, int64_t)), \
	XPROBES_PROBE("memcached:command__touch", p##touch,                                   \
		      (int, const char *, int, int, int64_t)),                                \
	XPROBES_PROBE("memcached:command__incr", p##incr, (int, const char *, int, int64_t)),  \
	XPROBES_PROBE("memcached:command__decr", p##decr, (int, const char *, int, int64_t)),  \
	XPROBES_PROBE("memcached:command__delete", p##delete, (int, const char *, int))

/* A command parsed (text: with the rest of the read buffer), and replies
 * about to be written (once per batch). */
#define MEMCACHED_BATCH_PROBES(p)                                                             \
	XPROBES_PROBE("memcached:process__command__start", p##start, (int, const void *, int)), \
	XPROBES_PROBE("memcached:process__command__end", p##end, (int, const void *, int))

#endif
