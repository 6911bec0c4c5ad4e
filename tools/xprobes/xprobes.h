/* SPDX-License-Identifier: MIT */
/* The xprobes command's own files (tools/xprobes/): the command line
 * (xprobes.c), the shell, `xprobes list`, and the tool's side of `trace`.
 * This is their one header; what they share with the other tools comes
 * from tools/common/common.h.  The sections go from the bottom of the
 * layer up: a file uses only the sections above its own. */
#ifndef XP_XPROBES_H
#define XP_XPROBES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <gelf.h>

#include "../../lib/trace/trace.h"
#include "../common/common.h"

/* ---- trace_bounds.c ---- */

/* Limits on what one target makes the tool do: see trace_bounds.c. */

/* An index of 64-bit keys to numbers below UINT32_MAX (open addressing). */
struct u64map {
	uint64_t *key;
	uint32_t *val; /* value + 1; 0: free */
	size_t n, cap;
};
int u64map_get(const struct u64map *m, uint64_t key, uint32_t *val); /* 0 or -1 */
int u64map_put(struct u64map *m, uint64_t key, uint32_t val);        /* 0 or -1 (memory) */
void u64map_free(struct u64map *m);

/* An object's symbols are read only within these: far above real objects
 * (a large C++ library's .symtab has a few hundred thousand symbols). */
#define TRACE_ELF_MAX_SECTIONS 65536u
#define TRACE_ELF_MAX_SYMS (1u << 22)          /* per symbol table */
#define TRACE_ELF_MAX_STRTAB (256u << 20)      /* bytes of its string table */
#define TRACE_ELF_MAX_NAMES (256u << 20)       /* bytes of names kept per object */
#define TRACE_ELF_MAX_NOTE (1u << 20)

struct trace_elf {
	Elf *elf;
	uint64_t size; /* the file's */
	int fd;
};
/* fn(ctx), with a SIGBUS (the target shrank the mapped file under it)
 * caught: fn's value, or TRACE_ELF_SHRANK.  Every read of a trace_elf's
 * data runs under it. */
#define TRACE_ELF_SHRANK (-2)
int trace_elf_guard(int (*fn)(void *ctx), void *ctx);
/* fd's file through libelf, mapped (ELF_C_READ_MMAP), once its header and
 * section table are found to lie in the file within the limits: 0; 1 if it
 * is no ELF file; -1 if over a limit, why saying which. */
int trace_elf_begin(int fd, struct trace_elf *te, char *why, size_t whysz);
void trace_elf_end(struct trace_elf *te);
/* Whether a symbol table section and its string table may be read: 0, or
 * -1 with why. */
int trace_elf_symtab_ok(const struct trace_elf *te, const GElf_Shdr *sh, char *why, size_t whysz);
/* Whether a note section may be read (in the file, small). */
int trace_elf_note_ok(const struct trace_elf *te, const GElf_Shdr *sh);

/* ---- trace_argspec.c ---- */

struct tf_event;

/* Arguments and return values to record, uftrace's -A/-R syntax (see
 * trace_argspec.c): rules as given, and, once resolved against the
 * target's functions (trace_start.c), the spec of each address. */
enum ta_fmt { TA_AUTO, TA_SINT, TA_UINT, TA_HEX, TA_STR, TA_CHAR, TA_FLOAT, TA_PTR,
	      TA_ENUM,    /* /e:NAME: a machine word, shown as its enum's name */
	      TA_STRUCT,  /* /tSIZE:NAME: read from uftrace's recordings only */
	      TA_LDOUBLE, /* fparg/80, retval/f80: the same; a double in a payload */
};
enum ta_kind { TA_ARG, TA_FPARG, TA_RETVAL };
#define TA_MAX_ITEMS 8  /* per function, the agent's limit */
#define TA_MAX_ARG 16   /* argN: N at most (7 and up: stack words; the agent's limit) */
#define TA_MAX_FPARG 8  /* fpargN: xmm0-7 */
#define TA_MAX_HELD 32  /* items of a spec read from uftrace's -a (its .dbg): kept */
#define TA_REG_WORD 0x80 /* ta_item.reg of an fpargN: an integer word, not xmm */

struct ta_item {
	uint8_t kind;  /* enum ta_kind */
	uint8_t fmt;   /* enum ta_fmt */
	uint8_t size;  /* bytes shown: 1, 2, 4 or 8 (TA_STRUCT: its size, in uftrace's data) */
	uint8_t idx;   /* argN, fpargN: N */
	uint8_t reg;   /* "%RDX", "%stack+2" (uftrace's -a names where an
			* argument is): where the agent reads it, argN: the
			* word iN (rdi..r9: 1-6, %stack+N: 6+N); fpargN: xmm
			* 1-8, or TA_REG_WORD | the word (a float on the
			* stack); 0: argN's own place */
	const char *name; /* TA_ENUM, TA_STRUCT: the type's name (argspecs' pool) */
};

/* What one function records: its arguments in order, and its return value. */
struct ta_spec {
	struct ta_item arg[TA_MAX_HELD];
	size_t nargs;
	struct ta_item ret;
	int has_ret;
};

