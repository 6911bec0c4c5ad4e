/* SPDX-License-Identifier: MIT */
/* The function-graph tracer: the agent's side.
 *
 * How a program is instrumented (pkg-config xprobes-trace):
 *   -fpatchable-function-entry=5 makes every function start with five
 *   bytes the compiler records in the section __patchable_function_entries
 *   (one 8-byte runtime address per function; relocated by ld.so).  clang
 *   emits one 5-byte NOP there (0f 1f 44 00 08); gcc emits five 1-byte
 *   NOPs (90 x5), which can never be patched while threads run (a thread
 *   can be parked between two of them).  So every instrumented object also
 *   links lib/static/trace_note.c (libxprobes_trace.a, pulled in by
 *   -Wl,-u,__xprobes_trace_anchor):
 *     - a note `xprobes` of type XP_NOTE_TRACE in .note.xprobes whose
 *       descriptor is two self-relative int32 offsets, to
 *       __start___patchable_function_entries and __stop_ (no dynamic
 *       relocation, like the sites' note, see docs/design.md);
 *     - a constructor of priority 101, which runs before any other code
 *       of the object can run (ld.so holds its lock while an object's
 *       constructors run; for the executable, before main, on the only
 *       thread), turning each 90 x5 into one 66 66 66 66 90, a NOP from
 *       every byte on (a uprobe runs the file's 0x90 and resumes at the
 *       second byte: trace_verify.c).
 *   From then on a patch site is exactly one 5-byte instruction: the NOP,
 *   or `call rel32` to a trampoline near the object (XP_TRACE_CALL).
 *
 * Switching (trace_patch.c): the text is never written in place.  Each
 * text segment holding sites to switch is copied into a fresh private
 * mapping of the same file and offset (trace_copy.c: written while no one
 * else sees it, then made executable), the sites switched in the copy,
 * and the copy put over the whole segment with mremap(MREMAP_FIXED): a
 * thread runs either the old page or the new one, never a mix, and meets
 * no int3, so its signal mask does not matter.
 *
 * Recording (trace_hook.S, trace_record.c): the entry hook saves every
 * argument register (rdi rsi rdx rcx r8 r9 rax r10 r11; C code compiled
 * with -mgeneral-regs-only never touches xmm or x87), records an entry,
 * pushes the caller's return address on the thread's shadow stack and
 * replaces it with the exit trampoline, which saves rax rdx xmm0 xmm1,
 * records the exit and jumps to the saved address.  Per-thread single
 * writer buffers of fixed 16-byte records; the thread's state is found
 * through one initial-exec TLS pointer (no __tls_get_addr, no malloc).
 *
 * Reading (tools/): the tool, which may ptrace the target (the attach
 * rule), copies the buffers itself with process_vm_readv from the
 * directory `trace buffers` prints, and resolves names with libelf.
 */
#ifndef XP_TRACE_H
#define XP_TRACE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"

#define XP_NOTE_TRACE 2          /* .note.xprobes type: the entries table */
#define XP_TRACE_SITE_LEN 5
#define XP_TRACE_NOP5 "\x0f\x1f\x44\x00\x00"
#define XP_TRACE_NOP5_GCC "\x66\x66\x66\x66\x90" /* the constructor's, for gcc's 90 x5 */
#define XP_TRACE_NOP_GCC 0xff
#define XP_TRACE_CALL 0xe8       /* call rel32, to the object's trampoline */

/* One record, 16 bytes.  time: TSC << 2 | kind. */
enum xp_trace_kind {
	XP_TRACE_ENTRY = 0, /* addr: the function (its patch site) */
	XP_TRACE_EXIT = 1,  /* addr: the same function */
	XP_TRACE_SITE = 2,  /* addr: the xprobes_site record of an XPROBES_SITE hit */
	XP_TRACE_LOST = 3,  /* addr: records dropped just before this one (buffer was full) */
};
/* A LOST record with this bit set in addr is a request's label (trace
 * start --requests, trace_record.c): bits 56-62 say which part; a header
 * (bits 0-55: the text's length, at most 49), then 7 text records (bits
 * 0-55: 7 bytes of text, the first in the low byte), both at the
 * request's begin; the request's records; an end record at its end. */
