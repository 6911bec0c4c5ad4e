/* SPDX-License-Identifier: MIT */
/* What the tools share (tools/common/): talking to a process's agent,
 * injecting one, finding what was installed beside the tool, reading
 * /proc, the command line conventions of the memcached tools, and the
 * --metrics exporter.  This is the layer's one header for the tools above
 * it (xprobes, mctop, mcsnoop, mclat, mcload, xprobes-dtrace); what its
 * own files share with each other only is in internal.h.  Nothing here
 * knows any one tool: messages are prefixed with the name a tool passes. */
#ifndef XP_COMMON_H
#define XP_COMMON_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ---- session.c: a connection to one process's agent ---- */

struct session {
	int fd;
	pid_t pid;
	int timeout_ms; /* for each reply; 0: the default, -1: none */
	/* /proc/PID/mem, opened before anything about the process was
	 * checked: bound to the image the checks saw (session_mem.c). */
	int memfd;
	int mem_errno;  /* why memfd is -1 */
};

#define SESSION_DEFAULT_TIMEOUT_MS 30000

/* Connect to pid's agent.  On failure prints a message naming the problem
 * (no such process, permission denied...) and returns -1; returns -2 when
 * the process has no agent (the message is printed unless quiet_no_agent). */
int session_open(struct session *s, pid_t pid, int quiet_no_agent);
void session_close(struct session *s);

/* Send one command line; the reply text (malloc'd) in *text.  Returns
 * 0 (command succeeded), 1 (command failed) or -1 (connection lost; a
 * message was printed). */
int session_call(struct session *s, const char *line, char **text);

/* ---- session_mem.c: the target's memory, bound to one process image ---- */

/* Every read and write the tools make into a target goes through the
 * session's /proc/PID/mem descriptor, opened before the checks of
 * session_open: an exec (of anything) after that leaves the descriptor on
 * the old image, so nothing is read from or written into the new one;
 * an exec before it is seen by the checks (session_mem_check).  A pid
 * alone (process_vm_readv/writev, a pidfd) names whatever the process
 * runs now. */

/* Open s->pid's memory into s->memfd (-1 with s->mem_errno on failure:
 * the calls below then fail with that errno). */
void session_mem_open(struct session *s);
void session_mem_close(struct session *s);

/* After the agent's socket was checked (its listener is s->pid, with the
 * credentials peer_uid/peer_gid it had when it listened): refuse, with
 * a message in why, an image whose credentials are not the listener's
 * (it exec'd a set-user-ID, set-group-ID or file-capability program since)
 * unless root listened.  0 or -1. */
int session_mem_check(struct session *s, uid_t peer_uid, gid_t peer_gid, char *why,
		      size_t whysz);

/* len bytes at addr: 0, or -1 with errno (ESRCH: the image the session
 * began with is gone: the process exec'd or exited). */
int session_mem_read(const struct session *s, uint64_t addr, void *buf, size_t len);
/* After ESRCH: whether the process lives on with another image (it
 * exec'd) rather than having exited. */
int session_mem_execd(const struct session *s);
/* len bytes into the target at addr, all or nothing said: 0, or -1. */
int session_mem_write(const struct session *s, uint64_t addr, const void *buf, size_t len);

/* ---- attach.c: attaching a tool to one running program by name ---- */

/* Injecting the agent when the program has none.  Messages start with the
 * tool's name (prog). */

/* The one live process whose command name is name; -1 after a message
 * (none, or several: their pids are listed). */
pid_t attach_find_one(const char *name, const char *prog);

/* session_open(), and when pid has no agent, inject_agent() of the one
 * next to this program first, if its program has memcached's probe sites
 * (so nothing is left in a process the tool cannot use).  0, or -1 after
 * a message. */
int attach_connect(struct session *s, pid_t pid, const char *prog);

/* `load --session PATH` (0, 1 or -1 as session_call, the reply in
 * *reply).  While an earlier session's copy of the module is still being
 * unloaded (the tool run again at once after Ctrl-C or kill -9, or a
 * handler that a thread has not left yet), it waits for it to go, up to
 * 10 s, saying so once on stderr under prog's name. */
int attach_load_session(struct session *s, const char *path, const char *prog, char **reply);

