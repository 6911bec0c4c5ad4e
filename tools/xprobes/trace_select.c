/* SPDX-License-Identifier: MIT */
/* Which calls a view shows by name and depth (trace cat|stat -F, -N, -D),
 * as uftrace's replay filters them: a recording holds every call, the
 * view picks.
 *
 *   -F GLOB  only the calls of functions matching GLOB and what they
 *            call; their callers are left out, so each shows at the top;
 *   -N GLOB  not the calls of functions matching GLOB, nor what they call;
 *   -D N     at most N levels of calls, counted from the top or, under
 *            -F, from the nearest matching call: each match starts its
 *            own N levels, however deep it is (a recursive match shows
 *            whole), as uftrace replay counts them.
 *
 * Done on each thread's events before any view is built: the views then
 * need no idea of it, and an exit goes exactly where its entry went.  A
 * LOST record is always kept: a loss shows wherever it happened. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <stdlib.h>

struct open_call {
	unsigned char in_f, in_n, shown;
	uint32_t level; /* 1 for a -F match or a top call, else its caller's + 1 */
};

int tf_filter_selects(const struct tf_filter *f)
{
	return f->ninclude || f->nexclude || f->max_depth;
}

/* One thread's events, the shown ones copied into out->ev. */
static int select_thread(const struct tf_thread *in, const struct tf_names *names,
			 const struct tf_filter *f, struct tf_thread *out)
{
	struct tf_event *ev = tf_big_array(in->n, sizeof(*ev));
	struct open_call *stack = tf_big_array(in->n, sizeof(*stack));
	if (!ev || !stack) {
		free(ev);
		free(stack);
		return -1;
	}
	size_t n = 0, sp = 0, in_f = 0, in_n = 0;
	int kept = 0; /* the last record that is no argument record was */
	for (size_t i = 0; i < in->n; i++) {
		const struct tf_event *e = &in->ev[i];
		/* Argument records go where their entry or exit goes. */
		if (ta_is_header(e) || ta_is_data(e)) {
			if (kept)
				ev[n++] = *e;
			continue;
		}
		size_t before = n;
		/* A site hit shows inside the call it happened in, if that shows. */
		int shown_here = (!f->ninclude || in_f) && !in_n && (!sp || stack[sp - 1].shown);
		if (e->kind == XP_TRACE_ENTRY) {
			const char *name = names->func(names->ctx, e->addr);
			name = name ? name : "";
			struct open_call c = { trace_glob_any(f->include, f->ninclude, name),
					       trace_glob_any(f->exclude, f->nexclude, name), 0, 1 };
			if (!c.in_f && sp && stack[sp - 1].level < UINT32_MAX)
				c.level = stack[sp - 1].level + 1;
			in_f += c.in_f;
			in_n += c.in_n;
			c.shown = (!f->ninclude || in_f) && !in_n &&
				  (!f->max_depth || c.level <= f->max_depth);
			stack[sp++] = c;
			if (c.shown)
				ev[n++] = *e;
		} else if (e->kind == XP_TRACE_EXIT) {
			if (!sp) { /* entered before the recording began */
				const char *name = names->func(names->ctx, e->addr & ~XP_TRACE_UNWOUND);
				name = name ? name : "";
				if ((!f->ninclude || in_f || trace_glob_any(f->include, f->ninclude, name)) &&
				    !in_n && !trace_glob_any(f->exclude, f->nexclude, name) && !f->max_depth)
					ev[n++] = *e;
				kept = n > before;
				continue;
			}
			struct open_call c = stack[--sp];
			in_f -= c.in_f;
			in_n -= c.in_n;
			if (c.shown)
				ev[n++] = *e;
		} else if (e->kind == XP_TRACE_LOST || shown_here) {
			ev[n++] = *e;
		}
		kept = n > before;
	}
	free(stack);
	*out = *in;
	out->ev = ev;
	out->n = n;
	return 0;
}

int tf_select(const struct tf_trace *t, const struct tf_filter *f, struct tf_trace *out,
	      struct tf_thread **owned)
{
	*out = *t;
	*owned = NULL;
	if (!tf_filter_selects(f))
		return 0;
	struct tf_thread *th = calloc(t->nthreads ? t->nthreads : 1, sizeof(*th));
	if (!th)
		return -1;
	for (size_t i = 0; i < t->nthreads; i++)
		if (select_thread(&t->threads[i], &t->names, f, &th[i]) != 0) {
			tf_select_free(th, i);
			return -1;
		}
	out->threads = *owned = th;
	return 0;
}

void tf_select_free(struct tf_thread *owned, size_t n)
{
	if (!owned)
		return;
	for (size_t i = 0; i < n; i++)
		free((void *)owned[i].ev);
	free(owned);
}