struct ta_rule {
	char *pattern;  /* a glob, or with exact a name */
	int exact;
	int matched;    /* argspec_match found a function it names */
	void *re;       /* with argspecs' regex, the pattern compiled (regex_t) */
	struct ta_item item[TA_MAX_ITEMS];
	size_t n;
};

struct argspecs {
	struct ta_rule *rule;
	size_t nrules;
	/* Patterns are uftrace's regexes (a recording uftrace made, its
	 * pattern_type regex), not globs: a pattern with none of a regex's
	 * special characters names a function, else it matches any name it
	 * is found in (regexec, unanchored), as uftrace matches it. */
	int regex;
	/* Resolved: address (a patch site, or a library call's GOT slot) to
	 * its spec. */
	struct u64map index;
	struct ta_spec *spec;
	size_t nspec, capspec;
	/* Reading uftrace's recordings: items only its -a makes (struct by
	 * value /tSIZE:NAME, std::string /S, %stack+N) are taken, to be
	 * skipped or shown as uftrace shows them. */
	int lenient;
	/* -a (--auto-args): specs from each traced object's DWARF
	 * (trace_dwarf.c, reduced to what the agent records), bound by
	 * address; the .dbg text of each object, for the data directory. */
	int autoargs;
	struct ta_dbg { char *path, *text; } *dbg;
	size_t ndbg;
	/* Names of enum and struct types the items name (ta_item.name). */
	char **pool;
	size_t npool;
};

/* Add a rule: pattern (a glob as -F takes, or with exact_name a function's
 * name) and spec ("arg1/x,arg2/s,fparg1,retval/u32").  0, or -1 with why. */
int argspec_add(struct argspecs *a, const char *pattern, const char *spec, int exact_name,
		char *why, size_t whysz);
/* An -A or -R option's PATTERN@SPEC: 0, or -1 with why. */
int argspec_option(struct argspecs *a, const char *arg, char *why, size_t whysz);
void argspecs_free(struct argspecs *a);
/* The rules matching name, merged into *out: 1, 0 when none matches, -1
 * (why) when the merge holds more than TA_MAX_ITEMS items. */
int argspec_match(struct argspecs *a, const char *name, struct ta_spec *out, char *why,
		  size_t whysz);
/* The spec of a function -a gives auto (NULL: none) and -A/-R give
 * user, as uftrace merges them: -A's arguments replace auto's whole, -R's
 * return value auto's. */
void argspec_merge_auto(struct ta_spec *out, const struct ta_spec *autos, const struct ta_spec *user);
/* An -a spec (one .dbg A: or R: line's text after '@', "arg1,arg2/s"):
 * into *out's arguments (ret 0) or return value (ret 1).  0, or -1 with why. */
int argspec_parse_auto(struct argspecs *a, const char *text, int ret, struct ta_spec *out,
		       char *why, size_t whysz);
/* An enum's definition as a .dbg's E: line has it ("enum color
 * {BLUE=-3,RED=0,GREEN=5}"), so that its values show by name (an item
 * parsed later naming it): 0, or -1 (no memory). */
int argspec_enum(struct argspecs *a, const char *def);
/* Keep the .dbg text of the object at path (both copied): 0 or -1. */
int argspec_keep_dbg(struct argspecs *a, const char *path, const char *text);
/* Bind addr to spec s (a copy); 0 or -1 (no memory). */
int argspec_bind(struct argspecs *a, uint64_t addr, const struct ta_spec *s);
/* The spec bound to addr, or NULL (a NULL a: none). */
const struct ta_spec *argspec_find(const struct argspecs *a, uint64_t addr);
/* The agent's ITEMS for s ("i1,s2,f1,r"): its length, or -1 if cut. */
int ta_items_text(const struct ta_spec *s, char *buf, size_t size);
/* The rules' argument items (ret 0) or return values (ret 1) as a uftrace
 * info argspec/retspec line's text: "f@arg1/x,arg2;g*@arg1". */
void argspec_info(const struct argspecs *a, int ret, FILE *f);

/* ---- trace_argfmt.c ---- */

/* The values a ring's argument records carry (lib/trace/trace.h; the
 * agent's payload), checked against the function's spec; uftrace's layout
 * of them in a data directory; and their text as uftrace replay shows it.
 * No process I/O: tests/unit/test_trace_argspec.c runs it too. */
#define TA_PAYLOAD_MAX 1023u    /* the agent's bound on a record's payload */
#define TA_UFT_MAX 1024u        /* uftrace's layout of one payload, at most */
#define TA_STR_MAX 100u         /* the agent's XP_TRACE_ARG_STR_MAX */
#define TA_OPTIONS_MAX 4096u    /* the agent's XP_TRACE_ARG_OPTIONS_MAX */

/* Whether ev is an argument header or data record (a LOST record with
 * XP_TRACE_LABEL set and one of the argument labels).  A data record's ns
 * is its time field as the ring holds it (payload bytes 7..13 << 8), not
 * a time: whatever orders or measures by time skips data records. */
int ta_is_header(const struct tf_event *ev);
int ta_is_data(const struct tf_event *ev);
/* The payload of the argument records at ev[i] (a header and its data
 * records), into buf (TA_PAYLOAD_MAX bytes): the number of events they
 * take (*len bytes), or 0 if ev[i] is no header or its data records are
 * missing or cut (then skip the header and the data records after it). */
