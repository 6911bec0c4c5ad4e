/* SPDX-License-Identifier: MIT */
/* The agent's `trace` command: which functions to patch, start,
 * stop, clear, status, and the two directories the tool reads memory by
 * (buffers, objects).  Runs on the control thread under xp_agent.lock.
 * Bad input leaves everything as it was and says what was wrong. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../probes/probes.h"
#include "trace.h"


#define START_USAGE "usage: trace start [-D DEPTH] [-T TID]... [-b KIB] [-B KIB] [--overwrite] [--session]\n" \
		    "                   [--seccomp-checked] [--requests] [--libcall|--no-libcall]\n" \
		    "                   [--follow SOCKET]\n"

/* The sites `trace select` named, for the next start (none: all). */
static uintptr_t *selection;
static size_t nselection, selection_cap;
/* The library calls (GOT slots) `trace select-calls` named for a start
 * with a selection (without one, every call is traced). */
static uintptr_t *call_selection;
static size_t ncall_selection;
/* What the last start was given, for status. */
static struct xp_trace_config last_cfg = { 1024, 0, NULL, 0, 0, 0, 0 };
/* The running trace was started with no selection: every function,
 * those of libraries loaded later included. */
static int tracing_all;
/* Library calls are traced too (trace_plt.c; with --libcall; under a
 * selection, those select-calls named). */
static int tracing_libcalls;
static int32_t last_tids[XP_TRACE_MAX_TIDS];
/* The control session that started the trace with --session (a recording
 * client): when it ends, however it ends, tracing stops. 0: none. */
static unsigned long owner;
/* The recording client that may still be draining the buffers: the same
 * session, kept after a stop (by anyone) until the session ends, as the
 * client goes on copying what was written up to the stop.  While it is
 * there nobody may start the buffers over (a clear, or a start in another
 * mode): the client would write its tail, which says which records the
 * thread may write over, into a ring that means something else by then,
 * or into memory a clear has freed. */
static unsigned long reader;

static char *word(char **save)
{
	return strtok_r(NULL, " \t", save);
}

/* A whole unsigned number in base (0: C rules), at most max. */
static int parse_num(const char *s, int base, unsigned long long max, unsigned long long *v)
{
	char *end;
	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	*v = strtoull(s, &end, base);
	return errno || *end || *v > max ? -1 : 0;
}

static int site_known(uintptr_t a)
{
	for (size_t i = 0; i < xp_trace_nobjects; i++) {
		const struct xp_trace_object *o = xp_trace_objects[i];
		size_t lo = 0, hi = o->nsites;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (o->sites[mid] < a)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < o->nsites && o->sites[lo] == a)
			return 1;
	}
	return 0;
}

/* What an object built by gcc with plain -fpatchable-function-entry=5
 * lacks: its entries are five 1-byte NOPs, and a thread may be stopped
 * between two of them, so they can be made one instruction only before
 * any thread runs the code, which libxprobes_trace.a's constructor does. */
static void gcc_plain_why(struct textbuf *out, const char *lead)
{
	tb_printf(out, "%s%zu function%s of %s start with gcc's five one-byte NOPs, and the "
		       "object was not linked with libxprobes_trace.a, whose constructor makes "
		       "each one instruction before any thread can be between them; they cannot "
		       "be switched while threads run: link it with `pkg-config --libs "
		       "xprobes-trace`, or build it with clang, whose entry is one 5-byte NOP%s\n",
		  lead, xp_trace_ngcc_plain, xp_trace_ngcc_plain == 1 ? "" : "s",
		  xp_trace_gcc_plain_path, *lead == '(' ? ")" : "");
}

/* Entries another tool has its hands on: never switched (see
 * trace_verify.c). */
