/* SPDX-License-Identifier: MIT */
/* Printing a function-graph trace: each thread's records become a call
 * tree (a flat array in record order, every node knowing where its subtree
 * ends), which the four views walk.  Exits are matched to the innermost
 * open call of the same function, so a longjmp or an exception that skips
 * exits closes the calls it unwound as "exit not recorded" instead of
 * shifting every later pairing.  Times are 64-bit nanoseconds throughout
 * and printed as microseconds with three decimals from integers, so they
 * neither round nor wrap (sheepdog's tracer wrapped at 4.29 s). */
#define _GNU_SOURCE
#include "xprobes.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

uint64_t tf_tsc_ns(const struct tf_clock *c, uint64_t tsc)
{
	if (c->now_tsc <= c->start_tsc)
		return c->start_ns;
	/* Magnitudes and signs apart: the clock line is the target's, any four
	 * 64-bit numbers, and the product of two spans of up to 2^64 each
	 * fits an unsigned __int128 but not a signed one. */
	int back = tsc < c->start_tsc, slower = c->now_ns < c->start_ns;
	unsigned __int128 dt = back ? c->start_tsc - tsc : tsc - c->start_tsc;
	unsigned __int128 dns = slower ? c->start_ns - c->now_ns : c->now_ns - c->start_ns;
	unsigned __int128 off = dt * dns / (c->now_tsc - c->start_tsc);
	if (back != slower)
		return off >= c->start_ns ? 0 : c->start_ns - (uint64_t)off;
	return off >= UINT64_MAX - c->start_ns ? UINT64_MAX : c->start_ns + (uint64_t)off;
}

void tf_decode(const struct xp_trace_rec *rec, size_t n, const struct tf_clock *c,
	       struct tf_event *out)
{
	for (size_t i = 0; i < n; i++) {
		out[i].kind = (unsigned)(rec[i].time & 3);
		out[i].addr = rec[i].addr;
		/* An argument data record's time field holds payload bytes. */
		out[i].ns = ta_is_data(&out[i]) ? rec[i].time : tf_tsc_ns(c, rec[i].time >> 2);
	}
}

int tf_sort_parse(const char *s, enum tf_sort *by)
{
	static const char *names[] = { "calls", "total", "self", "avg", "max" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i])) {
			*by = (enum tf_sort)i;
			return 0;
		}
	return -1;
}

/* An array of n items of size bytes for a whole trace (millions of
 * records): where the kernel gives huge pages on request, it gets them,
 * which cut `trace cat -d` of fib(27) from 17,500 page faults to a few
 * hundred.  Freed with free(). */
void *tf_big_array(size_t n, size_t size)
{
	size_t bytes;
	if (__builtin_mul_overflow(n ? n : 1, size, &bytes))
		return NULL;
	char *p = malloc(bytes);
	const uintptr_t huge = 2u << 20;
	if (p && bytes >= 2 * huge) {
		uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
		uintptr_t hi = ((uintptr_t)p + bytes) & ~(huge - 1);
		if (hi > lo)
			madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
	}
	return p;
}

/* ---- the call tree of one thread --------------------------------------- */

enum { N_CALL, N_SITE, N_LOST };
#define NF_CLOSED 1u  /* entry and exit seen: t1 is the exit */
#define NF_NOEXIT 2u  /* unwound by an outer exit (longjmp, exception): t1 is that exit */
#define NF_NOENTRY 4u /* an exit whose entry is not in the buffer: t1 only */
#define NO_PARENT SIZE_MAX
#define NO_ARGS SIZE_MAX

struct node {
	uint64_t addr, t0, t1;
	uint64_t child_ns; /* closed direct children's time, for self time */
	uint64_t gap_ns;   /* N_LOST: time from the record before it, which the lost ones had */
	size_t parent;
	size_t end;        /* one past the last node of the subtree */
	size_t args_at, ret_at; /* N_CALL: the event of its argument records, or NO_ARGS */
	uint32_t depth;
	uint8_t type, flags;
};