/* The time of the last of ev[0..n) that has one (not a data record), else dflt. */
uint64_t ta_last_ns(const struct tf_event *ev, size_t n, uint64_t dflt);
size_t ta_collect(const struct tf_event *ev, size_t n, size_t i, uint8_t *buf, size_t *len);
/* The events carrying payload p (len bytes, 1..TA_PAYLOAD_MAX) at time ns,
 * into out (1 + ceil(len / 14) of them): their count. */
size_t ta_encode(const uint8_t *p, size_t len, uint64_t ns, struct tf_event *out);
/* Payload p (len bytes) of s's arguments (ret 0) or return value (ret 1)
 * in uftrace's layout into out (TA_UFT_MAX bytes): its size (a multiple
 * of 8), or 0 if p is not what s's items make (a hostile or stale
 * payload). */
size_t ta_to_uftrace(const struct ta_spec *s, int ret, const uint8_t *p, size_t len, uint8_t *out);
/* The reverse, for a recording uftrace made: uftrace's layout u (at most
 * ulen bytes) into a payload p (TA_PAYLOAD_MAX): the payload's length,
 * *used the bytes of u it took (a multiple of 8); 0 if u is cut. */
size_t ta_from_uftrace(const struct ta_spec *s, int ret, const uint8_t *u, size_t ulen,
		       uint8_t *p, size_t *used);
/* The text uftrace replay shows for payload p: "1, \"abc\"" for the
 * arguments, "3" for the return value; printable ASCII only (bytes of a
 * string outside it as \xHH, a newline \n).  NULL when p does not fit s. */
const char *ta_format(const struct ta_spec *s, int ret, const uint8_t *p, size_t len,
		      char *buf, size_t size);
/* The same, a /p value inside a function sym names (sym(ctx, value), NULL:
 * none) shown as "&name", as uftrace replay shows a function pointer. */
const char *ta_format_sym(const struct ta_spec *s, int ret, const uint8_t *p, size_t len,
			  char *buf, size_t size, const char *(*sym)(void *, uint64_t), void *ctx);

/* ---- trace_format.c ---- */

/* Printing a function-graph trace: records already copied out of
 * the target, in, text out.  No process I/O here (names come through
 * callbacks), so tests/unit/test_trace_format.c runs it on synthetic
 * record streams. */

/* The two (TSC, CLOCK_MONOTONIC ns) pairs `trace buffers` prints. */
struct tf_clock {
	uint64_t start_tsc, start_ns, now_tsc, now_ns;
};

/* TSC to ns on the line through the two pairs, in 128-bit arithmetic (a
 * product of two 64-bit spans does not fit in 64 bits). */
uint64_t tf_tsc_ns(const struct tf_clock *c, uint64_t tsc);

/* One record, decoded. */
struct tf_event {
	uint64_t ns;
	uint64_t addr;  /* function, site record, or (LOST) the count */
	unsigned kind;  /* enum xp_trace_kind */
};

/* n items of size bytes, for arrays as long as a trace: huge pages where
 * the kernel gives them on request (trace_format.c).  free() frees it. */
void *tf_big_array(size_t n, size_t size);

/* Decode n raw records (time = TSC << 2 | kind). */
void tf_decode(const struct xp_trace_rec *rec, size_t n, const struct tf_clock *c,
	       struct tf_event *out);

struct tf_thread {
	int tid;
	const struct tf_event *ev;
	size_t n;
	uint64_t lost;  /* the buffer header's count: drops without a LOST record show at the end */
	const char *name; /* its name (comm), or NULL: shown beside the tid */
};

/* Names are looked up only while printing.  Both return a string that
 * stays valid until the formatter returns (the caller's cache). */
struct tf_names {
	const char *(*func)(void *ctx, uint64_t addr);
	const char *(*site)(void *ctx, uint64_t addr); /* "provider:name" */
	void *ctx;
	/* The function addr is in, by the names known (no fallback), or
	 * NULL: a /p value shown as &name as uftrace replay does.  NULL:
	 * /p always in hex. */
	const char *(*sym)(void *ctx, uint64_t addr);
};

struct tf_trace {
	const struct tf_thread *threads;
	size_t nthreads;
	int pid;             /* for chrome's "pid" */
	uint64_t origin_ns;  /* chrome timestamps count from here (the trace's start) */
	struct tf_names names;
	/* How argument records read (trace_argspec.c): NULL, none shown. */
	const struct argspecs *args;
};

/* What to show.  A closed call shorter than min_ns is left out with
 * everything it called; tid 0 means every thread.  include (-F),
 * exclude (-N) and max_depth (-D) are applied by tf_select. */
struct tf_filter {
	uint64_t min_ns;
	int tid;
	char **include, **exclude;  /* globs */
	size_t ninclude, nexclude;
	uint32_t max_depth;         /* 0: no limit */
};

/* trace_select.c: t with each thread's events cut to what f's -F, -N and
 * -D show (uftrace replay's meaning: -F a function and what it calls, its
 * callers left out; -N neither it nor what it calls; LOST records always
 * kept).  *owned (free with tf_select_free) holds the copies; with no
 * such filter *out is t itself and *owned NULL.  0 or -1 (no memory). */
