/* SPDX-License-Identifier: MIT */
/* The base layer of the agent: what every other layer uses and which
 * itself uses nothing of the agent's.  Allocation with fault injection,
 * text buffers, the control protocol's framing, signatures, ELF notes,
 * glob checks, the loader and the agent's threads.  The wire framing,
 * signatures and glob checks are the protocol the tools share: they
 * include this header and link wire.o and signature.o. */
#ifndef XP_BASE_H
#define XP_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

/* ---- Allocation and fault injection (alloc.c) ---- */

/* The agent's allocations and fallible system calls, with fault injection.
 *
 * Every allocation the agent makes goes through these, and every system
 * call whose failure it handles asks xp_fault() first, so a test can make
 * the Nth of them fail (SQLite's way) and check that the operation left
 * the process as it was.  Off (the default), a fault point costs one
 * predictable branch on a cold path; sites never come here.
 */

/* -1: off.  Otherwise the number of fault points still to pass; the one
 * that finds it at 0 fails (and it goes back to -1). */
extern long xp_fault_countdown;
/* How many fault points were passed since the counter was last reset. */
extern unsigned long xp_fault_points;

int xp_fault_hit(void);

/* 1 when this fault point must fail (errno is set to ENOMEM/EIO by the
 * caller as fits). */
static inline int xp_fault(void)
{
	return xp_fault_hit();
}

void *xp_malloc(size_t n);
void *xp_calloc(size_t n, size_t size);
void *xp_realloc(void *p, size_t n);
char *xp_strdup(const char *s);
char *xp_strndup(const char *s, size_t n);

/* ---- Text buffers (textbuf.c) ---- */

/* A growable, NUL-terminated text buffer with a hard size limit. */

struct textbuf {
	char *data;
	size_t len, cap, limit;
	int truncated; /* set once an append did not fit under limit */
};

