/* Function-graph recordings as uftrace data directories (issue 28): a
 * writer fed while the trace streams, and a reader that turns such a
 * directory (ours, or one `uftrace record` wrote without arguments) back
 * into struct tf_thread arrays for tools/trace_format.c's views.  No
 * process I/O here: the caller reads the target and passes text, paths
 * and events; names of probe sites come through a callback.  What of
 * uftrace's format is met and what is not: the top of trace_uftrace.c. */
#ifndef XP_TRACE_UFTRACE_H
#define XP_TRACE_UFTRACE_H

#include <stddef.h>
#include <stdint.h>

#include "xprobes.h"

/* An object whose functions the trace names: a function at runtime
 * address a is the symbol whose value + base == a (as `trace objects`
 * lists it). */
struct uft_object {
	const char *path;
	uint64_t base;
	/* Where to read its symbols, if not path: e.g. /proc/PID/map_files/
	 * START-END, the very file the target mapped (the path is the
	 * target's word; see tools/trace_names.c's open_mapped).  Only a
	 * regular ELF file is read. */
	const char *file;
};

struct uft_session {
	int pid;
	const char *exe;       /* the executable's path (info, task.txt) */
	const char *cmdline;   /* argv joined by spaces (info) */
	uint64_t mono_ns;      /* session start, CLOCK_MONOTONIC: the records' clock */
	uint64_t real_ns;      /* the same instant, CLOCK_REALTIME (the record date) */
	const char *maps;      /* /proc/PID/maps text at record time, or NULL */
	const struct uft_object *objects; /* their symbols go to NAME.sym */
	size_t nobjects;
	/* "provider:name" of an XP_TRACE_SITE record (tools/trace_names.c's
	 * trace_names_site); NULL: site records are left out. */
	const char *(*site_name)(void *ctx, uint64_t addr);
	void *site_ctx;
	/* Replace an existing non-empty DIR, if it is a uftrace data
	 * directory (its files are removed; never anything else). */
	int overwrite;
};

struct uft_writer;

/* Create DIR (or take an existing empty one) and write info, task.txt,
 * sid-SID.map and a NAME.sym per object.  NULL and errno on failure:
 * uft_error(NULL) says why ("DIR exists and is not empty", ...). */
struct uft_writer *uft_open(const char *dir, const struct uft_session *s);

/* Register thread tid (a TASK line, TID.dat, and its name, if not NULL,
 * as uftrace takes names: a perf COMM record).  Again with another name:
 * the thread was renamed.  0, or -1 with errno. */
int uft_thread(struct uft_writer *w, int tid, const char *name);

/* An object loaded after uft_open (a DLOP line and its NAME.sym).  0 or -1. */
int uft_object(struct uft_writer *w, const struct uft_object *o);

/* Append n events of thread tid (registered unnamed if new) to TID.dat,
 * in order, continuing the depth of the previous calls.  0, or -1 with
 * errno; after a failed write every later call fails the same way. */
int uft_append(struct uft_writer *w, int tid, const struct tf_event *ev, size_t n);

/* Records left out so far: exits whose entries were never seen, calls
 * deeper than uftrace's depth field holds, sites without a name callback. */
uint64_t uft_skipped(const struct uft_writer *w);

/* Finish (info's thread list and elapsed time; task.txt's times moved
 * back to the earliest record if one came before the session start) and
 * free w.  0, or -1 with errno and uft_error(NULL) saying why. */
int uft_close(struct uft_writer *w);

/* Why the last call on w failed, e.g. "writing DIR/123.dat: No space
 * left on device"; w NULL: the last uft_open or uft_close of this thread. */
const char *uft_error(const struct uft_writer *w);

/* ---- reading ---------------------------------------------------------- */

struct uft_names; /* the symbol files, events.txt and maps of a directory */

struct uft_recording {
	struct tf_thread *threads; /* in task.txt's order, events owned */
	char **thread_names;       /* [nthreads]: its last COMM, else the exe's base name */
	size_t nthreads;
	int pid;                   /* the first session's */
	uint64_t origin_ns;        /* its start (SESS timestamp) */
	char *exename;             /* "" if not recorded */
	struct tf_names names;     /* func: by the .sym files; site: by events.txt */
	struct uft_names *priv;
	char err[512];             /* why uft_load failed */
};

/* Read directory dir into r (zeroed first).  The directory is untrusted
 * input: sizes are bounded, offsets checked, every file opened without
 * following a symbolic link.  0, or -1 with errno and r->err set (r then
 * holds nothing to free).  Records carrying arguments or return values
 * (uftrace record -a/-A/-R) are refused. */
int uft_load(const char *dir, struct uft_recording *r);
void uft_free(struct uft_recording *r);

#endif