int tf_filter_selects(const struct tf_filter *f);
/* trace_start.c: name matches one of the n globs (fnmatch(3)). */
int trace_glob_any(char *const *globs, size_t n, const char *name);
int tf_select(const struct tf_trace *t, const struct tf_filter *f, struct tf_trace *out,
	      struct tf_thread **owned);
void tf_select_free(struct tf_thread *owned, size_t n);

enum tf_sort { TF_SORT_CALLS, TF_SORT_TOTAL, TF_SORT_SELF, TF_SORT_AVG, TF_SORT_MAX };

/* Each returns 0, or -1 when out of memory or the stream failed. */
int tf_graph(FILE *out, const struct tf_trace *t, const struct tf_filter *f);
int tf_chrome(FILE *out, const struct tf_trace *t, const struct tf_filter *f);
int tf_folded(FILE *out, const struct tf_trace *t, const struct tf_filter *f);
int tf_stat(FILE *out, const struct tf_trace *t, const struct tf_filter *f, enum tf_sort by);

/* "calls", "total", ...: 0 and *by set, or -1. */
int tf_sort_parse(const char *s, enum tf_sort *by);

/* ---- trace_parse.c ---- */

/* What a target says about its trace, checked: the `trace buffers` and
 * `trace objects` replies and each buffer's header.  The target is anyone's
 * process and the tool may be root's, so every number is held to what a
 * real agent could have written before the tool sizes anything by it.  No
 * process I/O here: tests/fuzz/fuzz_tool_readers.c feeds it any bytes. */

/* More patch sites than any one object has (one per function; a browser
 * has about a million): `trace start -F` copies nsites * 8 bytes. */
#define TRACE_MAX_SITES (1u << 24)

/* Messages: one line, no newline; bad lines quoted sanitized and cut. */
#define TRACE_WHY_SIZE 256

/* One `buf` line of `trace buffers`. */
struct trace_buf_ref {
	int tid;
	uint64_t addr, cap;
};

struct trace_buffers {
	struct tf_clock clock;
	struct trace_buf_ref *bufs;
	size_t n;
};

/* Parse the reply: 0, or -1 with why (then nothing to free).  Every buf
 * has tid in 1..INT32_MAX, cap at most XP_TRACE_MAX_RECS, and a header
 * and cap records that overlap no other buffer's nor wrap; a clock line
 * comes first.  Lines of other kinds are skipped (a newer agent's). */
int trace_parse_buffers(const char *text, struct trace_buffers *b, char *why, size_t whysz);
void trace_buffers_free(struct trace_buffers *b);

struct trace_object {
	uint64_t base, table;
	size_t nsites; /* at most TRACE_MAX_SITES */
	char *path;    /* not empty */
};

/* Parse the `trace objects` reply: 0, or -1 with why. */
int trace_parse_objects(const char *text, struct trace_object **objs, size_t *n, char *why,
			size_t whysz);
void trace_objects_free(struct trace_object *objs, size_t n);

/* A buffer's header as copied from the target, listed with cap: 0 with
 * the records it holds, numbers [*first, *head) (at most cap of them; the
 * one numbered i is at rec[i % cap]), or -1 with why. */
int trace_buf_check(const struct xp_trace_buf *h, uint64_t cap, uint64_t *first,
		    uint64_t *head, char *why, size_t whysz);

/* Decode the head records after h into th (its events malloc'd): 0, or
 * -1 when out of memory. */
int trace_buf_decode(const struct xp_trace_buf *h, const struct xp_trace_rec *rec,
		     uint64_t head, const struct tf_clock *c, struct tf_thread *th);

/* The value of " key=" in a directory line: 0, or -1 when it is absent or
 * not a plain number (decimal or 0x hex; no sign or blank, which strtoull
 * would take, "-1" as 2^64 - 1; no overflow), ending the word. */
int trace_field(const char *line, const char *key, uint64_t *v);

/* ---- trace_mem.c ---- */

/* len bytes of the session's process image at addr: 0, or -1 with errno
 * (ESRCH: it exec'd or exited since the session began). */
int trace_vm_read(const struct session *s, uint64_t addr, void *buf, size_t len);
/* A NUL-terminated string of at most size - 1 bytes (cut there). */
int trace_vm_read_str(const struct session *s, uint64_t addr, char *buf, size_t size);
/* len bytes into the image at addr, in one piece (the tail of a ring the
 * tool drains): 0, or -1 with errno. */
int trace_vm_write(const struct session *s, uint64_t addr, const void *buf, size_t len);

/* ---- trace_names.c ---- */

/* Names for a trace's addresses, resolved only when printing: functions by
 * the symbol tables (libelf) of the target's objects, probe sites by their
 * struct xprobes_site records read from the target's memory. */

struct trace_names;

/* trace_libcall.c: each GOT slot through which the ELF file e calls
 * another object's function (what lib/trace/trace_plt.c hooks, and names
 * a library call by): add(ctx, the slot's address in the file, the
 * function's name). */
struct Elf;
void trace_libcall_slots(struct Elf *e, void (*add)(void *ctx, uint64_t vaddr, const char *name),
			 void *ctx);

struct trace_names *trace_names_new(const struct session *s);
void trace_names_free(struct trace_names *n);

/* An instrumented object as `trace objects` lists it: a function at
 * runtime address a is the symbol whose value + base == a.  -1 (and
 * ignored) for a path the process has not mapped. */