static void others_why(struct textbuf *out)
{
	if (xp_trace_nbreak)
		tb_printf(out, "(not traced: %zu function%s carrying another tool's int3 or call, "
			       "a uprobe (bpftrace, perf probe) or a debugger's breakpoint: the "
			       "tracer never writes under one; start again once it is removed)\n",
			  xp_trace_nbreak, xp_trace_nbreak == 1 ? "" : "s");
	if (xp_trace_nscar)
		tb_printf(out, "(not traced: %zu gcc-built function%s from which a uprobe was "
			       "removed: the kernel put the file's one-byte NOP back, a thread may "
			       "be between it and the next, and switching it could crash that "
			       "thread; traced again after the program restarts)\n",
			  xp_trace_nscar, xp_trace_nscar == 1 ? "" : "s");
}

static int refresh(const char *cmd, struct textbuf *out)
{
	int rc = xp_trace_objects_refresh();
	if (rc < 0)
		tb_printf(out, "trace %s: cannot read the instrumented objects: %s\n", cmd,
			  strerror(-rc));
	return rc;
}

static int cmp_addr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

/* A site named twice is patched once: sort the selection, drop repeats. */
static void selection_unique(void)
{
	if (nselection < 2)
		return;
	qsort(selection, nselection, sizeof(*selection), cmp_addr);
	size_t n = 1;
	for (size_t i = 1; i < nselection; i++)
		if (selection[i] != selection[n - 1])
			selection[n++] = selection[i];
	nselection = n;
}

static int cmd_select(char **save, struct textbuf *out)
{
	char *w = word(save);
	if (!w) {
		tb_puts(out, "usage: trace select none | trace select ADDR...\n");
		return XP_ERR;
	}
	if (strcmp(w, "none") == 0) {
		if (word(save)) {
			tb_puts(out, "trace select: 'none' takes no addresses\n");
			return XP_ERR;
		}
		nselection = 0;
		ncall_selection = 0;
		tb_puts(out, "selected: none (start traces every function)\n");
		return XP_OK;
	}
	if (refresh("select", out) < 0)
		return XP_ERR;
	/* Check every address before adding any. */
	size_t n = 0, first = nselection;
	for (; w; w = word(save), n++) {
		unsigned long long v;
		if (parse_num(w, 16, UINTPTR_MAX, &v) < 0) {
			tb_printf(out, "trace select: '%s' is not a hex address; nothing selected\n", w);
			goto undo;
		}
		if (!site_known((uintptr_t)v)) {
			tb_printf(out, "trace select: %s is not the start of an instrumented "
				       "function; nothing selected\n", w);
			goto undo;
		}
		if (nselection == selection_cap) {
			size_t cap = selection_cap ? 2 * selection_cap : 256;
			uintptr_t *p = xp_realloc(selection, cap * sizeof(*p));
			if (!p) {
				tb_puts(out, "trace select: out of memory; nothing selected\n");
				goto undo;
			}
			selection = p;
			selection_cap = cap;
		}
		selection[nselection++] = (uintptr_t)v;
	}
	selection_unique();
	tb_printf(out, "selected: %zu function%s\n", nselection, nselection == 1 ? "" : "s");
	return XP_OK;
undo:
	nselection = first;
	return XP_ERR;
}

/* trace select-calls ADDR...: GOT slots whose library calls a start with
 * a selection traces (the tool matched their names to -F/-N).  Checked
 * at the start, where the slots of the traced objects are walked: an
 * address that is none of them hooks nothing. */
static int cmd_select_calls(char **save, struct textbuf *out)
{
	size_t first = ncall_selection;
	for (char *w; (w = word(save));) {
		unsigned long long v;
		uintptr_t *p;
		if (parse_num(w, 16, UINTPTR_MAX, &v) < 0) {
			tb_printf(out, "trace select-calls: '%s' is not a hex address; nothing "
				       "selected\n", w);
			ncall_selection = first;
			return XP_ERR;
		}
		if (!(p = xp_realloc(call_selection, (ncall_selection + 1) * sizeof(*p)))) {
			tb_puts(out, "trace select-calls: out of memory; nothing selected\n");
			ncall_selection = first;
			return XP_ERR;
		}
		call_selection = p;
		call_selection[ncall_selection++] = (uintptr_t)v;
	}
	qsort(call_selection, ncall_selection, sizeof(*call_selection), cmp_addr);
	tb_printf(out, "selected: %zu library call%s\n", ncall_selection,
		  ncall_selection == 1 ? "" : "s");
	return XP_OK;
}