/* ---- inject.c: loading the agent into a process that never linked it ---- */

/* inject_agent flags */
enum {
	/* Inject even into a process under seccomp (strict or filter mode),
	 * whose filter could kill it for a system call of the injected code. */
	INJECT_IGNORE_SECCOMP = 1,
};

/* Make pid dlopen() agent_path on a fresh thread of its own.  Prints what
 * went wrong (ptrace refused, static binary, seccomp, still in its loader,
 * dlopen error) and returns -1; 0 once the library is loaded.  Either way
 * nothing of the injector stays mapped in pid. */
int inject_agent(pid_t pid, const char *agent_path, unsigned flags);

/* The agent next to this xprobes binary (build tree or PREFIX/lib);
 * malloc'd, or NULL. */
char *inject_default_agent(void);

/* ---- seccomp.c: what a process's seccomp filters would answer ---- */

/* A system call as a program makes it: the filters see its number and its
 * six arguments (flags matter; addresses and lengths are examples). */
struct syscall_use {
	const char *name; /* for messages: "mremap", "openat(O_RDWR)"... */
	long nr;
	uint64_t args[6];
	int may_fail; /* an error is harmless here (best effort): only a kill counts */
};

struct seccomp_answer {
	pid_t tid;            /* the thread that refuses (0: none) */
	int mode, filters;    /* its Seccomp: (1 strict, 2 filter) and Seccomp_filters: */
	const struct syscall_use *use; /* the call refused (NULL in strict mode) */
	uint32_t ret;         /* the filters' answer to it */
	int err;              /* with -1: why the filters could not be read */
};

/* Run the seccomp filters of every thread of pid on each of uses, without
 * making the calls: the filters are read with ptrace (which takes
 * CAP_SYS_ADMIN, and stops each filtered thread for a moment).  0: no
 * thread is under seccomp, or all let every call through (or only log
 * it); 1: a thread's filters refuse one (or it is in strict mode), in
 * *ans; -1: a thread's filters could not be read (ans->err). */
int seccomp_verdict(pid_t pid, const struct syscall_use *uses, size_t nuses,
		    struct seccomp_answer *ans);

/* What the answer ret does to call, in words: "kills the process on
 * mremap", "makes mremap fail with EPERM (errno 1)"... */
void seccomp_describe(uint32_t ret, const char *call, char *buf, size_t bufsz);

/* ---- exedir.c: where the running tool lives ---- */

/* The directory of /proc/self/exe into out; 0, or -1 if it cannot tell. */
int exe_dir(char *out, size_t outsz);

/* The first of the paths that exists, each a format with one %s for that
 * directory ("%s/../lib/libxprobes.so.0"), as a malloc'd real path; NULL
 * if none does. */
char *exe_dir_find(const char *const *formats, size_t n);

/* ---- sanitize.c: replies are text from another process ---- */

/* Before the tool prints one, it takes out whatever a terminal would obey
 * instead of show.  In place: drops control characters (below 0x20 except
 * newline and tab, DEL, and C1 controls, in UTF-8 or as single bytes) and
 * whole escape sequences (CSI, OSC and other strings, two- and three-byte
 * ones).  Returns text. */
char *sanitize_text(char *text);

/* ---- keytext.c: keys as people write them ---- */

/* A key's "key text", the one way every tool shows a key (the rule is at
 * the top of keytext.c, in mctop(1) and docs/design.md): valid UTF-8
 * stays itself; a byte outside valid UTF-8, every control (C0, DEL, C1)
 * and the ASCII space are \xHH; a backslash is \\.  Valid UTF-8, nothing a terminal
 * obeys, and reversible. */

/* keytext flags: with KEYTEXT_ASCII every byte past 0x7f is escaped too
 * (a terminal whose locale is not UTF-8). */
enum { KEYTEXT_ASCII = 1 };

/* The character at p (n bytes there): its length (1-4) and code point,
 * or 0 when p holds no valid UTF-8 character. */
int keytext_utf8(const unsigned char *p, size_t n, uint32_t *cp);
/* The text of key (len bytes) into out, NUL-terminated, cut after a
 * whole unit if outsz is short (4 * len + 1 always does).  1 when the
 * text is not the key's bytes (something was escaped), else 0. */