struct tree {
	struct node *n;
	size_t len;
	uint64_t trailing_lost; /* counted in the header, no LOST record for them */
	uint64_t last_ns;
};

static uint64_t dur(const struct node *x)
{
	return x->t1 > x->t0 ? x->t1 - x->t0 : 0;
}

static int build(const struct tf_thread *th, struct tree *tr)
{
	size_t *stack = tf_big_array(th->n, sizeof(*stack));
	tr->n = tf_big_array(th->n, sizeof(*tr->n));
	tr->len = 0;
	tr->last_ns = 0;
	if (!stack || !tr->n) {
		free(stack);
		free(tr->n);
		return -1;
	}
	size_t sp = 0;
	size_t before_args = NO_PARENT; /* the call the record before closed or opened */
	int before_exit = 0;
	uint64_t lost_seen = 0, prev_ns = th->n ? th->ev[0].ns : 0;
	for (size_t e = 0; e < th->n; e++) {
		const struct tf_event *ev = &th->ev[e];
		size_t parent = sp ? stack[sp - 1] : NO_PARENT;
		/* A call's argument records follow its entry (its return
		 * value's its exit): where they are, kept for printing. */
		if (ta_is_header(ev) && before_args != NO_PARENT) {
			struct node *c = &tr->n[before_args];
			*(before_exit ? &c->ret_at : &c->args_at) = e;
		}
		if (!ta_is_data(ev))
			before_args = NO_PARENT;
		/* A kept request's label (trace start --requests), left by a
		 * caller that did not make it a call (trace_labels_apply):
		 * nothing lost here; arguments' records. */
		if (ev->kind == XP_TRACE_LOST && (ev->addr & XP_TRACE_LABEL))
			continue;
		uint64_t before = prev_ns;
		prev_ns = tr->last_ns = ev->ns;
		/* An exit marked unwound: its call was left (longjmp, an
		 * exception), found gone at this time. */
		uint64_t addr = ev->addr;
		int unwound = ev->kind == XP_TRACE_EXIT && (addr & XP_TRACE_UNWOUND);
		if (ev->kind == XP_TRACE_EXIT) {
			addr &= ~XP_TRACE_UNWOUND;
			size_t k = sp;
			while (k > 0 && tr->n[stack[k - 1]].addr != addr)
				k--;
			if (k > 0) {
				while (sp > k) {
					struct node *u = &tr->n[stack[--sp]];
					u->flags |= NF_NOEXIT;
					u->t1 = ev->ns;
					u->end = tr->len;
				}
				struct node *x = &tr->n[stack[--sp]];
				x->flags |= unwound ? NF_NOEXIT : NF_CLOSED;
				before_args = unwound ? NO_PARENT : stack[sp];
				before_exit = 1;
				x->t1 = ev->ns;
				x->end = tr->len;
				if (x->parent != NO_PARENT && !unwound)
					tr->n[x->parent].child_ns += dur(x);
				continue;
			}
			if (unwound) /* nor its entry: nothing to show */
				continue;
		}
		struct node *x = &tr->n[tr->len];
		*x = (struct node){ .addr = addr, .t0 = ev->ns, .parent = parent,
				    .depth = (uint32_t)sp, .end = tr->len + 1, .args_at = NO_ARGS,
				    .ret_at = NO_ARGS };
		switch (ev->kind) {
		case XP_TRACE_ENTRY:
			x->type = N_CALL;
			before_args = tr->len;
			before_exit = 0;
			stack[sp++] = tr->len;
			break;
		case XP_TRACE_EXIT:
			x->type = N_CALL;
			x->flags = NF_NOENTRY;
			x->t1 = ev->ns;
			break;
		case XP_TRACE_SITE:
			x->type = N_SITE;
			break;
		default:
			/* What happened between the record before it and this
			 * one was lost: that time is nobody's self time. */
			x->type = N_LOST;
			lost_seen += ev->addr;
			x->gap_ns = ev->ns > before ? ev->ns - before : 0;
			if (parent != NO_PARENT)
				tr->n[parent].child_ns += x->gap_ns;
			break;
		}
		tr->len++;
	}
	while (sp)
		tr->n[stack[--sp]].end = tr->len; /* still running */
	free(stack);
	tr->trailing_lost = th->lost > lost_seen ? th->lost - lost_seen : 0;
	return 0;
}

