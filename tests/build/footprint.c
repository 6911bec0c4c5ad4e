/* SPDX-License-Identifier: MIT */
/* A function that already calls something and keeps values across the
 * call, with one site on a side path.  Built three ways by
 * test_footprint.py: PROBE = an XProbes site, a <sys/sdt.h> probe, or
 * nothing.  The site must not make the function save more callee-saved
 * registers than it does without a probe: a prologue push and an epilogue
 * pop run on every call of the function, attached or not. */
#include <xprobes/site.h>
#include <sys/sdt.h>

struct conn { int fd; int state; char *buf; int len; long a, b; };

void log_conn(struct conn *c);

#if defined(WITH_SITE)
#define PROBE(c) XPROBES_SITE(state_end, (int, const char *, int, long, long), \
			      ((c)->fd, (c)->buf, (c)->len, (c)->a, (c)->b))
#elif defined(WITH_SDT)
#define PROBE(c) DTRACE_PROBE5(footprint, state_end, (c)->fd, (c)->buf, (c)->len, \
			       (c)->a, (c)->b)
#else
#define PROBE(c) do { } while (0)
#endif

void set_state(struct conn *c, int state)
{
	log_conn(c);
	if (state == 5 || state == 1)
		PROBE(c);
	c->state = state;
}