/* trace args none | trace args ADDR=ITEMS...: what the next start records
 * of each function's arguments and return value (trace_args.c; the tool
 * turns -A/-R into items).  Every word is checked before any is added. */
/* trace args --options WORD...: the tool's -A/-R/-a as it gave them (its
 * own quoting keeps each word free of blanks), joined by single spaces and
 * kept whole for `trace args show`; never read here. */
static int args_options(char **save, struct textbuf *out)
{
	char text[XP_TRACE_ARG_OPTIONS_MAX + 1];
	size_t len = 0;
	for (char *w = word(save); w; w = word(save)) {
		size_t n = strlen(w);
		if (len + !!len + n > XP_TRACE_ARG_OPTIONS_MAX) {
			tb_printf(out, "trace args: --options: more than %u bytes; nothing kept\n",
				  XP_TRACE_ARG_OPTIONS_MAX);
			return XP_ERR;
		}
		if (len)
			text[len++] = ' ';
		memcpy(text + len, w, n);
		len += n;
	}
	text[len] = 0;
	if (!len) {
		tb_puts(out, "usage: trace args --options TEXT\n");
		return XP_ERR;
	}
	xp_trace_args_set_options(text);
	tb_printf(out, "options: %zu bytes\n", len);
	return XP_OK;
}

static int cmd_args(char **save, struct textbuf *out)
{
	char *w = word(save);
	if (!w) {
		tb_puts(out, "usage: trace args none | trace args ADDR=ITEMS... | trace args --options "
			     "TEXT | trace args show\n");
		return XP_ERR;
	}
	if (strcmp(w, "show") == 0) { /* any time: a reader of the trace asks */
		const char *o = xp_trace_args_options();
		tb_printf(out, "options: %s\n", *o ? o : "none");
		return word(save) ? (tb_puts(out, "trace args: 'show' takes nothing more\n"), XP_ERR)
				  : XP_OK;
	}
	if (xp_trace_record_on()) {
		tb_puts(out, "trace args: tracing is on (trace stop first)\n");
		return XP_ERR;
	}
	if (strcmp(w, "none") == 0) {
		if (word(save)) {
			tb_puts(out, "trace args: 'none' takes nothing more\n");
			return XP_ERR;
		}
		xp_trace_args_clear();
		tb_puts(out, "arguments: none\n");
		return XP_OK;
	}
	if (strcmp(w, "--options") == 0)
		return args_options(save, out);
	enum { MAX_WORDS = 256 };
	uintptr_t addr[MAX_WORDS];
	uint8_t items[MAX_WORDS][XP_TRACE_ARG_ITEMS];
	size_t n = 0;
	for (; w; w = word(save)) {
		char *eq = strchr(w, '=');
		unsigned long long v;
		if (n == MAX_WORDS) {
			tb_printf(out, "trace args: at most %d specs a command; nothing added\n",
				  MAX_WORDS);
			return XP_ERR;
		}
		if (eq)
			*eq = 0;
		if (!eq || parse_num(w, 16, UINTPTR_MAX, &v) < 0 || v == 0 ||
		    xp_trace_args_parse(eq + 1, items[n]) < 0) {
			if (eq)
				*eq = '=';
			tb_printf(out, "trace args: '%s' is not ADDR=ITEMS (items: iN fN sN r rf rs, "
				       "comma-separated, at most %d); nothing added\n", w,
				  XP_TRACE_ARG_ITEMS);
			return XP_ERR;
		}
		addr[n++] = (uintptr_t)v;
	}
	for (size_t i = 0; i < n; i++)
		if (xp_trace_args_set(addr[i], items[i]) < 0) {
			tb_printf(out, "trace args: more than %u functions; the rest not added\n",
				  XP_TRACE_ARG_MAX_FUNCS);
			return XP_ERR;
		}
	tb_printf(out, "arguments: %zu function%s\n", xp_trace_args_count(),
		  xp_trace_args_count() == 1 ? "" : "s");
	return XP_OK;
}