int keytext_from_bytes(const void *key, size_t len, char *out, size_t outsz, unsigned flags);
/* The same from a key as the modules escape it (\xNN for every byte
 * outside 0x21..0x7e and for the backslash). */
int keytext_from_module(const char *escaped, char *out, size_t outsz, unsigned flags);
/* A key text back to the key's bytes: their count, or -1 if text is not
 * a key text or out is too small. */
ssize_t keytext_to_bytes(const char *text, unsigned char *out, size_t outsz);
/* Terminal columns of a key text (wide characters two, combining ones
 * none), by Unicode's widths whatever the locale. */
int keytext_width(const char *text);
/* The longest start of text within cols columns, never cutting a
 * character (nor its combining marks) or an escape: its bytes, and its
 * columns in *width (may be NULL). */
size_t keytext_fit(const char *text, int cols, int *width);
/* text in exactly cols columns into out (left-aligned, padded with
 * spaces; a text cut to fit ends in '~'); out.  Room: strlen(text) +
 * cols + 2 bytes. */
char *keytext_pad(char *out, size_t outsz, const char *text, int cols);
/* text as a JSON string: quote, backslash and controls escaped, UTF-8 as
 * it is (a byte outside UTF-8, which no key text holds, as U+00NN). */
void keytext_json(FILE *f, const char *text);

/* ---- procnet.c: what /proc says about a process's TCP sockets ---- */

/* The lowest TCP port pid listens on, IPv4 or IPv6 (a socket in state
 * LISTEN that is one of pid's own descriptors, not merely one of its
 * network namespace's); 0 if none. */
unsigned procnet_listen_port(pid_t pid);

/* ---- cli.c: what the memcached tools share on the command line ---- */

/* The signal that asked the tool to stop, 0 until one did. */
extern volatile sig_atomic_t cli_stop;

/* Stop on each of the signals listed (0 ends the list): they set cli_stop
 * and cut a sleep or a poll() short (the kernel never restarts those), so
 * the tool's loop sees it and lets its module go before exiting.  With
 * SA_RESTART: a write to stdout blocked on a full pipe when the signal
 * came finishes, where without it stdio took the EINTR for a failed
 * write and the tool ended with "writing the output failed" (mclat under
 * SIGINT, seen in CI). */
void cli_stop_on(int sig, ...);

/* A process id (1 to INT_MAX, decimal, nothing after it): 0, or -1. */
int cli_parse_pid(const char *s, pid_t *pid);

/* After getopt's '?': a negative number among the arguments ("-1",
 * "-0.5") reads as options.  The argument, if that is what happened (so a
 * tool can say "must be positive" instead of "unknown option '-1'"), else
 * NULL. */
const char *cli_negative_number(int argc, char **argv, int optind);

/* At the start of main: descriptors 0, 1 and 2 that are closed are
 * opened on /dev/null, so the agent's socket never gets one of their
 * numbers (and the tool's output or input with it); and at exit, output
 * that could not be written (a full disk, a closed pipe) is reported
 * under prog's name and the exit status becomes 1, unless stdout's
 * reader went away (see cli_reader_gone).  SIGPIPE is ignored from here
 * on: writes to a closed pipe fail with EPIPE instead. */
void cli_std_streams(const char *prog);

/* Whether stdout's reader went away (a pipe into head that head closed,
 * a hung-up socket or terminal): the tools end quietly with status 0
 * then, as cat does, after letting their module go. */
int cli_reader_gone(void);

/* ---- progname.c: whose message it is ---- */

/* The name the running tool was started as (mctop, mcsnoop, xprobes...). */
const char *tool_name(void);
/* fprintf(stderr, "NAME: " fmt, ...) under that name. */
void tool_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* perror() under that name: "NAME: what: strerror(errno)". */
void tool_perror(const char *what);

/* ---- size.c: sizes as the user types them ---- */

/* "4096", "64K", "32M", "1G", "1T" (also "32MiB", "32MB": powers of 1024)
 * into *v bytes; *shift (if not NULL) the power of 2 of the unit typed (0:
 * bytes, 10: K ... 40: T), to answer in it.  0, or -1 (not a size, 0, or
 * too big for 64 bits). */