/* A closed call shorter than the minimum goes, with its subtree. */
static int hidden(const struct node *x, const struct tf_filter *f)
{
	return f->min_ns && x->type == N_CALL && (x->flags & NF_CLOSED) && dur(x) < f->min_ns;
}

static int has_visible_child(const struct tree *tr, size_t i, const struct tf_filter *f)
{
	for (size_t j = i + 1; j < tr->n[i].end; j = tr->n[j].end)
		if (!hidden(&tr->n[j], f))
			return 1;
	return 0;
}

/* The first node at or after i that the filter shows (tr->len: none). */
static size_t visible(const struct tree *tr, size_t i, const struct tf_filter *f)
{
	while (i < tr->len && hidden(&tr->n[i], f))
		i = tr->n[i].end;
	return i;
}

/* Microseconds with three decimals, from integer nanoseconds. */
static const char *us_str(char buf[32], uint64_t ns)
{
	snprintf(buf, 32, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
	return buf;
}

static int wanted(const struct tf_thread *th, const struct tf_filter *f)
{
	return !f->tid || th->tid == f->tid;
}

static const char *fname(const struct tf_trace *t, uint64_t addr)
{
	const char *s = t->names.func ? t->names.func(t->names.ctx, addr) : NULL;
	return s ? s : "?";
}

static const char *sname(const struct tf_trace *t, uint64_t addr)
{
	const char *s = t->names.site ? t->names.site(t->names.ctx, addr) : NULL;
	return s ? s : "?";
}

/* ---- graph -------------------------------------------------------------- */

/* ftrace's marks for long calls, by the duration they exceed. */
static char marker(uint64_t ns)
{
	static const struct { uint64_t over; char c; } marks[] = {
		{ 1000000000, '$' }, { 100000000, '@' }, { 10000000, '*' },
		{ 1000000, '#' }, { 100000, '!' }, { 10000, '+' },
	};
	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++)
		if (ns > marks[i].over)
			return marks[i].c;
	return ' ';
}

/* The duration column and the indentation of depth.  Written by hand,
 * not by fprintf: a recording has millions of lines, and formatting was a
 * third of `trace cat -d`'s time (perf, fib(27)). */
static void prefix(FILE *o, const uint64_t *ns, uint32_t depth)
{
	static const char spaces[128] = { [0 ... 127] = ' ' };
	char line[32];
	if (ns) {
		/* "%c%9s   |  " of us_str(): microseconds with 3 decimals */
		char digits[32], *d = digits + sizeof(digits);
		uint64_t us = *ns / 1000, frac = *ns % 1000;
		for (int i = 0; i < 3; i++, frac /= 10)
			*--d = (char)('0' + frac % 10);
		*--d = '.';
		do
			*--d = (char)('0' + us % 10);
		while (us /= 10);
		size_t len = (size_t)(digits + sizeof(digits) - d), pad = len < 9 ? 9 - len : 0;
		line[0] = marker(*ns);
		memset(line + 1, ' ', pad);
		memcpy(line + 1 + pad, d, len);
		memcpy(line + 1 + pad + len, "   |  ", 6);
		fwrite(line, 1, 1 + pad + len + 6, o);
	} else {
		fputs("             |  ", o);
	}
	for (size_t left = 2 * (size_t)depth; left;) {
		size_t n = left < sizeof(spaces) ? left : sizeof(spaces);
		fwrite(spaces, 1, n, o);
		left -= n;
	}
}

/* name then tail ("();\n", "() {\n"): two writes, no format to parse. */
static void name_line(FILE *o, const char *name, const char *tail)
{
	fputs(name, o);
	fputs(tail, o);
}