static size_t count_sites(int patched_only)
{
	size_t n = 0;
	for (size_t i = 0; i < xp_trace_nobjects; i++) {
		const struct xp_trace_object *o = xp_trace_objects[i];
		for (size_t j = 0; j < o->nsites; j++)
			n += !patched_only || o->on[j];
	}
	return n;
}

/* A process under seccomp, unless the client read its filters first
 * (trace_seccomp.c): nothing changes, and the reply says why. */
static int seccomp_refuses(struct textbuf *out)
{
	int mode = 0;
	pid_t tid = xp_trace_seccomp_thread(&mode);
	if (tid == 0)
		return 0;
	if (tid < 0)
		tb_puts(out, "trace start: cannot list this process's threads to see whether "
			     "seccomp confines them; nothing was changed\n");
	else
		tb_printf(out, "trace start: thread %d runs under seccomp (%s), which may kill the "
			       "process for a system call that tracing makes (mremap, mmap, pwrite64 "
			       "into /proc/self/mem...); nothing was changed.  The xprobes tool reads "
			       "the filters first (as root) and says which call they refuse; "
			       "--seccomp-checked starts anyway\n", (int)tid,
			  mode == 1 ? "strict mode" : "a filter");
	return 1;
}

static int cmd_start(char **save, struct textbuf *out)
{
	struct xp_trace_config c = { 1024, 0, NULL, 0, 0, 0, 0 };
	int32_t tids[XP_TRACE_MAX_TIDS];
	int session = 0, seccomp_checked = 0, libcalls = 0;
	const char *follow = NULL; /* a recorder following forks and execs */
	c.tids = tids;
	for (char *w; (w = word(save));) {
		unsigned long long v;
		char *arg = NULL;
		if (strcmp(w, "--overwrite") == 0) {
			c.overwrite = 1;
			continue;
		}
		if (strcmp(w, "--session") == 0) {
			session = 1;
			continue;
		}
		if (strcmp(w, "--requests") == 0) { /* only what modules' requests keep */
			c.requests = 1;
			continue;
		}
		if (strcmp(w, "--seccomp-checked") == 0) {
			seccomp_checked = 1;
			continue;
		}
		if (strcmp(w, "--libcall") == 0 || strcmp(w, "--no-libcall") == 0) {
			libcalls = w[2] == 'l';
			continue;
		}
		if (strcmp(w, "--follow") == 0) {
			if (!(follow = word(save))) {
				tb_puts(out, "trace start: --follow needs a socket path\n" START_USAGE);
				return XP_ERR;
			}
			continue;
		}
		if (strcmp(w, "-D") && strcmp(w, "-T") && strcmp(w, "-b") && strcmp(w, "-B")) {
			tb_printf(out, "trace start: unknown option '%s'\n" START_USAGE, w);
			return XP_ERR;
		}
		arg = word(save);
		if (w[1] == 'D' && parse_num(arg, 10, UINT32_MAX, &v) == 0) {
			c.max_depth = (uint32_t)v;
		} else if (w[1] == 'T' && parse_num(arg, 10, INT32_MAX, &v) == 0 && v > 0) {
			if (c.ntids == XP_TRACE_MAX_TIDS) {
				tb_printf(out, "trace start: at most %d thread ids\n", XP_TRACE_MAX_TIDS);
				return XP_ERR;
			}
			tids[c.ntids++] = (int32_t)v;
		} else if (w[1] == 'b' && parse_num(arg, 10, XP_TRACE_MAX_KIB, &v) == 0 && v > 0) {
			c.buf_kib = (uint32_t)v;
		} else if (w[1] == 'B' && parse_num(arg, 10, UINT32_MAX, &v) == 0 && v >= 64) {
			c.budget_kib = (uint32_t)v;
		} else {
			tb_printf(out, "trace start: %s needs a %s, not '%s'\n" START_USAGE, w,
				  w[1] == 'D' ? "depth (0: no limit)" :
				  w[1] == 'T' ? "thread id" : w[1] == 'b' ?
				  "buffer size in KiB (1 to 4194304)" :
				  "budget in KiB for all buffers (64 to 4294967295)",
				  arg ? arg : "nothing");
			return XP_ERR;
		}
	}
	if (xp_trace_record_on()) {
		tb_puts(out, "trace start: tracing is already on (trace stop first)\n");
		return XP_ERR;
	}
	if (c.requests && c.overwrite) {
		tb_puts(out, "trace start: --requests does not go with --overwrite (a request's "
			     "records are kept or dropped as a whole, in a drained ring)\n");
		return XP_ERR;
	}
	if (reader && reader != xp_agent.session) {
		tb_puts(out, "trace start: a recording client (trace record) is still reading the "
			     "buffers; start again when it ends\n");
		return XP_ERR;
	}
	if (session && !xp_agent.session) {
		tb_puts(out, "trace start: --session needs a control connection\n");
		return XP_ERR;
	}
	if (!seccomp_checked && seccomp_refuses(out))
		return XP_ERR;
	if (refresh("start", out) < 0)
		return XP_ERR;
	if (count_sites(0) == 0) {
		if (xp_trace_ngcc_plain)
			gcc_plain_why(out, "trace start: ");
		else
			tb_puts(out, "trace start: no instrumented function in this process "
				     "(build with `pkg-config --cflags --libs xprobes-trace`, or "
				     "with -fpatchable-function-entry=5 alone using clang)\n");
		return XP_ERR;
	}
	int rc = follow ? xp_trace_follow_connect(follow) : 0;
	if (!follow || rc < 0)
		xp_trace_follow_off();
	if (rc < 0) /* another mount namespace, say: this process alone */
		tb_printf(out, "(children not followed: cannot reach %s: %s)\n", follow,
			  strerror(-rc));
	rc = xp_trace_record_start(&c);
	if (rc < 0) {
		tb_printf(out, "trace start: %s\n", strerror(-rc));
		return XP_ERR;
	}
	xp_trace_args_arm(); /* before any call can be recorded */
	rc = xp_trace_patch_on(selection, nselection);
	if (rc < 0) {
		xp_trace_record_stop();
		tb_printf(out, "trace start: patching failed: %s; nothing is traced\n",
			  *xp_trace_patch_error ? xp_trace_patch_error : strerror(-rc));
		return XP_ERR;
	}
	tracing_libcalls = libcalls && (nselection == 0 || ncall_selection);
	if (tracing_libcalls &&
	    (rc = xp_trace_plt_on(nselection ? call_selection : NULL, ncall_selection)) < 0) {
		xp_trace_record_stop();
		xp_trace_patch_off();
		tracing_libcalls = 0;
		tb_printf(out, "trace start: hooking library calls failed: %s; nothing is traced "
			       "(start without --libcall to trace the functions alone)\n",
			  *xp_trace_plt_error ? xp_trace_plt_error : strerror(-rc));
		return XP_ERR;
	}
	xp_trace_verify_remember();
	last_cfg = c;
	owner = session ? xp_agent.session : 0;
	if (session)
		reader = owner;
	tracing_all = nselection == 0;
	memcpy(last_tids, tids, c.ntids * sizeof(*tids));
	last_cfg.tids = last_tids;
	size_t n = count_sites(1);
	tb_printf(out, "tracing %zu function%s\n", n, n == 1 ? "" : "s");
	if (tracing_libcalls)
		tb_printf(out, "and the calls through %zu library call slot%s\n", xp_trace_plt_hooked(),
			  xp_trace_plt_hooked() == 1 ? "" : "s");
	if (xp_trace_args_on)
		tb_printf(out, "with the arguments or return values of %zu function%s\n",
			  xp_trace_args_count(), xp_trace_args_count() == 1 ? "" : "s");
	if (xp_trace_ngcc_plain)
		gcc_plain_why(out, "(not traced: ");
	others_why(out);
	size_t nsites = 0;
	for (size_t i = 0; i < xp_agent.nobjects; i++)
		nsites += xp_agent.objects[i]->nsites;
	if (nsites) {
		rc = xp_trace_site_hits(1);
		if (rc)
			tb_printf(out, "(XProbes site hits are not shown: %s)\n", strerror(-rc));
		else
			tb_printf(out, "and the hits of %zu XProbes site%s\n", nsites,
				  nsites == 1 ? "" : "s");
	}
	return XP_OK;
}