#define XP_TRACE_LABEL (UINT64_C(1) << 63)
#define XP_TRACE_LABEL_PART(a) (((a) >> 56) & 0x7f)
#define XP_TRACE_LABEL_BEGIN (UINT64_C(1) << 56)
#define XP_TRACE_LABEL_TEXT (UINT64_C(2) << 56)
#define XP_TRACE_LABEL_END (UINT64_C(3) << 56)
#define XP_TRACE_LABEL_MAX 49u

/* Arguments and return values (trace args; trace_args.c).  Right after
 * the ENTRY record of a function whose spec has argument items, and right
 * after the EXIT record of one with return items, when the entry was
 * recorded: a header, kind LOST, addr = LABEL | LABEL_ARGS | the payload's
 * length in bytes (bits 0-15), at the same time; then one data record for
 * every XP_TRACE_ARG_DATA_BYTES bytes of payload, kind LOST as well:
 * addr = LABEL | LABEL_ARGDATA | bytes 0-6 (byte 0 lowest), time =
 * bytes 7-13 << 8 | XP_TRACE_LOST (not a time).  A reader that meets data
 * records without their header (a flight recorder's oldest) skips them.
 * The payload holds the items in the spec's order: a word (integer,
 * floating point: the register's low 8 bytes) is 8 bytes little endian; a
 * string is a status byte, then for OK and CUT a length byte and that
 * many bytes (no NUL), for BAD the pointer's 8 bytes, for NULL nothing. */
#define XP_TRACE_LABEL_ARGS (UINT64_C(4) << 56)
#define XP_TRACE_LABEL_ARGDATA (UINT64_C(5) << 56)
#define XP_TRACE_ARG_DATA_BYTES 14u
#define XP_TRACE_ARG_ITEMS 8        /* items a function's spec has at most */
#define XP_TRACE_ARG_STR_MAX 100u   /* bytes of a string kept */
#define XP_TRACE_ARG_MAX_FUNCS 65536u
/* The most payload bytes an entry or exit carries. */
#define XP_TRACE_ARG_MAX_BYTES (XP_TRACE_ARG_ITEMS * (2 + XP_TRACE_ARG_STR_MAX))
enum { XP_TRACE_ARG_STR_OK = 0, XP_TRACE_ARG_STR_CUT = 1, XP_TRACE_ARG_STR_NULL = 2,
       XP_TRACE_ARG_STR_BAD = 3 };

struct xp_trace_rec {
	uint64_t time;
	uint64_t addr;
};
/* In an XP_TRACE_EXIT record's addr: the call did not return; longjmp or
 * an exception left it, and the agent found it gone at this record's
 * time (user addresses on x86-64 stay below 2^47, so no function has the
 * bit).  Readers show such a call as left without its exit. */
#define XP_TRACE_UNWOUND (UINT64_C(1) << 63)

/* A thread's buffer, as the tool reads it (process_vm_readv): this header
 * then cap records, a ring: record number i (counting from 0 since the
 * last clear) is at rec[i % cap].  The thread alone writes records and
 * head (stored with release after each record, so a reader never sees a
 * torn record below head).  A reader that drains the buffer while it
 * fills (`trace record`) writes tail, the records it has copied, with
 * process_vm_writev; nobody else writes it.
 *
 * Unless XP_TRACE_BUF_OVERWRITE, the writer never overwrites a record
 * the reader has not copied: with no room (head - tail would pass cap) it
 * drops the record and counts it (lost), and when room comes back it
 * writes an XP_TRACE_LOST record saying how many went, so the loss shows
 * where it happened.  With XP_TRACE_BUF_OVERWRITE (a flight recorder) it
 * always writes, and the buffer holds the newest cap records: a reader
 * copies [head - cap, head), then discards what head moved over meanwhile.
 * Version 1 buffers were the same with tail always 0. */
#define XP_TRACE_BUF_MAGIC 0x58505452u /* "XPTR" */
#define XP_TRACE_BUF_VERSION 2u
struct xp_trace_buf {
	uint32_t magic, version;    /* XP_TRACE_BUF_MAGIC, XP_TRACE_BUF_VERSION */
	int32_t tid;
	uint32_t flags;             /* XP_TRACE_BUF_* */
	uint64_t cap;               /* records */
	_Atomic uint64_t head;      /* records written */
	_Atomic uint64_t lost;      /* records dropped, in all */
	_Atomic uint64_t tail;      /* records a draining reader has copied */
	char comm[16];              /* the thread's name when it made the buffer */
	struct xp_trace_rec rec[];
};
#define XP_TRACE_BUF_EXITED 1u     /* its thread has ended */
#define XP_TRACE_BUF_OVERWRITE 2u  /* a flight recorder: the newest records kept */

