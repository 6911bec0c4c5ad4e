/* The answer of modules/mclat.so's `read` (its format is at the top of
 * modules/mclat.c), parsed apart from the session that fetched it so that
 * tests/unit/test_mclat_reply.c can feed it canned and broken text. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mclat.h"

/* One "TID CONN START_NS END_NS" line at p into *m; 1 if it is one.
 * Not sscanf: glibc's sscanf measures the whole rest of its input on
 * every call, which over a reply of thousands of lines was quadratic and
 * two thirds of mclat's CPU time (perf, under mcload). */
static int parse_batch(const char *p, struct module_batch *m)
{
	unsigned long long v[4];
	errno = 0;
	for (unsigned i = 0; i < 4; i++) {
		/* Digits only: strtoull would skip spaces and take a sign. */
		if (*p < '0' || *p > '9')
			return 0;
		char *e;
		v[i] = strtoull(p, &e, 10);
		if (*e != (i < 3 ? ' ' : '\n') && (i < 3 || *e != '\0'))
			return 0;
		p = e + 1;
	}
	if (errno || v[0] > INT_MAX || v[1] > INT_MAX)
		return 0;
	m->tid = (int)v[0];
	m->fd = (int)v[1];
	m->start_ns = v[2];
	m->end_ns = v[3];
	return 1;
}

int module_parse_reply(const char *reply, void (*cb)(const struct module_batch *, void *),
		       void *arg, uint64_t *now_ns, unsigned long long *dropped, char *why,
		       size_t whylen)
{
	if (sscanf(reply, "mclat 1 now_ns=%" SCNu64, now_ns) != 1) {
		snprintf(why, whylen, "unexpected answer from the module: %.200s", reply);
		return -1;
	}
	unsigned line = 1;
	for (const char *p = strchr(reply, '\n'); p && *++p; p = strchr(p, '\n')) {
		line++;
		struct module_batch m;
		int more;
		if (parse_batch(p, &m)) {
			cb(&m, arg);
		} else if (sscanf(p, "end records=%*u dropped=%llu more=%d", dropped, &more) == 2 &&
			   (more == 0 || more == 1)) {
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