static int cmd_stop(struct textbuf *out)
{
	size_t n = count_sites(1);
	/* The GOT slots first: put back as the loader left them. */
	int prc = xp_trace_plt_off();
	if (prc < 0)
		tb_printf(out, "trace stop: %zu library call slot%s could not be put back: %s: "
			       "try trace stop again\n", xp_trace_plt_hooked(),
			  xp_trace_plt_hooked() == 1 ? "" : "s",
			  *xp_trace_plt_error ? xp_trace_plt_error : strerror(-prc));
	if (!xp_trace_record_on() && n == 0) {
		tb_puts(out, "tracing was off\n");
		return XP_OK;
	}
	int rc = xp_trace_patch_off();
	if (rc < 0) {
		/* Recording stops anyway: the hooks then return at once, the
		 * cheapest the patched calls can be until a stop succeeds. */
		xp_trace_record_stop();
		tb_printf(out, "trace stop: recording stopped, but unpatching failed: %s; "
			       "%zu function%s still call the hook: try trace stop again\n",
			  *xp_trace_patch_error ? xp_trace_patch_error : strerror(-rc), n,
			  n == 1 ? "" : "s");
		return XP_ERR;
	}
	/* Entries stop with the patches; frames still on stacks return
	 * through the trampoline and their exits are still recorded. */
	xp_trace_record_stop();
	xp_trace_verify_forget();
	owner = 0;
	tb_printf(out, "tracing stopped (%zu function%s unpatched)\n", n, n == 1 ? "" : "s");
	if (prc < 0)
		return XP_ERR;
	rc = xp_trace_site_hits(0);
	if (rc) /* their handlers stay, and return at once while not tracing */
		tb_printf(out, "(the site-hit handlers stay attached: %s)\n", strerror(-rc));
	return XP_OK;
}