/* The text of x's arguments (ret 0) or return value (ret 1), as uftrace
 * replay shows them; NULL when it has none (or no spec says how to read
 * them, or they do not fit it). */
static const char *arg_text(const struct tf_trace *t, const struct tf_thread *th,
			    const struct node *x, int ret, char *buf, size_t size)
{
	size_t at = ret ? x->ret_at : x->args_at, len;
	uint8_t p[TA_PAYLOAD_MAX];
	const struct ta_spec *spec = argspec_find(t->args, x->addr);
	if (at == NO_ARGS || !spec || !ta_collect(th->ev, th->n, at, p, &len))
		return NULL;
	return ta_format_sym(spec, ret, p, len, buf, size, t->names.sym, t->names.ctx);
}

/* "name(args)" then tail: "();" or " {" when no return value is shown. */
static void call_line(FILE *o, const struct tf_trace *t, const struct tf_thread *th,
		      const struct node *x, int leaf)
{
	char a[1024], r[512];
	const char *args = arg_text(t, th, x, 0, a, sizeof(a));
	const char *ret = leaf ? arg_text(t, th, x, 1, r, sizeof(r)) : NULL;
	if (!args && !ret) {
		name_line(o, fname(t, x->addr), leaf ? "();\n" : "() {\n");
		return;
	}
	fprintf(o, "%s(%s)", fname(t, x->addr), args ? args : "");
	if (ret)
		fprintf(o, " = %s", ret);
	fputs(leaf ? ";\n" : " {\n", o);
}

static void graph_close(FILE *o, const struct tf_trace *t, const struct tf_thread *th,
			const struct node *x)
{
	char r[512];
	const char *ret;
	if (x->flags & NF_CLOSED) {
		uint64_t d = dur(x);
		prefix(o, &d, x->depth);
		if ((ret = arg_text(t, th, x, 1, r, sizeof(r))))
			fprintf(o, "} = %s; /* %s */\n", ret, fname(t, x->addr));
		else
			fputs("}\n", o);
	} else if (x->flags & NF_NOEXIT) {
		prefix(o, NULL, x->depth);
		fprintf(o, "} /* %s: exit not recorded */\n", fname(t, x->addr));
	} /* else still running: no closing line */
}

static void graph_thread(FILE *o, const struct tf_trace *t, const struct tf_thread *th,
			 const struct tree *tr, size_t *open, const struct tf_filter *f)
{
	size_t nopen = 0;
	if (th->name && *th->name)
		fprintf(o, " ------- tid %d (%s) -------\n", th->tid, th->name);
	else
		fprintf(o, " ------- tid %d -------\n", th->tid);
	fputs("   Time(us)  |  Function Graph\n-------------------------------\n", o);
	for (size_t i = visible(tr, 0, f); i < tr->len; i = visible(tr, i + 1, f)) {
		while (nopen && tr->n[open[nopen - 1]].end <= i)
			graph_close(o, t, th, &tr->n[open[--nopen]]);
		const struct node *x = &tr->n[i];
		if (x->type == N_SITE) {
			prefix(o, NULL, x->depth);
			fprintf(o, "/* %s */\n", sname(t, x->addr));
		} else if (x->type == N_LOST) {
			prefix(o, NULL, x->depth);
			fprintf(o, "/* %" PRIu64 " records lost */\n", x->addr);
		} else if (x->flags & NF_NOENTRY) {
			prefix(o, NULL, x->depth);
			fprintf(o, "} /* %s: entry not recorded */\n", fname(t, x->addr));
		} else if ((x->flags & NF_CLOSED) && !has_visible_child(tr, i, f)) {
			uint64_t d = dur(x);
			prefix(o, &d, x->depth);
			call_line(o, t, th, x, 1); /* its children are all hidden */
		} else {
			prefix(o, NULL, x->depth);
			call_line(o, t, th, x, 0);
			open[nopen++] = i;
		}
	}
	while (nopen)
		graph_close(o, t, th, &tr->n[open[--nopen]]);
	if (tr->trailing_lost) {
		prefix(o, NULL, 0);
		fprintf(o, "/* %" PRIu64 " records lost */\n", tr->trailing_lost);
	}
}

