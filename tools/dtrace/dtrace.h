/* SPDX-License-Identifier: MIT */
/* xprobes-dtrace: shared declarations.
 *
 * The tool turns a DTrace provider file (.d) into a header of XProbes sites
 * (-h) and an object defining their gates (-G), accepting the command line
 * of systemtap's `dtrace` stub so `--enable-dtrace` builds need no change.
 */
#ifndef XPD_DTRACE_H
#define XPD_DTRACE_H

#include <stddef.h>
#include <sys/types.h>

/* XPROBES_MAX_ARGS (site.h, not included: the tool has no sites) and the
 * SDT limit. */
#define XPD_MAX_ARGS 12

/* ---- growable strings (strbuf.c) ------------------------------------- */

struct strbuf {
	char *s;
	size_t len, cap;
};

void sb_putn(struct strbuf *sb, const char *s, size_t n);
void sb_puts(struct strbuf *sb, const char *s);
void sb_printf(struct strbuf *sb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void sb_free(struct strbuf *sb);

/* Allocation that cannot fail: a tool run out of memory just stops. */
void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

/* ---- the model (parse.c builds it) ------------------------------------ */

struct loc {
	const char *file; /* owned by the lexer, lives as long as the model */
	int line, col;
};

struct dt_param {
	char *type; /* C type text, e.g. "const char*"; never "char *" (see emit) */
	char *name; /* NULL when anonymous */
};

struct dt_probe {
	char *name; /* raw, e.g. "command__get" */
	struct loc loc;
	struct dt_param params[XPD_MAX_ARGS];
	int nparams;
};

struct dt_provider {
	char *name;
	struct loc loc;
	struct dt_probe *probes;
	size_t nprobes;
};

struct dt_file {
	struct dt_provider *provs;
	size_t nprovs;
	char **names; /* file names seen through line markers, for struct loc */
	size_t nnames;
};

/* Parses text (len bytes, may hold NULs) read from file `name`.  On a syntax
 * error prints "FILE:LINE:COL: message" to stderr and returns -1. */
int dt_parse(const char *name, const char *text, size_t len, struct dt_file *out);
void dt_free(struct dt_file *f);

/* ---- output ------------------------------------------------------------- */

/* Names derived from the stub's rules: "MEMCACHED_COMMAND_GET" and
 * "memcached_command__get_semaphore".  Caller frees. */
char *dt_macro_name(const char *prov, const char *probe);
char *dt_gate_name(const char *prov, const char *probe);

/* The #include line(s) that bring in <xprobes/site.h> (emit_header.c). */
void dt_emit_site_include(struct strbuf *sb);

/* Header text for -h; object source text for -G. */
void dt_emit_header(struct strbuf *sb, const struct dt_file *f, const char *src);
void dt_emit_gates(struct strbuf *sb, const struct dt_file *f, const char *src);

/* ---- processes and files (spawn.c, outfile.c) ------------------------- */

/* Runs argv[0] (PATH search).  With in != NULL, feeds it inlen bytes on
 * stdin; with out != NULL, collects its stdout.  Returns the exit status,
 * or -1 (message printed) if it could not run or died from a signal. */
int run_child(char *const argv[], const char *in, size_t inlen,
	      struct strbuf *out);

/* Splits a command from the environment ("gcc -m32") into words, appended
 * to a NULL-terminated argv vector. */
void argv_push(char ***argv, size_t *n, const char *word);
void argv_push_split(char ***argv, size_t *n, const char *words);
void argv_free(char **argv, size_t n);

/* An output file is written under a temporary name beside its final one
 * and renamed into place only when complete, so a failed run leaves
 * nothing behind.  A symlink is written through, as open() would: the
 * temporary file sits beside the link's target and replaces the target,
 * and an existing file keeps its permissions. */
struct outfile {
	char *path; /* as given, for messages */
	char *dest; /* path with symlinks followed: what tmp is renamed to */
	char *tmp;  /* NULL when writing straight to a non-regular file */
	mode_t mode; /* for the final file */
	int fd;
};
int outfile_begin(struct outfile *o, const char *path);
int outfile_write(struct outfile *o, const char *data, size_t len);
/* Path a child process should write to (tmp, or path itself). */
const char *outfile_target(const struct outfile *o);
int outfile_commit(struct outfile *o);
void outfile_abort(struct outfile *o);

extern const char *xpd_prog; /* "xprobes-dtrace", for messages (strbuf.c) */

#endif