struct totals {
	size_t threads, exited;
	uint64_t used, cap, lost, overruns;
};

static void add_buf(const struct xp_trace_buf *b, uint64_t overruns, void *arg)
{
	struct totals *s = arg;
	s->threads++;
	s->exited += !!(b->flags & XP_TRACE_BUF_EXITED);
	uint64_t head = atomic_load_explicit(&b->head, memory_order_acquire);
	uint64_t tail = atomic_load_explicit(&b->tail, memory_order_relaxed);
	s->used += head - tail > b->cap ? b->cap : head - tail;
	s->cap += b->cap;
	s->lost += atomic_load_explicit(&b->lost, memory_order_relaxed);
	s->overruns += overruns;
}

static int cmd_status(struct textbuf *out)
{
	if (refresh("status", out) < 0)
		return XP_ERR;
	struct totals s = { 0 };
	xp_trace_record_each(add_buf, &s);
	tb_printf(out, "tracing: %s\n", xp_trace_record_on() ? "on" : "off");
	tb_printf(out, "functions: %zu patched of %zu in %zu object%s\n", count_sites(1),
		  count_sites(0), xp_trace_nobjects, xp_trace_nobjects == 1 ? "" : "s");
	/* Patched means our call is in the text now: the count above is
	 * read from the bytes; this says what became of the others. */
	xp_trace_verify(out);
	others_why(out);
	if (xp_trace_plt_hooked())
		tb_printf(out, "library calls: through %zu GOT slot%s\n", xp_trace_plt_hooked(),
			  xp_trace_plt_hooked() == 1 ? "" : "s");
	tb_printf(out, "threads: %zu with buffers (%zu ended)\n", s.threads, s.exited);
	tb_printf(out, "records: %" PRIu64 " used of %" PRIu64 "\n", s.used, s.cap);
	uint64_t unbuffered = xp_trace_record_unbuffered();
	tb_printf(out, "lost: %" PRIu64 " records (buffers full)\n", s.lost);
	if (unbuffered)
		tb_printf(out, "unbuffered: %" PRIu64 " records of threads the -B budget left "
			       "without a buffer\n", unbuffered);
	tb_printf(out, "overruns: %" PRIu64 " calls not followed (shadow stack full)\n",
		  s.overruns);
	tb_printf(out, "options: -b %" PRIu32 " KiB per thread%s%s, depth %s", last_cfg.buf_kib,
		  last_cfg.overwrite ? " (overwrite: the newest kept)" : "",
		  last_cfg.requests ? " (requests: only what modules keep)" : "",
		  last_cfg.max_depth ? "" : "unlimited");
	if (last_cfg.max_depth)
		tb_printf(out, "%" PRIu32, last_cfg.max_depth);
	if (last_cfg.budget_kib)
		tb_printf(out, ", -B %" PRIu32 " KiB in all", last_cfg.budget_kib);
	tb_puts(out, ", threads");
	if (!last_cfg.ntids)
		tb_puts(out, " all");
	for (size_t i = 0; i < last_cfg.ntids; i++)
		tb_printf(out, " %" PRId32, last_cfg.tids[i]);
	tb_printf(out, ", %zu selected function%s\n", nselection,
		  nselection ? (nselection == 1 ? "" : "s") : "s (none: all)");
	return XP_OK;
}