/* Runs fn on each wanted thread's tree, with a scratch array of one index
 * per record. */
typedef int (*thread_fn)(FILE *o, const struct tf_trace *t, const struct tf_thread *th,
			 const struct tree *tr, size_t *scratch, const struct tf_filter *f,
			 void *arg);

static int each_thread(FILE *o, const struct tf_trace *t, const struct tf_filter *f,
		       thread_fn fn, void *arg)
{
	for (size_t k = 0; k < t->nthreads; k++) {
		const struct tf_thread *th = &t->threads[k];
		if (!wanted(th, f))
			continue;
		struct tree tr;
		if (build(th, &tr))
			return -1;
		size_t *scratch = tf_big_array(tr.len, sizeof(*scratch));
		int rc = scratch ? fn(o, t, th, &tr, scratch, f, arg) : -1;
		free(scratch);
		free(tr.n);
		if (rc)
			return rc;
	}
	return 0;
}

static int graph_fn(FILE *o, const struct tf_trace *t, const struct tf_thread *th,
		    const struct tree *tr, size_t *scratch, const struct tf_filter *f, void *arg)
{
	int *first = arg;
	if (!*first)
		fputc('\n', o);
	*first = 0;
	graph_thread(o, t, th, tr, scratch, f);
	return 0;
}

int tf_graph(FILE *out, const struct tf_trace *t, const struct tf_filter *f)
{
	int first = 1;
	if (each_thread(out, t, f, graph_fn, &first))
		return -1;
	return ferror(out) ? -1 : 0;
}

/* ---- chrome (Trace Event JSON) ---------------------------------------- */

static void json_str(FILE *o, const char *s)
{
	fputc('"', o);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(o, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f) /* stays valid whatever the bytes */
			fprintf(o, "\\u%04x", *p);
		else
			fputc(*p, o);
	}
	fputc('"', o);
}

/* Microseconds from the origin, three decimals, signed. */
static void json_us(FILE *o, const struct tf_trace *t, uint64_t ns)
{
	char us[32];
	uint64_t d = ns >= t->origin_ns ? ns - t->origin_ns : t->origin_ns - ns;
	fprintf(o, "%s%s", ns >= t->origin_ns ? "" : "-", us_str(us, d));
}

struct chrome_state {
	int first;
};