int cli_parse_size(const char *s, unsigned long long *v, unsigned *shift);

/* bytes as a whole number of the unit of shift ("4M"), rounded up or
 * down (a range's low end up, its high end down, so both are inside it);
 * plain bytes for shift 0. */
void cli_format_size(unsigned long long bytes, unsigned shift, int round_up, char *out,
		     size_t outsz);

/* ---- exposition.c: the Prometheus and OpenMetrics text formats ---- */

/* The two a scraper may ask for (its Accept header). */
enum expo_format { EXPO_PROMETHEUS, EXPO_OPENMETRICS, EXPO_NFORMATS };

/* A sample's value: integers exactly, else 15 digits, NaN, +Inf, -Inf. */
void expo_value(FILE *f, double v);
/* A label's value, escaped for both formats; valid UTF-8 as it is (a key
 * text is its own label), other bytes and controls as \xNN. */
void expo_label(FILE *f, const char *s);
/* The suffix of a family's samples by type ("counter": "_total", "info":
 * "_info", else ""). */
const char *expo_suffix(const char *type);
/* A family's # HELP and # TYPE lines; type "counter", "gauge" or "info",
 * named as fmt wants (an info is a gauge in the Prometheus format). */
void expo_family(FILE *f, enum expo_format fmt, const char *name, const char *type,
		 const char *help);
/* A family of one unlabelled sample. */
void expo_single(FILE *f, enum expo_format fmt, const char *name, const char *type,
		 const char *help, double v);
/* What ends the text: "# EOF" in OpenMetrics. */
void expo_end(FILE *f, enum expo_format fmt);

/* ---- exporter.c: --metrics ADDR:PORT, the text over HTTP ---- */

/* GET /metrics answers the body in the format the Accept header asks for
 * (OpenMetrics when it names it, else Prometheus 0.0.4), GET / a page
 * linking to it, other paths 404, other methods 405; HEAD too.  A thread
 * of its own serves at most 16 connections, with deadlines. */

/* Write data's whole exposition in fmt to out (expo_end included): 0, or
 * -1 to keep the previous body.  Called on the thread that calls
 * exporter_start or exporter_publish, never the server's: the tool's data
 * needs no lock. */
typedef int (*exporter_render)(FILE *out, enum expo_format fmt, const void *data);

struct exporter_conf {
	const char *prog;       /* messages, the page at /, the thread's name */
	const char *about;      /* the page at /: what the metrics are of */
	exporter_render render;
};

struct exporter;

/* Listen on addr ("HOST:PORT", "[V6]:PORT", ":PORT" for every address,
 * port 0 for any free one), serve first's body and say where on stderr
 * ("PROG: metrics at http://HOST:PORT/metrics").  NULL after a message. */
struct exporter *exporter_start(const char *addr, const struct exporter_conf *conf,
				const void *first);
/* Render data and serve it from now on: 0, or -1 (out of memory, or the
 * renderer failed) and the previous body stays. */
int exporter_publish(struct exporter *ex, const void *data);
void exporter_stop(struct exporter *ex);

/* ---- mcwatch.c, mcwatch_line.c: memcached's own event stream (`watch`), for a
 * memcached without probe sites ---- */

/* Whether a tool should read pid's memcached watch stream instead of
 * probes (attach.c): its program has none of memcached's SDT probe sites
 * (read from the file, without touching the process) and it serves TCP
 * (port given, or it listens on one).  A wrong -p (a process that is no server) is
 * then refused by attach_connect as before, injecting nothing. */
int attach_use_watch(pid_t pid, unsigned port);

#define MCWATCH_KEY_MAX 250   /* memcached's KEY_MAX_LENGTH */
#define MCWATCH_LINE_MAX 4096 /* a longer line is no memcached's (a key is 750 encoded) */
#define MCWATCH_STATS_MS 1000 /* the statistics' whole round trip, at most */

/* One item_get or item_store line of `watch fetchers mutations`
 * (mcwatch_line.c: every field bounded as memcached writes it). */