static void print_buf(const struct xp_trace_buf *b, uint64_t overruns, void *arg)
{
	(void)overruns;
	if (b->flags & XP_TRACE_BUF_SHARED)
		return; /* its follower drains it, and would twice */
	tb_printf(arg, "buf tid=%" PRId32 " addr=0x%" PRIxPTR " cap=%" PRIu64 "\n", b->tid,
		  (uintptr_t)b, b->cap);
}

static int cmd_buffers(struct textbuf *out)
{
	uint64_t st, sn, nt, nn;
	xp_trace_record_clock(&st, &sn, &nt, &nn);
	tb_printf(out, "clock start_tsc=%" PRIu64 " start_ns=%" PRIu64 " now_tsc=%" PRIu64
		       " now_ns=%" PRIu64 "\n", st, sn, nt, nn);
	/* Moves on every load and unload: a recording client asks `trace
	 * objects` again when it does (a library dlopen()ed since). */
	unsigned long long counts[2];
	xp_loader_counts(counts);
	tb_printf(out, "objects gen=%llu\n", counts[0] + counts[1]);
	tb_printf(out, "unbuffered lost=%" PRIu64 "\n", xp_trace_record_unbuffered());
	/* A recording client ends when somebody else stopped the trace. */
	tb_printf(out, "tracing on=%d\n", xp_trace_record_on());
	xp_trace_record_each(print_buf, out);
	return XP_OK;
}

static int cmd_objects(struct textbuf *out)
{
	if (refresh("objects", out) < 0)
		return XP_ERR;
	for (size_t i = 0; i < xp_trace_nobjects; i++) {
		const struct xp_trace_object *o = xp_trace_objects[i];
		tb_printf(out, "object base=0x%" PRIxPTR " sites=%zu table=0x%" PRIxPTR " path=%s\n",
			  o->base, o->nsites, (uintptr_t)o->sites, o->path);
	}
	return XP_OK;
}

/* A library dlopen()ed while everything is traced is traced from its
 * load on (before dlopen returns, when the loading thread finds the agent
 * free), as ftrace enables a module's functions when it loads.  With a
 * selection (-F/-N, resolved to addresses by the tool at start), its
 * functions were not selected: they stay NOPs until the next start. */
static int dlopened;

void xp_trace_after_dlopen(void)
{
	__atomic_store_n(&dlopened, 1, __ATOMIC_RELEASE);
}