int trace_names_add_object(struct trace_names *n, uint64_t base, const char *path);
/* The file the process maps as path, open for reading, checked as names
 * are (open_mapped: never a FIFO, a link or another file the target
 * names); -1 when refused or not mapped. */
int trace_names_open(struct trace_names *n, const char *path);

/* Whether a file was refused (trace_names.c's open_mapped, or over a
 * limit of trace_bounds.c): it was reported, its addresses named as
 * numbers, and the command fails. */
int trace_names_refused(const struct trace_names *n);

/* Callbacks for struct tf_names (ctx: the struct trace_names).  A function
 * outside the listed objects is named through /proc/PID/maps; failing all,
 * 0xADDR.  The strings live as long as n and hold printable ASCII only (a
 * crafted symbol cannot drive the terminal); a kept request's name
 * (trace_names_add_label) is valid UTF-8 with no control. */
const char *trace_names_func(void *ctx, uint64_t addr);
const char *trace_names_site(void *ctx, uint64_t addr);
/* The function of the listed objects addr is in (its start or past it),
 * or NULL (tf_names' sym). */
const char *trace_names_sym(void *ctx, uint64_t addr);
/* A kept request's call (trace_labels.c), named text: its address
 * (TRACE_REQUEST_CALL | its number: no function's, and clear of
 * XP_TRACE_UNWOUND), or 0 (out of memory). */
#define TRACE_REQUEST_CALL (UINT64_C(1) << 62)
uint64_t trace_names_add_label(struct trace_names *n, const char *text);

/* ---- trace_labels.c ---- */

/* A kept request's label being read from its records. */
struct trace_label {
	char text[XP_TRACE_LABEL_MAX + 1];
	size_t len, have;
	uint64_t ns;   /* the request's begin */
	int open;      /* a header was read */
};
/* s as shown: valid UTF-8 other than controls kept (a key text is
 * that), every other byte '?' (the target wrote it). */
void trace_label_clean(char *s);
/* A header record (addr: its addr field) at ns. */
void trace_label_start(struct trace_label *l, uint64_t addr, uint64_t ns);
/* A text record: 1 when the text is whole (l->text, cleaned). */
int trace_label_text(struct trace_label *l, uint64_t addr);
/* th's label records made into calls (trace_read.c): each kept request
 * one call named by its label (in names), its calls nested under it.
 * 0, or -1 (out of memory). */
int trace_labels_apply(struct tf_thread *th, struct trace_names *names);

/* ---- trace_stream.c ---- */

/* Draining a live trace while the program runs: every thread's
 * ring is copied out as it fills and its tail moved on, so the agent's
 * buffers never fill while the tool keeps up, and what it cannot keep up
 * with is dropped in the target (never waited for), counted there, and
 * marked where it happened by a LOST record. */

/* Where drained records go: thread() once per thread, before its first
 * events (name: its comm, "" if gone), events() in each thread's order.
 * Each returns 0, or -1 after printing why (the recording then stops). */
struct trace_sink {
	int (*thread)(void *ctx, int tid, const char *name);
	int (*events)(void *ctx, int tid, const struct tf_event *ev, size_t n);
	void *ctx;
};

/* trace_minfilter.c: a sink passing on to next only the calls that
 * lasted min_ns or more (-t while recording), with the calls around them,
 * site hits and LOST records.  finish sends what is still open and says
 * how many calls were left out. */
struct trace_minfilter;
struct trace_minfilter *trace_minfilter_new(uint64_t min_ns, const struct trace_sink *next);
struct trace_sink trace_minfilter_sink(struct trace_minfilter *f);
int trace_minfilter_finish(struct trace_minfilter *f, uint64_t *dropped);
void trace_minfilter_free(struct trace_minfilter *f);

struct trace_stream_stats {
	uint64_t records;   /* drained and given to the sink */
	uint64_t lost;      /* dropped in the target, by the buffers' counts */
	unsigned threads;
	uint64_t objects_gen; /* moves when the target loads or unloads an object */
	uint64_t unbuffered;  /* dropped: threads the -B budget left without a ring */
	int stopped;          /* the agent says tracing is off (someone stopped it) */
	uint64_t left;        /* records a cut-short pass left in the rings */
	uint64_t refused;     /* buffers listed past the 65536 a recording drains */
};

/* Drain s's process into sink: each pass copies what every thread wrote
 * since the last.  A pass returns 0, 1 after a message, or -1 when the
 * process is gone; *busy when a ring was a quarter full or more (the
 * caller passes again at once). */
struct trace_stream;
struct trace_stream *trace_stream_new(struct session *s, const struct trace_sink *sink);
int trace_stream_pass(struct trace_stream *t, struct trace_stream_stats *st, int *busy);
/* Rings that fill rarely (only kept requests are written): ask the agent
 * for its buffers less often. */
void trace_stream_quiet(struct trace_stream *t);
/* After the last pass: the drops no LOST record has said yet (made after
 * a thread's last record) go to the sink as one LOST record each.  0 or 1. */
int trace_stream_finish(struct trace_stream *t);
/* Have passes end early, between two chunks of records or two rings, as
 * soon as cut(ctx) returns non-zero (a stop asked, a deadline passed):
 * what a pass leaves in a ring is counted (stats' left), and marked lost
 * by finish if no later pass takes it. */