struct mcwatch_event {
	long long ts_sec;     /* memcached's wall clock: seconds, */
	long ts_usec;         /* and microseconds ("ts=S.U", U not zero-padded) */
	unsigned long long time_ns; /* that stamp on CLOCK_MONOTONIC (mcwatch_next) */
	int store;            /* 0: item_get, 1: item_store */
	char status[16];      /* get: found not_found flushed expired; store: stored ... */
	char cmd[12];         /* store: set add replace append prepend cas; get: "get".
			       * The stream's bytes (no space): shown by the key text rule */
	int cfd;              /* the client's descriptor in memcached; -1: not said */
	long size;            /* value bytes (0 on a miss) */
	size_t keylen;
	unsigned char key[MCWATCH_KEY_MAX]; /* the key's bytes, decoded */
};

/* Parse one line (without its newline): 1 and *e for an event, 2 and
 * *skipped for memcached's "skipped=N" (lines it dropped because this
 * reader fell behind), 3 for an item line memcached would not write
 * (malformed: a bad number, key or field), 0 for any other line, -1 for
 * an error line. */
int mcwatch_parse(const char *line, struct mcwatch_event *e, unsigned long long *skipped);

struct mcwatch_pending;

struct mcwatch {
	int fd;              /* non-blocking */
	size_t off, len;     /* the bytes waiting in buf: buf[off] to buf[len] */
	char buf[1 << 16];
	int overlong;        /* dropping the rest of a line too long */
	unsigned long long skipped; /* lines memcached reported skipped, in all */
	unsigned long long ambiguous; /* held-back gets a skip made undecidable */
	unsigned long long malformed; /* lines dropped: too long or not memcached's */
	/* memcached logs a store's own lookup of the key as an item_get just
	 * before its item_store: each connection's last get waits here until
	 * the next line of that connection says which it was (mcwatch.c). */
	struct mcwatch_pending *pend; /* MCWATCH_PEND slots, by cfd */
	size_t npend;
	struct mcwatch_event *ready;  /* events to hand out, in order */
	size_t nready, next_ready;
	unsigned long long last_sweep_ns;
	unsigned long long opened_ns; /* when the watch was sent (CLOCK_MONOTONIC) */
	unsigned port;
	unsigned long long dropped_at_open; /* memcached's log_worker_dropped then */
	unsigned long long skipped_at_open; /* and its log_watcher_skipped */
};

/* A reader on no connection yet (w->fd -1): 0, or -1 after a message
 * under prog's name.  mcwatch_open does this first; a test or a fuzzer
 * may set w->fd to a stream of its own. */
int mcwatch_init(struct mcwatch *w, const char *prog);
/* Connect to pid's memcached on port (0: the lowest TCP port it listens
 * on), over loopback, and start `watch fetchers mutations`.  0, or -1
 * after a message under prog's name. */
int mcwatch_open(struct mcwatch *w, pid_t pid, unsigned port, const char *prog);
/* The next event: 1 and *e, 0 when none came within timeout_ms (whatever
 * bytes keep arriving; or a signal cut the wait), -1 when memcached
 * closed the stream or refused it (a message was printed under prog's
 * name). */
int mcwatch_next(struct mcwatch *w, struct mcwatch_event *e, int timeout_ms, const char *prog);
/* What memcached's statistics say was lost since mcwatch_open, asked on a
 * connection of its own: entries its workers dropped because its logger
 * thread fell behind (log_worker_dropped: never in the stream), and lines
 * it skipped for its watchers (log_watcher_skipped: the stream says so
 * only with the next line it sends, so after a burst it may not say so
 * at all).  Both over every watcher: with others watching, upper bounds
 * of ours.  0, or -1 if memcached could not be asked, or did not answer
 * within timeout_ms. */
int mcwatch_stats(struct mcwatch *w, int timeout_ms, unsigned long long *dropped,
		  unsigned long long *skipped);
/* Hand out every held-back get now (the next mcwatch_next calls return
 * them): before ending, so that none is lost. */
void mcwatch_flush(struct mcwatch *w);
/* Close the connection: memcached drops the watcher at its next write. */
void mcwatch_close(struct mcwatch *w);
/* Escape key bytes as the probe modules do (bytes outside 0x21..0x7e and
 * '\\' as \xNN) into out (4 * len + 1 bytes). */
void mcwatch_escape(const unsigned char *key, size_t len, char *out, size_t outsz);

#endif