/* The session that started a trace with --session ended (the recording
 * client exited, was killed, or lost its connection): stop tracing, put
 * the NOPs back, and say so to whoever asks next. */
void xp_trace_session_end(unsigned long id, struct textbuf *log)
{
	if (reader == id)
		reader = 0;
	if (!owner || owner != id)
		return;
	struct textbuf out;
	tb_init(&out, 4096);
	int rc = cmd_stop(&out);
	if (log)
		tb_printf(log, "trace: its recording client went away: %s%s", rc == XP_OK ? "" : "failed: ",
			  out.data ? out.data : "tracing stopped\n");
	tb_free(&out);
}

void xp_trace_after_rescan(struct textbuf *log)
{
	int dl = __atomic_exchange_n(&dlopened, 0, __ATOMIC_ACQ_REL);
	if (!tracing_all || !xp_trace_record_on() || (!dl && !xp_trace_objects_stale()))
		return;
	int rc = xp_trace_objects_refresh();
	if (rc == 0)
		rc = xp_trace_patch_on(NULL, 0);
	if (rc == 0)
		xp_trace_verify_remember();
	if (rc == 0 && tracing_libcalls && xp_trace_plt_on(NULL, 0) < 0 && log)
		tb_printf(log, "trace: the library calls of a library loaded while tracing are not "
			       "traced: %s\n", xp_trace_plt_error);
	if (rc < 0 && log)
		tb_printf(log, "trace: the functions of a library loaded while tracing are not "
			       "traced: %s\n",
			  rc == -ENOMEM ? "out of memory" : *xp_trace_patch_error ?
			  xp_trace_patch_error : strerror(-rc));
	/* Its XProbes sites show their hits too. */
	if (xp_agent.nobjects && xp_trace_site_hits(1) && log)
		tb_puts(log, "trace: the XProbes sites of a library loaded while tracing do not "
			     "show their hits\n");
}

int xp_trace_command(char *args, struct textbuf *out)
{
	char *save = NULL;
	char *sub = strtok_r(args, " \t", &save);
	/* Threads that ended since the last command: their buffers say so. */
	xp_trace_record_sweep();
	/* Lazy slots resolved by calls that did not return: hooked again. */
	xp_trace_plt_resync();
	if (!sub) {
		tb_puts(out, "usage: trace select|select-calls|args|start|stop|clear|status|buffers|objects "
			     "...\n");
		return XP_ERR;
	}
	if (strcmp(sub, "select") == 0)
		return cmd_select(&save, out);
	if (strcmp(sub, "select-calls") == 0)
		return cmd_select_calls(&save, out);
	if (strcmp(sub, "args") == 0)
		return cmd_args(&save, out);
	if (strcmp(sub, "start") == 0)
		return cmd_start(&save, out);
	int known = !strcmp(sub, "stop") || !strcmp(sub, "clear") || !strcmp(sub, "status") ||
		    !strcmp(sub, "buffers") || !strcmp(sub, "objects");
	if (!known) {
		tb_printf(out, "trace: unknown subcommand '%s' "
			       "(select, start, stop, clear, status, buffers, objects)\n", sub);
		return XP_ERR;
	}
	const char *extra = word(&save);
	if (extra) {
		tb_printf(out, "trace %s: unexpected argument '%s'\n", sub, extra);
		return XP_ERR;
	}
	if (strcmp(sub, "stop") == 0)
		return cmd_stop(out);
	if (strcmp(sub, "clear") == 0) {
		if (reader) {
			tb_puts(out, "trace clear: a recording client (trace record) is reading the "
				     "buffers; they are not cleared under it\n");
			return XP_ERR;
		}
		xp_trace_record_clear();
		tb_puts(out, "trace data cleared\n");
		return XP_OK;
	}
	if (strcmp(sub, "status") == 0)
		return cmd_status(out);
	if (strcmp(sub, "buffers") == 0)
		return cmd_buffers(out);
	return cmd_objects(out);
}