void trace_stream_cut(struct trace_stream *t, int (*cut)(void *ctx), void *ctx);
/* The clock of the agent's last `trace buffers`; NULL before the first. */
const struct tf_clock *trace_stream_clock(const struct trace_stream *t);
void trace_stream_free(struct trace_stream *t);


/* ---- trace_read.c ---- */

/* Copying a trace out of the target: the directories the agent prints
 * (`trace buffers`, `trace objects`) and the buffers themselves, read with
 * process_vm_readv (the tool may ptrace the target: the attach rule). */

/* `trace objects`, checked (trace_parse.c): 0, or -1 with a message
 * printed. */
int trace_objects(struct session *s, struct trace_object **objs, size_t *n);
/* Records [first, end) of the ring of cap records at addr, into rec. */
int trace_read_ring(const struct session *s, uint64_t addr, uint64_t cap, uint64_t first, uint64_t end,
		    struct xp_trace_rec *rec);

/* Everything recorded, decoded, with names for its objects. */
struct trace_data {
	struct tf_clock clock;
	struct tf_thread *threads;
	size_t nthreads;
	struct trace_names *names;
};

/* Read the buffers of every thread (or of tid alone): 0, or -1 with a
 * message printed. */
int trace_read(struct session *s, int tid, struct trace_data *d);
/* Thread tid's name in name[size]: its comm now, or, ended, the one its
 * buffer's header h kept; sanitized (the target chose it); "" if neither. */
void trace_thread_name(pid_t pid, int tid, const struct xp_trace_buf *h, char *name, size_t size);
void trace_data_free(struct trace_data *d);

/* ---- trace_cmd.c ---- */

/* The tool's `trace` commands: start (with -F/-N resolved to
 * patch sites here, by name), cat and stat (the buffers read and printed
 * here); the others go to the agent as typed. */

/* A line of the shell or a one-shot command: -2 when it is not one of the
 * tool's own trace commands (then the shell sends it to the agent as it
 * is), else what shell_run_line returns (0 ok, 1 failed, -1 lost). */
int trace_command(struct session *s, const char *line);

enum trace_view { TRACE_GRAPH, TRACE_CHROME, TRACE_FOLDED };

/* Options of `trace start` and `xprobes trace`. */
struct trace_opts {
	char **include, **exclude; /* -F, -N globs */
	size_t ninclude, nexclude;
	/* -A, -R (NULL: none); trace_start binds the addresses it resolves. */
	struct argspecs *args;
	char agent_args[512];      /* -D, -T, -b as the agent takes them */
	/* -A/-R/-a (and --no-libcall) as given, for the agent to keep for
	 * later sessions (trace_argopts.c); args_long: they did not fit. */
	char args_text[TA_OPTIONS_MAX + 1];
	int args_long;
	uint64_t min_ns;           /* -t */
	int have_min;
	/* `xprobes trace` and `trace record`: where to; how to print. */
	const char *out;
	enum trace_view view;
	int view_given;            /* --format: -o names a file to print to */
	long long duration_ms;     /* trace record -d; 0: until stopped */
	struct trace_follow *follow; /* the run form records forks and execs too */
};

/* The forms of the options trace_parse_start reads. */
enum { TRACE_FORM_START, TRACE_FORM_RUN, TRACE_FORM_RECORD };

/* Parse words[0..n) (words[0] names the command, for messages) of form
 * TRACE_FORM_*; the run form stops at the first operand, the program of
 * `xprobes trace`.  Returns the index of the first operand, or -1 after a
 * message. */
int trace_parse_start(int n, char **words, int run_form, struct trace_opts *o);
void trace_opts_free(struct trace_opts *o);

/* Select the sites -F/-N name (all when none is given) and start.  Prints
 * the agent's answer (to say when it succeeded, else to stderr); 0, 1 or
 * -1 as trace_command. */
int trace_start(struct session *s, const struct trace_opts *o, FILE *say);
/* A session that did not start the trace: args (parsed from the start's
 * options) bound to the addresses the start bound them to, as
 * trace_start does (libcalls: the start traced library calls).  0, or 1
 * after a message naming who. */
int trace_args_resolve(struct session *s, struct argspecs *args, int libcalls, const char *who);

/* trace_argopts.c: the start's -A/-R/-a kept by the agent as text.
 * add: option opt (and its value, NULL: none) onto text (TA_OPTIONS_MAX
 * + 1 bytes), encoded; -1 (text unchanged) past the bound.  parse: the
 * specs text holds (*out NULL: none), 0, or -1 with why.  fetch: the
 * agent's text, parsed and resolved (*out NULL: none or an older agent),
 * 0, or 1 after a message naming who. */
int argopts_add(char *text, const char *opt, const char *value);
int argopts_parse(const char *text, struct argspecs **out, int *nolibcall, char *why,
		  size_t whysz);
int trace_args_fetch(struct session *s, const char *who, struct argspecs **out);

/* trace_seccomp.c: 0 if no seccomp filter of pid's threads refuses a
 * system call that tracing makes there (or --ignore-seccomp was given:
 * trace_ignore_seccomp), else 1 after a message saying which, before
 * anything in the target changed. */
