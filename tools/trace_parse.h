/* What a target says about its trace, checked: the `trace buffers` and
 * `trace objects` replies and each buffer's header.  The target is anyone's
 * process and the tool may be root's, so every number is held to what a
 * real agent could have written before the tool sizes anything by it.  No
 * process I/O here: tests/fuzz/fuzz_tool_readers.c feeds it any bytes. */
#ifndef XP_TRACE_PARSE_H
#define XP_TRACE_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "trace_format.h"

/* More patch sites than any one object has (one per function; a browser
 * has about a million): `trace start -F` copies nsites * 8 bytes. */
#define TRACE_MAX_SITES (1u << 24)

/* Messages: one line, no newline; bad lines quoted sanitized and cut. */
#define TRACE_WHY_SIZE 256

/* One `buf` line of `trace buffers`. */
struct trace_buf_ref {
	int tid;
	uint64_t addr, cap;
};

struct trace_buffers {
	struct tf_clock clock;
	struct trace_buf_ref *bufs;
	size_t n;
};

/* Parse the reply: 0, or -1 with why (then nothing to free).  Every buf
 * has tid in 1..INT32_MAX, cap at most XP_TRACE_MAX_RECS, and a header
 * and cap records that overlap no other buffer's nor wrap; a clock line
 * comes first.  Lines of other kinds are skipped (a newer agent's). */
int trace_parse_buffers(const char *text, struct trace_buffers *b, char *why, size_t whysz);
void trace_buffers_free(struct trace_buffers *b);

struct trace_object {
	uint64_t base, table;
	size_t nsites; /* at most TRACE_MAX_SITES */
	char *path;    /* not empty */
};

/* Parse the `trace objects` reply: 0, or -1 with why. */
int trace_parse_objects(const char *text, struct trace_object **objs, size_t *n, char *why,
			size_t whysz);
void trace_objects_free(struct trace_object *objs, size_t n);

/* A buffer's header as copied from the target, listed with cap: 0 with
 * the records it holds, numbers [*first, *head) (at most cap of them; the
 * one numbered i is at rec[i % cap]), or -1 with why. */
int trace_buf_check(const struct xp_trace_buf *h, uint64_t cap, uint64_t *first,
		    uint64_t *head, char *why, size_t whysz);

/* Decode the head records after h into th (its events malloc'd): 0, or
 * -1 when out of memory. */
int trace_buf_decode(const struct xp_trace_buf *h, const struct xp_trace_rec *rec,
		     uint64_t head, const struct tf_clock *c, struct tf_thread *th);

/* The value of " key=" in a directory line: 0, or -1 when it is absent or
 * not a plain number (decimal or 0x hex; no sign or blank, which strtoull
 * would take, "-1" as 2^64 - 1; no overflow), ending the word. */
int trace_field(const char *line, const char *key, uint64_t *v);

#endif