#define XP_TRACE_BUF_SHARED 4u     /* a follower's ring (a memfd it holds): not in `trace buffers` */

/* Following a recording through fork() and exec (trace_follow.c): what a
 * process says on its connection to the follower's SOCK_SEQPACKET socket.
 *   "HELO" a process started tracing with --follow;
 *   "FORK" a fork()ed child of ppid, which inherited depth recorded calls
 *          still open (their exits will be in its rings), the outermost
 *          naddr of them (functions, outermost first) in addr;
 *   "RING" with a descriptor: a memfd holding one struct xp_trace_buf;
 *   "EXEC" (lib/static/trace_note.c) an executable started under a
 *          follower: it waits for any reply (or end of file) before main,
 *          while the follower starts tracing it.
 * The follower takes the sender's pid from the kernel (SO_PEERCRED), never
 * from the message. */
#define XP_FOLLOW_MAX_FRAMES 256
struct xp_follow_msg {
	char tag[4];
	int32_t ppid;
	uint64_t ns;                /* CLOCK_MONOTONIC when said (FORK: the fork) */
	uint32_t depth, naddr;
	uint64_t addr[];
};

/* ---- Agent internals shared by lib/trace_*.c ---- */

/* One instrumented object's patch sites (trace_sites.c). */
struct xp_trace_object {
	const char *path;
	uintptr_t base;             /* load bias */
	uintptr_t *sites;           /* runtime addresses, sorted */
	uint8_t *on;                /* per site: patched to a call */
	uint8_t *nop;               /* per site, its NOP: the disp8 of clang's nopl,
				     * or XP_TRACE_NOP_GCC for XP_TRACE_NOP5_GCC */
	size_t nsites;
	void *trampoline;           /* within rel32 reach of every site */
};

/* trace_sites.c: find the XP_NOTE_TRACE notes of every loaded object and
 * check each entry (inside an executable PT_LOAD of the same object, bytes
 * NOP5 or a call to our trampoline).  Refreshes the object list. */
int xp_trace_objects_refresh(void);
/* Something was loaded or unloaded since the last refresh. */
int xp_trace_objects_stale(void);
extern struct xp_trace_object **xp_trace_objects;
extern size_t xp_trace_nobjects;
/* Entries the last refresh found but will never patch: gcc's 90 x5 left
 * as it was (the object's constructor has not run, or could not write),
 * or bytes that are neither our NOP nor our call. */
extern size_t xp_trace_nunpatchable;
/* Of those, gcc's 90 x5 in objects built with plain
 * -fpatchable-function-entry (no libxprobes_trace.a to join them), and
 * the first such object's path: what start tells the user. */
extern size_t xp_trace_ngcc_plain;
extern char xp_trace_gcc_plain_path[256];
/* trace_plain.c: the __patchable_function_entries tables of an object
 * that has no XP_NOTE_TRACE note, from its file's section headers, once
 * the file's build id is the one the mapping carries: runtime [start,
 * stop) pairs, at most XP_TRACE_MAX_PLAIN; 0 when none (or the file is
 * not the mapping's, or has no build id). */
#define XP_TRACE_MAX_PLAIN 4
struct dl_phdr_info;
int xp_trace_plain_tables(const struct dl_phdr_info *info, const char *dlname, uintptr_t *start,
			  uintptr_t *stop);
/* Five bytes at b are a 5-byte NOP (nopl disp8(%rax,%rax,1), any disp8:
 * clang's; or XP_TRACE_NOP5_GCC, the constructor's). */
int xp_trace_site_is_nop(const uint8_t *b);
/* The NOP that site j of o goes back to when tracing stops, into b: the
 * one it had (a uprobe decodes the file's instruction, and gcc's file holds
 * 0x90 there: only XP_TRACE_NOP5_GCC is a NOP from every byte on). */