void tb_init(struct textbuf *tb, size_t limit);
void tb_free(struct textbuf *tb);
void tb_reset(struct textbuf *tb);
/* Append; returns 0, or -1 when the text did not fit (it is dropped). */
int tb_append(struct textbuf *tb, const char *s, size_t n);
int tb_puts(struct textbuf *tb, const char *s);
int tb_printf(struct textbuf *tb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- Wire framing (wire.c), shared with the tools ---- */

/* The control protocol between the xprobes tool and the in-process agent.
 *
 * Over a UNIX stream socket, each message is a frame: a 4-byte little-endian
 * length, then that many bytes.  A request is one command line (no NUL).  A
 * reply's first byte is a status (XP_OK or XP_ERR), the rest is text.
 * Requests are at most XP_MAX_REQUEST bytes, replies XP_MAX_REPLY.
 */

#define XP_MAX_REQUEST (64u * 1024)
#define XP_MAX_REPLY (4u * 1024 * 1024)

enum { XP_OK = 0, XP_ERR = 1 };

/* Socket path of process pid owned by uid: /tmp/.xprobes-UID/PID.sock
 * (XPROBES_RUNDIR overrides /tmp).  Returns 0, or -1 if it does not fit. */
int xp_socket_path(char *out, size_t outsz, uid_t uid, pid_t pid);
int xp_socket_dir(char *out, size_t outsz, uid_t uid);
/* The same under rundir instead ("" or NULL: XPROBES_RUNDIR, else /tmp):
 * the tool looks where the target's agent did. */
int xp_socket_dir_under(char *out, size_t outsz, const char *rundir, uid_t uid);

/* Write one frame; returns 0 or -1 (errno set).  Never raises SIGPIPE. */
int xp_send_frame(int fd, const void *buf, size_t len);

/* Read one frame into a malloc'd buffer (NUL-terminated for convenience).
 * Returns 0; -1 on I/O error or EOF (errno 0 for a clean EOF); -2 when the
 * announced length exceeds max (nothing more is read). */
int xp_recv_frame(int fd, char **buf, size_t *len, size_t max);
/* The same, failing with ETIMEDOUT unless the whole frame arrives within
 * timeout_ms (-1: no limit). */
int xp_recv_frame_within(int fd, char **buf, size_t *len, size_t max, int timeout_ms);

/* Incremental parsing, for a reader that gathers bytes without blocking.
 * Returns 0 when buf starts with a whole frame (*payload, *plen: its body
 * inside buf; *consumed: header + body), 1 when more bytes are needed, or
 * -EMSGSIZE when the announced length exceeds max. */
int xp_frame_parse(const char *buf, size_t len, size_t max, const char **payload,
		   size_t *plen, size_t *consumed);

/* ---- Signatures (signature.c), shared with the tools ---- */

/* Type-list canonicalisation: "( const struct conn * )" and
 * "(const struct conn*)" are the same signature. */

/* Writes the canonical form of a parenthesised type list, without the outer
 * parentheses ("const struct conn*"; "" for "()" and "(void)").  Returns
 * 0, or -1 if out is too small (out is then truncated). */
int sig_canonical(const char *types, char *out, size_t outsz);

/* The canonical form in a malloc'd string of the length it needs, or NULL
 * when out of memory. */
char *sig_canonical_dup(const char *types);

/* 1 when two parenthesised type lists are the same signature. */
int sig_equal(const char *a, const char *b);

/* ---- ELF notes (notes.c) ---- */

/* Walking the "xprobes" ELF notes of a loaded object's PT_NOTE segment.
 *
 * The memory comes from objects we did not build: the walker trusts no
 * size it reads and never touches a byte outside [p, p + len). */

/* Called with the address of each well-formed xprobes note's 4-byte
 * descriptor (owner "xprobes", type 1) and the site record it points at
 * (desc + the signed 32-bit offset it holds; not checked here). */
typedef void (*xp_note_fn)(const void *desc, uintptr_t record, void *arg);

/* Walk the notes in [p, p + len); stops at the first malformed header.
 * Returns how many xprobes notes were found. */
size_t xp_notes_walk(const void *p, size_t len, xp_note_fn fn, void *arg);
/* Every well-formed note in [p, p + len), of any name and type, until fn
 * returns non-zero or a header is malformed (sizes are checked against
 * len before fn sees them). */
typedef int (*xp_note_each_fn)(uint32_t type, const char *name, uint32_t namesz,
			       const void *desc, uint32_t descsz, void *arg);
void xp_note_each(const void *p, size_t len, xp_note_each_fn fn, void *arg);

/* ---- Glob checks (header-only), shared with the tools ---- */

/* is a shell glob well formed?
 *
 * fnmatch(3) takes an unclosed '[' or a trailing '\' as ordinary
 * characters, so a typo such as "conn_[" quietly matches nothing and
 * looks like "no such site".  The agent's commands, module loading and
 * the CLI's trace -F/-N ask this first and name the mistake instead.
 * Header-only: the CLI uses it too. */

/* Is NAME (LEN bytes) a POSIX character class?  fnmatch would take an
 * unknown one ("[[:alpah:]]") as a set that matches nothing. */
static inline int xp_glob_class(const char *name, size_t len)
{
	static const char *const classes[] = { "alnum", "alpha", "blank", "cntrl",
					       "digit", "graph", "lower", "print",
					       "punct", "space", "upper", "xdigit" };
	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
		if (strlen(classes[i]) == len && memcmp(classes[i], name, len) == 0)
			return 1;
	return 0;
}

/* The ']' closing the bracket set opened by the '[' at P, or NULL when
 * none closes it (fnmatch then takes that '[' as an ordinary character).
 * Inside a set, [:class:], [.coll.] and [=equiv=] are read whole, a class
 * name as the letters glibc reads; *BAD_CLASS is set when one names no
 * POSIX class. */
static inline const char *xp_glob_set_end(const char *p, int *bad_class)
{
	const char *q = p + 1;
	if (*q == '!' || *q == '^')
		q++;
	if (*q == ']') /* first in the set: an ordinary ']' */
		q++;
	while (*q && *q != ']') {
		if (q[0] == '[' && (q[1] == ':' || q[1] == '.' || q[1] == '=')) {
			char close = q[1];
			const char *c = q + 2;
			if (close == ':')
				while ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z'))
					c++;
			else
				while (*c && !(c[0] == close && c[1] == ']'))
					c++;
			if (!(c[0] == close && c[1] == ']')) {
				q++; /* not closed: an ordinary '[' */
				continue;
			}
			if (close == ':' && !xp_glob_class(q + 2, (size_t)(c - q - 2)))
				*bad_class = 1;
			q = c + 2;
		} else if (q[0] == '\\' && q[1]) {
			q += 2;
		} else {
			q++;
		}
	}
	return *q ? q : NULL;
}

/* NULL if GLOB is well formed, else what is wrong with it. */
static inline const char *xp_glob_error(const char *glob)
{
	if (!glob)
		return "it is missing";
	for (const char *p = glob; *p; p++) {
		if (*p == '\\') {
			if (!*++p)
				return "it ends with a lone '\\'";
			continue;
		}
		if (*p != '[')
			continue;
		int bad_class = 0;
		const char *end = xp_glob_set_end(p, &bad_class);
		if (!end)
			return "a '[' is not closed by ']'";
		if (bad_class)
			return "a \"[:name:]\" class is not one of alnum, alpha, blank, "
			       "cntrl, digit, graph, lower, print, punct, space, upper, xdigit";
		p = end;
	}
	return NULL;
}

/* The first ':' of PAT outside a bracket set ("obj:site" patterns: a
 * class such as [[:alpha:]] is not a separator), or NULL. */
static inline char *xp_glob_colon(char *pat)
{
	for (char *p = pat; *p; p++) {
		int bad_class = 0;
		const char *end;
		if (*p == '\\' && p[1])
			p++;
		else if (*p == '[' && (end = xp_glob_set_end(p, &bad_class)))
			p = pat + (end - pat); /* past the set; an unclosed '[' is ordinary */
		else if (*p == ':')
			return p;
	}
	return NULL;
}


/* ---- The loader (loader.c): the leaf below everything ---- */

/* libc's own dlopen(), bypassing the agent's interposed one. */
void *(*xp_libc_dlopen(void))(const char *, int);
void *xp_real_dlopen(const char *file, int mode);
/* Keep the object loaded as dlname ("" for the main program) at load bias
 * base mapped while the agent writes to it: a token for xp_dl_unpin, or
 * NULL when that object is gone (unloaded, or another one by that name). */
void *xp_dl_pin(const char *dlname, uintptr_t base);
void xp_dl_unpin(void *token);

/* ---- Threads (thread.c) ---- */

/* A detached, named agent thread with the asynchronous signals blocked.
 * 0 or a negative errno. */
int xp_thread_start(void *(*fn)(void *), void *arg, const char *name);

#endif