extern int trace_ignore_seccomp;
int trace_seccomp_check(pid_t pid);

/* trace_memlimit.c: fit the rings that args (the agent's start options)
 * ask for into half the room below the memory limits of pid's cgroup,
 * rewriting -b and -B in args (of size cap) and saying so on stderr; 1
 * after a message when too little is left to start (cmd names the
 * command), else 0 (and args untouched when no limit holds). */
int trace_fit_memory(pid_t pid, char *args, size_t cap, const char *cmd);

/* `xprobes trace cat|stat -d DIR [options]`: argv[0] is "cat" or "stat".
 * 0, 1 on failure, 2 on a usage error. */
int trace_offline_main(int argc, char **argv);

/* Read everything recorded and print it in view v to out, arguments as
 * args says (NULL: none shown). */
int trace_print(struct session *s, FILE *out, enum trace_view v, const struct tf_filter *f,
		const struct argspecs *args);

/* ---- trace_recorder.c ---- */

/* Recording a live trace into a directory: `trace record -o
 * DIR` in a session, and `xprobes trace -o DIR -- PROG`.  Starts tracing
 * as the session's own (the agent stops it when the session ends, however
 * the tool ends), drains every thread's ring into DIR (a uftrace data
 * directory, trace_uftrace.c) while the program runs, and on SIGINT or
 * SIGTERM, at the deadline, or when the program exits, stops tracing and
 * keeps everything recorded so far. */

/* The run form's side of a recording (`xprobes trace -o DIR -- PROG`). */
struct rusage;
struct trace_run_ctl {
	int sock;             /* the handshake socket */
	int started;          /* out: the program was told tracing is on */
	int exited;           /* out: it said "exit" (or closed its end) */
	int stop_signal;      /* out: SIGINT or SIGTERM ended the recording, else 0 */
	int stop_by_terminal; /* out: the kernel sent it (a terminal's ^C or ^\):
			       * the program's process group got it too */
	int let_go;           /* out: following, it was let go at its end (or it
			       * exec'd, or went) while its children were recorded */
	/* Called once the recording is drained, before DIR is closed:
	 * answers the handshake and reaps the program if it has ended or
	 * ends soon.  1 with *status (a wait status) and *ru when it was
	 * reaped, else 0; its exit goes into DIR's info. */
	int (*finish)(struct trace_run_ctl *run, int *status, struct rusage *ru);
	void *ctx;
};

/* Record s's process into dir with o's start options until a signal,
 * o->duration_ms after tracing started (0: none) or, with run (the run
 * form; NULL for trace record), the program's "exit" line.  Returns 0 or
 * 1 after a message. */
int trace_record_dir(struct session *s, const struct trace_opts *o, const char *dir,
		     struct trace_run_ctl *run);

/* A uftrace data directory for s's process at dir (its executable, maps
 * and the symbols of its traced objects); *names (the caller frees it
 * after uft_close) names the sites hit.  NULL after a message. */
struct uft_writer;
struct trace_names;
struct uft_writer *trace_open_writer(struct session *s, const char *dir,
				     struct trace_names **names, const struct argspecs *args);

/* trace_snapshot_dir.c: `trace snapshot -o DIR`, every thread's buffer
 * (or tid's) as it is now into the uftrace data directory dir, argument
 * records as args reads them (NULL: left out); tracing goes on.  0, or 1
 * after a message. */
int trace_snapshot_dir(struct session *s, const char *dir, int tid, const struct argspecs *args);


/* ---- trace_uftrace.c ---- */

/* Function-graph recordings as uftrace data directories: a
 * writer fed while the trace streams, and a reader that turns such a
 * directory (ours, or one `uftrace record` wrote without arguments) back
 * into struct tf_thread arrays for tools/trace_format.c's views.  No
 * process I/O here: the caller reads the target and passes text, paths
 * and events; names of probe sites come through a callback.  What of
 * uftrace's format is met and what is not: the top of trace_uftrace.c. */

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
	/* -A/-R (NULL: none): info's argspec section, and how the argument
	 * records of each address are written.  Read while writing. */
	const struct argspecs *args;
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

/* The program's end, for info (uftrace's exit_status and usageinfo):
 * status as wait(2) gives it, ru its resource use. */
void uft_exit(struct uft_writer *w, int status, const struct rusage *ru);

/* Whether uft_open could take dir: 0 if it does not exist but its parent
 * does, or is an empty directory; -1 with errno and uft_error(NULL)
 * saying why.  Changes nothing (a program is started only after). */
int uft_dir_usable(const char *dir);

/* Following a program's life (trace_follow.c), each line at its own
 * time ns (CLOCK_MONOTONIC), never earlier than the records it covers (a
 * thread's TASK line at its first record if that is later):
 * uft_fork: process pid fork()ed by ppid (a FORK line, and its first
 *   thread, tid = pid, a TASK line), which inherited depth calls still
 *   open, the outermost nopen of them in open (outermost first);
 * uft_task: another thread tid of process pid (a TASK line);
 * uft_exec: process s->pid exec'd a new image (a SESS line with its own
 *   sid, map and symbols, at s->mono_ns; its thread starts again at
 *   depth 0).  0, or -1 with errno. */