static void chrome_begin(FILE *o, struct chrome_state *cs, const struct tf_trace *t,
			 const struct tf_thread *th, const char *name, const char *ph,
			 uint64_t ns)
{
	fputs(cs->first ? "\n" : ",\n", o);
	cs->first = 0;
	fputs("{\"name\":", o);
	json_str(o, name);
	fprintf(o, ",\"ph\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":", ph, t->pid, th->tid);
	json_us(o, t, ns);
}

static int chrome_fn(FILE *o, const struct tf_trace *t, const struct tf_thread *th,
		     const struct tree *tr, size_t *scratch, const struct tf_filter *f, void *arg)
{
	struct chrome_state *cs = arg;
	char label[32];
	(void)scratch;
	snprintf(label, sizeof(label), "tid %d", th->tid);
	chrome_begin(o, cs, t, th, "thread_name", "M", t->origin_ns);
	fputs(",\"args\":{\"name\":", o);
	json_str(o, label);
	fputs("}}", o);
	for (size_t i = visible(tr, 0, f); i < tr->len; i = visible(tr, i + 1, f)) {
		const struct node *x = &tr->n[i];
		if (x->type == N_SITE) {
			chrome_begin(o, cs, t, th, sname(t, x->addr), "i", x->t0);
			fputs(",\"s\":\"t\"}", o);
		} else if (x->type == N_LOST) {
			chrome_begin(o, cs, t, th, "records lost", "i", x->t0);
			fprintf(o, ",\"s\":\"t\",\"args\":{\"count\":%" PRIu64 "}}", x->addr);
		} else if (x->flags & NF_NOENTRY) {
			chrome_begin(o, cs, t, th, fname(t, x->addr), "i", x->t1);
			fputs(",\"s\":\"t\",\"args\":{\"entry\":\"not recorded\"}}", o);
		} else if (x->flags & (NF_CLOSED | NF_NOEXIT)) {
			/* An unwound call ends, at the latest, at the exit that unwound it. */
			chrome_begin(o, cs, t, th, fname(t, x->addr), "X", x->t0);
			char us[32], av[1024], rv[512], paren[1040];
			fprintf(o, ",\"dur\":%s", us_str(us, dur(x)));
			/* Arguments and the return value under uftrace's keys. */
			const char *args = arg_text(t, th, x, 0, av, sizeof(av));
			const char *ret = x->flags & NF_CLOSED ? arg_text(t, th, x, 1, rv, sizeof(rv)) : NULL;
			if (args || ret || !(x->flags & NF_CLOSED))
				fputs(",\"args\":{", o);
			if (args) {
				snprintf(paren, sizeof(paren), "(%s)", args);
				fputs("\"arguments\":", o);
				json_str(o, paren);
			}
			if (ret) {
				fputs(args ? ",\"retval\":" : "\"retval\":", o);
				json_str(o, ret);
			}
			if (!(x->flags & NF_CLOSED))
				fputs(args ? ",\"exit\":\"not recorded\"" : "\"exit\":\"not recorded\"", o);
			fputs(args || ret || !(x->flags & NF_CLOSED) ? "}}" : "}", o);
		} else {
			chrome_begin(o, cs, t, th, fname(t, x->addr), "B", x->t0); /* still running */
			fputs("}", o);
		}
	}
	if (tr->trailing_lost) {
		chrome_begin(o, cs, t, th, "records lost", "i", tr->last_ns);
		fprintf(o, ",\"s\":\"t\",\"args\":{\"count\":%" PRIu64 "}}", tr->trailing_lost);
	}
	return 0;
}

int tf_chrome(FILE *out, const struct tf_trace *t, const struct tf_filter *f)
{
	struct chrome_state cs = { .first = 1 };
	fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", out);
	if (each_thread(out, t, f, chrome_fn, &cs))
		return -1;
	fputs("\n]}\n", out);
	return ferror(out) ? -1 : 0;
}

/* Room for one more element in a growing array: 0, or -1 (unchanged). */
static int room(void **v, size_t *cap, size_t len, size_t size)
{
	if (len < *cap)
		return 0;
	size_t ncap = *cap ? 2 * *cap : 256;
	void *nv = realloc(*v, ncap * size);
	if (!nv)
		return -1;
	*v = nv;
	*cap = ncap;
	return 0;
}

/* ---- folded stacks ------------------------------------------------------ */

struct stack_val {
	char *stack;
	uint64_t ns;
};

struct folded_state {
	struct stack_val *v;
	size_t len, cap;
	uint64_t lost;     /* records */
};

/* Lost records show as a frame of their own, "[records lost]", under the
 * calls they were lost in, with the time they covered: folded into the
 * caller's self time they would make it look slow. */
#define LOST_FRAME "[records lost]"

static char *lost_stack(const struct tf_trace *t, const struct tree *tr, size_t parent,
			size_t *chain);

/* caller;callee names, root first; ';' inside a name would split it. */
static char *stack_of(const struct tf_trace *t, const struct tree *tr, size_t i, size_t *chain)
{
	size_t n = 0, len = 0;
	for (size_t j = i; j != NO_PARENT; j = tr->n[j].parent) {
		chain[n++] = j;
		len += strlen(fname(t, tr->n[j].addr)) + 1;
	}
	char *s = malloc(len), *p = s;
	if (!s)
		return NULL;
	while (n--) {
		const char *name = fname(t, tr->n[chain[n]].addr);
		for (; *name; name++)
			*p++ = *name == ';' ? ':' : *name;
		*p++ = n ? ';' : '\0';
	}
	return s;
}

static char *lost_stack(const struct tf_trace *t, const struct tree *tr, size_t parent,
			size_t *chain)
{
	char *up = parent == NO_PARENT ? NULL : stack_of(t, tr, parent, chain), *s = NULL;
	if (parent != NO_PARENT && !up)
		return NULL;
	if (asprintf(&s, "%s%s" LOST_FRAME, up ? up : "", up ? ";" : "") < 0)
		s = NULL;
	free(up);
	return s;
}

static int folded_fn(FILE *o, const struct tf_trace *t, const struct tf_thread *th,
		     const struct tree *tr, size_t *scratch, const struct tf_filter *f, void *arg)
{
	struct folded_state *fs = arg;
	(void)o;
	(void)th;
	fs->lost += tr->trailing_lost;
	if (tr->trailing_lost) { /* no record says where: at the top, no time */
		if (room((void **)&fs->v, &fs->cap, fs->len, sizeof(*fs->v)))
			return -1;
		char *s = strdup(LOST_FRAME);
		if (!s)
			return -1;
		fs->v[fs->len++] = (struct stack_val){ s, 0 };
	}
	for (size_t i = visible(tr, 0, f); i < tr->len; i = visible(tr, i + 1, f)) {
		const struct node *x = &tr->n[i];
		if (x->type == N_LOST) {
			fs->lost += x->addr;
			if (room((void **)&fs->v, &fs->cap, fs->len, sizeof(*fs->v)))
				return -1;
			char *s = lost_stack(t, tr, x->parent, scratch);
			if (!s)
				return -1;
			fs->v[fs->len++] = (struct stack_val){ s, x->gap_ns };
			continue;
		}
		if (x->type != N_CALL || !(x->flags & NF_CLOSED))
			continue;
		if (room((void **)&fs->v, &fs->cap, fs->len, sizeof(*fs->v)))
			return -1;
		char *s = stack_of(t, tr, i, scratch);
		if (!s)
			return -1;
		uint64_t d = dur(x);
		fs->v[fs->len++] = (struct stack_val){ s, d > x->child_ns ? d - x->child_ns : 0 };
	}
	return 0;
}

static int cmp_stack(const void *a, const void *b)
{
	return strcmp(((const struct stack_val *)a)->stack, ((const struct stack_val *)b)->stack);
}

int tf_folded(FILE *out, const struct tf_trace *t, const struct tf_filter *f)
{
	struct folded_state fs = { 0 };
	int rc = each_thread(out, t, f, folded_fn, &fs);
	if (!rc && fs.len)
		qsort(fs.v, fs.len, sizeof(*fs.v), cmp_stack);
	for (size_t i = 0; i < fs.len;) {
		size_t j = i;
		uint64_t sum = 0;
		for (; j < fs.len && !strcmp(fs.v[j].stack, fs.v[i].stack); j++)
			sum += fs.v[j].ns;
		if (!rc)
			fprintf(out, "%s %" PRIu64 "\n", fs.v[i].stack, sum);
		i = j;
	}
	for (size_t i = 0; i < fs.len; i++)
		free(fs.v[i].stack);
	free(fs.v);
	if (!rc && fs.lost)
		fprintf(stderr, "xprobes: trace: %" PRIu64 " records lost: their time is under "
				LOST_FRAME "\n", fs.lost);
	return rc || ferror(out) ? -1 : 0;
}

/* ---- per-function statistics ------------------------------------------- */

struct fstat {
	uint64_t addr, calls, closed, total, self, max;
};

struct stat_state {
	struct fstat *v;
	size_t len, cap;
	uint64_t lost, lost_ns; /* records lost, and the time they covered */
};

static int stat_fn(FILE *o, const struct tf_trace *t, const struct tf_thread *th,
		   const struct tree *tr, size_t *scratch, const struct tf_filter *f, void *arg)
{
	struct stat_state *ss = arg;
	(void)o;
	(void)t;
	(void)th;
	(void)scratch;
	ss->lost += tr->trailing_lost;
	for (size_t i = visible(tr, 0, f); i < tr->len; i = visible(tr, i + 1, f)) {
		const struct node *x = &tr->n[i];
		if (x->type == N_LOST) {
			ss->lost += x->addr;
			ss->lost_ns += x->gap_ns;
		}
		if (x->type != N_CALL || (x->flags & NF_NOENTRY))
			continue;
		if (room((void **)&ss->v, &ss->cap, ss->len, sizeof(*ss->v)))
			return -1;
		struct fstat *s = &ss->v[ss->len++];
		*s = (struct fstat){ .addr = x->addr, .calls = 1 };
		if (x->flags & NF_CLOSED) {
			uint64_t d = dur(x);
			*s = (struct fstat){ x->addr, 1, 1, d, d > x->child_ns ? d - x->child_ns : 0, d };
		}
	}
	return 0;
}

static int cmp_addr(const void *a, const void *b)
{
	const struct fstat *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static uint64_t key(const struct fstat *s, enum tf_sort by)
{
	switch (by) {
	case TF_SORT_CALLS: return s->calls;
	case TF_SORT_SELF: return s->self;
	case TF_SORT_AVG: return s->closed ? s->total / s->closed : 0;
	case TF_SORT_MAX: return s->max;
	default: return s->total;
	}
}

static int cmp_key(const void *a, const void *b, void *by)
{
	uint64_t x = key(a, *(enum tf_sort *)by), y = key(b, *(enum tf_sort *)by);
	return x != y ? (x < y ? 1 : -1) : cmp_addr(a, b);
}

static void put_us(FILE *o, uint64_t ns)
{
	char us[32];
	fprintf(o, " %14s", us_str(us, ns));
}

int tf_stat(FILE *out, const struct tf_trace *t, const struct tf_filter *f, enum tf_sort by)
{
	struct stat_state ss = { 0 };
	int rc = each_thread(out, t, f, stat_fn, &ss);
	size_t n = 0;
	if (!rc && ss.len) {
		qsort(ss.v, ss.len, sizeof(*ss.v), cmp_addr);
		for (size_t i = 0; i < ss.len; i++) { /* merge runs of one function */
			struct fstat *s = &ss.v[i], *d = n ? &ss.v[n - 1] : NULL;
			if (d && d->addr == s->addr) {
				d->calls += s->calls;
				d->closed += s->closed;
				d->total += s->total;
				d->self += s->self;
				d->max = s->max > d->max ? s->max : d->max;
			} else {
				ss.v[n++] = *s;
			}
		}
		qsort_r(ss.v, n, sizeof(*ss.v), cmp_key, &by);
	}
	if (!rc) {
		fprintf(out, "%10s %14s %14s %14s %14s  %s\n", "calls", "total(us)", "self(us)",
			"avg(us)", "max(us)", "function");
		for (size_t i = 0; i < n; i++) {
			const struct fstat *s = &ss.v[i];
			fprintf(out, "%10" PRIu64, s->calls);
			put_us(out, s->total);
			put_us(out, s->self);
			put_us(out, s->closed ? s->total / s->closed : 0);
			put_us(out, s->max);
			fprintf(out, "  %s\n", fname(t, s->addr));
		}
		/* The calls above are short of what the lost records held;
		 * the time those covered is nobody's self time. */
		if (ss.lost) {
			fprintf(out, "%10s", "-");
			put_us(out, ss.lost_ns);
			put_us(out, ss.lost_ns);
			fprintf(out, " %14s %14s  [%" PRIu64 " records lost]\n", "-", "-", ss.lost);
		}
	}
	free(ss.v);
	return rc || ferror(out) ? -1 : 0;
}