void xp_trace_site_nop(const struct xp_trace_object *o, size_t j, uint8_t *b);
/* Entries the last refresh left alone because another tool has, or had,
 * its hands on them (trace_verify.c classifies the bytes):
 *   break: an int3 on the NOP or on our call, or a call that is not ours
 *          (a uprobe, 6.18's optimised uprobes, a debugger's breakpoint);
 *   scar:  gcc's entry after a uprobe's removal, 90 66 66 66 90 (the kernel
 *          puts the file's 0x90 back): two instructions again, and a
 *          thread may be between them, so it is never switched. */
extern size_t xp_trace_nbreak, xp_trace_nscar;
/* What the bytes of an entry are (b: its 5 bytes; tramp: its object's
 * trampoline, or NULL). */
enum { XP_SITE_NOP, XP_SITE_CALL, XP_SITE_BREAK, XP_SITE_SCAR, XP_SITE_OTHER };
int xp_trace_site_state(const uint8_t *b, uintptr_t site, const void *tramp);
/* trace_verify.c: remember the sites switched on now (after xp_trace_patch_on), forget
 * them all (after a stop); and check them against the text after a
 * refresh: one line to out for each way they are not our call any more,
 * and how many are not. */
void xp_trace_verify_remember(void);
void xp_trace_verify_forget(void);
struct textbuf;
size_t xp_trace_verify(struct textbuf *out);
/* Keep the object mapped while its text is written (NULL: it is gone). */
void *xp_trace_object_pin(const struct xp_trace_object *o);
void xp_trace_object_unpin(void *token);

/* trace_patch.c: turn the sites in [addrs] (or all when naddrs == 0) into
 * calls, or every patched site back into NOPs.  0 or a negative errno
 * (-ENOSPC: it would pass vm.max_map_count); on failure every site is as
 * it was, but those a stop switched from a spare (their file deleted or
 * replaced), which stay stopped, their state bytes saying so. */
int xp_trace_patch_on(const uintptr_t *addrs, size_t naddrs);
int xp_trace_patch_off(void);
/* Why the last xp_trace_patch_* failed, for the user (static text). */
extern const char *xp_trace_patch_error;
/* trace_seccomp.c: a thread of this process under seccomp (its id, and
 * *mode 1 strict or 2 filter), 0 if none, -1 if the threads cannot be
 * listed. */
pid_t xp_trace_seccomp_thread(int *mode);
/* trace_tramp.c: a trampoline page for o (NULL: no free page within
 * 2 GiB of it), and its end when its object goes. */
void *xp_trace_tramp_new(const struct xp_trace_object *o);
void xp_trace_tramp_free(void *tramp);
/* What new trampolines jump to: xp_trace_entry_hook; tests put their own
 * hook here.  Runs of pages swapped so far, for tests. */
extern void (*xp_trace_hook_target)(void);
extern unsigned long xp_trace_swaps;

/* trace_follow.c: connect to a follower at path (and say HELO): every
 * ring made from then on is a memfd sent to it.  0 or a negative errno. */
int xp_trace_follow_connect(const char *path);
void xp_trace_follow_off(void);
int xp_trace_following(void);
/* A ring of len bytes, shared with the follower (sent); NULL when not
 * following, or it could not be sent. */
void *xp_trace_follow_map(size_t len);
/* In a fork()ed child: its own connection, saying FORK. */
void xp_trace_follow_forked(const uintptr_t *addr, uint32_t naddr, uint32_t depth);

/* trace_record.c */
struct xp_trace_config {
	uint32_t buf_kib;           /* per thread, -b */
	uint32_t max_depth;         /* -D, 0: none */
	int32_t *tids;              /* -T, NULL: every thread */
	size_t ntids;
	int overwrite;              /* --overwrite: keep the newest records */
	uint32_t budget_kib;        /* -B: all threads' buffers together, 0: no limit */
	int requests;               /* --requests: only between request begin and end */
};
#define XP_TRACE_MAX_TIDS 64     /* -T given at most this often */
#define XP_TRACE_MAX_KIB (1u << 22) /* -b at most 4 GiB per thread */
/* The most records a buffer holds (cap at -b XP_TRACE_MAX_KIB).  The tool
 * refuses a buffer that claims more: it sizes its copy by the target's
 * word, and a target is anyone's process. */