int uft_fork(struct uft_writer *w, int pid, int ppid, uint64_t ns, const uint64_t *open,
	     size_t nopen, size_t depth);
int uft_task(struct uft_writer *w, int tid, int pid, uint64_t ns);
int uft_exec(struct uft_writer *w, const struct uft_session *s);

/* -a: the .dbg file of each object the session's argspecs hold (struct
 * argspecs' dbg: trace_start fills it), DIR/NAME.dbg, as uftrace's replay
 * reads them (uft_open writes those already there).  0, or -1 with errno. */
int uft_write_dbgs(struct uft_writer *w);

/* Records left out so far: calls deeper than uftrace's depth field
 * holds, sites without a name callback. */
uint64_t uft_skipped(const struct uft_writer *w);

/* Records left out by the writer's bounds (trace_uftrace.c): *deep, of
 * calls beyond a thread's stack (1024 frames, or the budget of all
 * stacks), each run of them marked by a LOST record; *limited, of threads
 * or probe sites past the 65536 of each a recording keeps. */
void uft_bounded(const struct uft_writer *w, uint64_t *deep, uint64_t *limited);

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
	const struct argspecs *args; /* info's -A/-R, how the argument records read; or NULL */
	struct uft_names *priv;
	char err[512];             /* why uft_load failed */
};

/* Read directory dir into r (zeroed first).  The directory is untrusted
 * input: sizes are bounded, offsets checked, every file opened without
 * following a symbolic link.  0, or -1 with errno and r->err set (r then
 * holds nothing to free).  Arguments and return values (-A/-R: info's
 * argspec section; -a: each object's .dbg too) become argument records
 * after their entry or exit, as a ring holds them; a record carrying data
 * no spec describes (an event's data) is refused. */
int uft_load(const char *dir, struct uft_recording *r);
void uft_free(struct uft_recording *r);

/* ---- trace_follow.c ---- */

/* Following the program's whole life in the run form: its fork()ed
 * children, daemons and exec'd programs, recorded into the same directory
 * (see the top of trace_follow.c). */
struct trace_follow;
/* Listen (a socket in a private directory under /tmp), and become a child
 * subreaper.  NULL after a message. */
struct trace_follow *trace_follow_new(void);
/* The socket: XPROBES_TRACE_FOLLOW for the program, --follow for starts. */
const char *trace_follow_path(const struct trace_follow *f);
/* Where followed processes go: w (their FORK, SESS and TASK lines), sink
 * (their records); root: the program's pid (its threads are the sink's
 * own); o and timeout_ms: how an exec'd image is started. */
void trace_follow_bind(struct trace_follow *f, int root, struct uft_writer *w,
		       const struct trace_sink *sink, const struct trace_opts *o, int timeout_ms);
/* Take new processes and rings, drain every ring (with clock clk; NULL:
 * not yet).  0, or 1 after a message.  *busy set when a ring was a
 * quarter full or more. */
int trace_follow_pass(struct trace_follow *f, const struct tf_clock *clk, int *busy);
/* Stop tracing in every followed process still running but the program
 * (the recording is ending: nobody would drain them). */
void trace_follow_stop_all(struct trace_follow *f);
/* A followed process, or a descendant of the tool, has not ended. */
int trace_follow_live(struct trace_follow *f);
/* After the last pass: drops not yet marked, as LOST records; *refused:
 * processes and rings left out (bounds, bad rings).  0 or 1. */
int trace_follow_finish(struct trace_follow *f, uint64_t *refused);
/* Adds the followed processes' records drained, threads, and records
 * dropped in their rings (full). */
void trace_follow_stats(const struct trace_follow *f, uint64_t *records, unsigned *threads,
			uint64_t *lost);
void trace_follow_free(struct trace_follow *f);
/* A line from the run form's socket (SO_PASSCRED set on it before the
 * program started), without its newline ("" at end of file); returns the
 * pid the kernel says sent it, 0 if none: the program said "ready" from
 * a process of its own (`sh -c PROG` forks one), which is what to trace. */
pid_t trace_follow_read_line(int fd, char *buf, size_t size);

/* ---- trace_run.c ---- */

/* `xprobes trace [options] -- PROG ARGS...`: argv[0] is "trace".  Returns
 * the program's exit status (128 + signal when killed), or the tool's
 * (1, 2 for usage) when the program succeeded and tracing did not. */
int trace_run_main(int argc, char **argv, int timeout_ms);

/* ---- shell.c ---- */

/* Run one command line (client-side commands included); prints the reply.
 * Returns 0 ok, 1 failed, -1 connection lost, 2 quit. */
int shell_run_line(struct session *s, const char *line);

/* Fold one shell_run_line result into an exit status; returns 0 when the
 * session should stop (quit, or the connection is gone). */
int shell_account(int rc, int *status);

/* Interactive loop with line editing, history and tab completion.
 * Returns the exit status. */
int shell_interactive(struct session *s);

/* ---- list.c ---- */

/* `xprobes list ...`: argv[0] is "list".  Returns the exit status. */
int list_main(int argc, char **argv);

/* How many XProbes sites and SDT probes the objects pid maps hold (its
 * notes, read as `xprobes list -p` does, nothing attached); -1 if they
 * cannot be read (after a message). */
long list_process_probes(pid_t pid);

#endif
