/* SPDX-License-Identifier: MIT */
/* The answer of modules/mclat.so's `read` (its format is at the top of
 * modules/mclat.c), parsed apart from the session that fetched it so that
 * tests/unit/test_mclat_reply.c can feed it canned and broken text. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mclat.h"

/* The decimal number at p into *out; returns its end, or NULL if p is not
 * at a digit or the number passes 64 bits.  Not strtoull: its locale and
 * base handling were 16% of mclat's CPU under load (perf), and it would
 * take leading spaces and a sign. */
static const char *parse_u64(const char *p, unsigned long long *out)
{
	if (*p < '0' || *p > '9')
		return NULL;
	unsigned long long v = 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (ULLONG_MAX - d) / 10)
			return NULL;
		v = v * 10 + d;
	}
	*out = v;
	return p;
}

/* One "TID CONN START_NS END_NS" line at p into *m; 1 if it is one.
 * Not sscanf either: glibc's sscanf measures the whole rest of its input
 * on every call, which over a reply of thousands of lines was quadratic
 * and two thirds of mclat's CPU time (perf, under mcload). */
static int parse_batch(const char *p, struct module_batch *m)
{
	unsigned long long v[4];
	for (unsigned i = 0; i < 4; i++) {
		if (!(p = parse_u64(p, &v[i])))
			return 0;
		if (i < 3 ? *p != ' ' : *p != '\n' && *p != '\0')
			return 0;
		p++;
	}
	if (v[0] > INT_MAX || v[1] > INT_MAX)
		return 0;
	m->tid = (int)v[0];
	m->fd = (int)v[1];
	m->start_ns = v[2];
	m->end_ns = v[3];
	return 1;
}

/* P with the literal LIT skipped, or NULL if it does not start so. */
static const char *literal(const char *p, const char *lit)
{
	size_t n = strlen(lit);
	return strncmp(p, lit, n) == 0 ? p + n : NULL;
}

/* "end records=N dropped=N more=0|1" and the end of the answer after it:
 * returns more, or -1. */
static int parse_end(const char *p, unsigned long long batches, unsigned long long *dropped)
{
	unsigned long long records, drops;
	if (!(p = literal(p, "end records=")) || !(p = parse_u64(p, &records)) ||
	    !(p = literal(p, " dropped=")) || !(p = parse_u64(p, &drops)) ||
	    !(p = literal(p, " more=")) || (*p != '0' && *p != '1'))
		return -1;
	int more = *p++ - '0';
	if (*p == '\n')
		p++;
	if (*p || records != batches)
		return -1; /* something after it, or not the lines it counts */
	*dropped = drops;
	return more;
}

int module_parse_reply(const char *reply, void (*cb)(const struct module_batch *, void *),
		       void *arg, uint64_t *now_ns, unsigned long long *dropped, char *why,
		       size_t whylen)
{
	unsigned long long now;
	const char *p = literal(reply, "mclat 1 now_ns=");
	if (!p || !(p = parse_u64(p, &now)) || *p != '\n') {
		snprintf(why, whylen, "unexpected answer from the module: %.200s", reply);
		return -1;
	}
	*now_ns = now;
	unsigned line = 1;
	unsigned long long batches = 0;
	for (p++; *p; p = strchr(p, '\n') + 1) {
		line++;
		struct module_batch m;
		int more;
		if (parse_batch(p, &m)) {
			cb(&m, arg);
			batches++;
			if (!strchr(p, '\n'))
				break; /* the last line, with no end line after it */
		} else if ((more = parse_end(p, batches, dropped)) >= 0) {
			return more;
		} else {
			size_t n = strcspn(p, "\n");
			snprintf(why, whylen, "line %u of the module's answer is malformed: %.*s", line,
				 (int)(n < 120 ? n : 120), p);
			return -1;
		}
	}
	snprintf(why, whylen, "the module's answer has no end line");
	return -1;
}