#define XP_TRACE_MAX_RECS ((uint64_t)XP_TRACE_MAX_KIB * 1024 / sizeof(struct xp_trace_rec))
/* 0, -EALREADY (on), -E2BIG (too many tids), -EINVAL (buffer size). */
int xp_trace_record_start(const struct xp_trace_config *c);
void xp_trace_record_stop(void);  /* entries stop; pending exits still recorded */
void xp_trace_record_clear(void); /* forget buffers of exited threads, empty the others */
int xp_trace_record_on(void);
/* fork() handler, child side (the agent's calls it first; idempotent). */
void xp_trace_record_after_fork_child(void);
/* Mark the buffers of threads that have ended (XP_TRACE_BUF_EXITED). */
void xp_trace_record_sweep(void);
/* Each buffer holding data since the last clear, with its thread's count
 * of calls not followed (shadow stack full). */
void xp_trace_record_each(void (*fn)(const struct xp_trace_buf *b, uint64_t overruns, void *arg),
			  void *arg);
/* CLOCK_MONOTONIC ns paired with the TSC at the last start, and now. */
void xp_trace_record_clock(uint64_t *start_tsc, uint64_t *start_ns, uint64_t *now_tsc,
			   uint64_t *now_ns);
/* Control thread, under the lock: fault in the next pages of each ring
 * still on its first pass, a little ahead of its writer.  How many ms
 * until it should be called again, or -1 when no ring needs it. */
int xp_trace_record_ahead(void);
/* Records dropped because the -B budget left their thread no buffer. */
uint64_t xp_trace_record_unbuffered(void);

/* Request-scoped recording (trace start --requests; trace_record.c, lent
 * to modules by trace_request.c).  begin: the calling thread records from
 * now (0), or -1 (not tracing with --requests, no room: counted lost).
 * end: it stops; with keep its records, framed by label records naming
 * it, reach the reader (1), else they are dropped (0).  cancel_all: every
 * open request is dropped at its thread's next traced call (a module
 * that would have ended it is gone). */
int xp_trace_request_begin(void);
int xp_trace_request_end(int keep, const char *label);
void xp_trace_request_cancel_all(void);
/* The calling thread is one of the agent's: it never records (called
 * first thing by every thread the agent starts). */
void xp_trace_thread_exclude(void);
/* Shadow stack frames per thread, for threads that make theirs later (tests). */
extern uint32_t xp_trace_shadow_frames;
/* Entry and exit, called from trace_hook.S. */
void xp_trace_enter(uintptr_t site_ret, uintptr_t *parent_slot);
uintptr_t xp_trace_exit(uintptr_t sp);
/* A library call through a GOT slot trace_plt.c hooked: func (the slot's
 * address) names it in the records.  XP_CALL_LAZY: the slot was not
 * resolved yet (the call goes through the loader, which writes the slot):
 * when the call returns or its frame is left, xp_trace_lazy_return(func)
 * runs on the calling thread.  XP_CALL_INSTANT: a function that returns
 * twice (setjmp, vfork), recorded as a node of no length, its return left
 * alone.  XP_CALL_OFF: not recorded. */
enum xp_call_kind { XP_CALL_HOOK = 0, XP_CALL_LAZY = 1, XP_CALL_INSTANT = 2, XP_CALL_OFF = 3 };
void xp_trace_enter_call(uintptr_t func, uintptr_t *parent_slot, enum xp_call_kind kind);
extern void (*xp_trace_lazy_return)(uintptr_t func);
/* The exit trampoline's address (trace_hook.S). */
void xp_trace_exit_tramp(void);
void xp_trace_entry_hook(void);
/* --requests on; this thread has a request open (read by trace_hook.S). */
extern uint8_t xp_trace_requests_only;
extern __thread uint8_t xp_trace_request_open;

/* trace_args.c: the spec of each function whose arguments or return
 * value are recorded, by the address its records name it with (patch
 * site, or a library call's GOT slot).  parse: "i1,s2,f1,r,rf,rs" (see
 * docs/design.md) into item bytes, -1 if malformed; set: add or replace
 * (tracing off), -ENOSPC past XP_TRACE_ARG_MAX_FUNCS; clear: forget all. */
struct xp_trace_argspec {
	uintptr_t func;
	uint8_t item[XP_TRACE_ARG_ITEMS];
	uint8_t ret_recs;           /* xp_trace_args_ret_recs, worked out by _set */
};
extern uint8_t xp_trace_args_on;   /* any spec set: the callers look */
int xp_trace_args_parse(const char *items, uint8_t out[XP_TRACE_ARG_ITEMS]);
int xp_trace_args_set(uintptr_t func, const uint8_t items[XP_TRACE_ARG_ITEMS]);
void xp_trace_args_clear(void);
/* At a successful start: the specs given since the last stop are used
 * (none: no lookups); at a stop: no more, and the next `trace args`
 * starts a new set. */
void xp_trace_args_arm(void);
void xp_trace_args_disarm(void);
size_t xp_trace_args_count(void);
/* The tool's own -A/-R/-a options for these specs, kept as opaque text
 * (at most XP_TRACE_ARG_OPTIONS_MAX bytes) for a later client that reads
 * the trace: `trace args --options TEXT`, `trace args show`.  Forgotten
 * with the specs (clear, or the first set after a start). */
#define XP_TRACE_ARG_OPTIONS_MAX 4096u
int xp_trace_args_set_options(const char *text);
const char *xp_trace_args_options(void);
void xp_trace_args_after_fork(void);
const struct xp_trace_argspec *xp_trace_args_find(uintptr_t func);
/* Records the return items of s need at most (header and data), 0: none
 * (s->ret_recs once in the table). */
unsigned xp_trace_args_ret_recs(const struct xp_trace_argspec *s);
/* Bytes after a payload that capture may write (zeros) and readers read. */
#define XP_TRACE_ARG_SLACK 16
/* The payload of s's argument items (ret 0: regs = where rdi was saved,
 * rsi at regs[-1] and so on; stack = the first stack argument) or return
 * items (ret 1: regs = saved rax, stack = saved xmm0) into out
 * (XP_TRACE_ARG_MAX_BYTES); its length. */
size_t xp_trace_args_capture(const struct xp_trace_argspec *s, int ret, const uintptr_t *regs,
			     const uintptr_t *stack, uint8_t *out);

/* trace_sitehits.c: give every known site the tracer's handler (on), or
 * take it away; 0 or a negative errno, every site as it was on failure. */
int xp_trace_site_hits(int on);
/* trace_commands.c: after the agent's rescan (a dlopen()), while tracing
 * every function, patch those of the objects loaded since the start.
 * xp_trace_after_dlopen (any thread, no lock) notes that a dlopen()
 * returned, its constructors run: the next rescan looks again even if
 * another refresh saw the object first, its entries not yet NOPs. */
struct textbuf;
void xp_trace_after_rescan(struct textbuf *log);
/* Control session id ended: if it started the trace with --session, stop
 * tracing (and say so in log). */
void xp_trace_session_end(unsigned long id, struct textbuf *log);
void xp_trace_after_dlopen(void);
void xp_trace_site_hit(const void *rec); /* trace_record.c: what the handlers call */

/* trace_plt.c: library calls.  xp_trace_plt_on points every GOT slot
 * through which a traced object calls another object's function (PLT
 * slots, and -fno-plt's GLOB_DAT slots of functions) at a stub that
 * records the call, leaving slots already hooked as they are (so it also
 * serves a library loaded while tracing); gots (sorted), if not NULL,
 * are the only slots to hook; xp_trace_plt_off puts back
 * every slot that still holds a stub, with the value the loader left (the
 * function, or for a lazy slot not resolved yet, the PLT's way to the
 * resolver).  Both under xp_agent.lock; 0 or a negative errno, and
 * xp_trace_plt_error says why.  xp_trace_plt_resync (after every command)
 * hooks again the lazy slots the loader resolved meanwhile. */
int xp_trace_plt_on(const uintptr_t *gots, size_t ngots);
int xp_trace_plt_off(void);
void xp_trace_plt_resync(void);
size_t xp_trace_plt_hooked(void);
extern const char *xp_trace_plt_error;

/* trace_commands.c: the agent's `trace ...` command (xp_agent.lock held). */
struct textbuf;
int xp_trace_command(char *args, struct textbuf *out);

#endif
