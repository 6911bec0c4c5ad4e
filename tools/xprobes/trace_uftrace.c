/* SPDX-License-Identifier: MIT */
/* Function-graph recordings as uftrace data directories.
 *
 * The format, as uftrace v0.13 writes and reads it (learned from its
 * documentation, `uftrace dump --debug` and `uftrace info` of its own
 * recordings, and by feeding it directories written here):
 *
 *   info         a 40-byte header: "Ftrace!\0", u32 version 4, u16 header
 *                size 40, u8 endian (1: little), u8 ELF class (2: 64-bit),
 *                u64 feature bits, u64 info bits, u16 max stack depth, 6
 *                bytes unused; then one text section per info bit, in bit
 *                order ("exename:PATH", "taskinfo:lines=2" and its lines...).
 *   task.txt     "SESS timestamp=S.NS pid=P sid=SID exename=\"PATH\"", then
 *                "TASK timestamp=S.NS tid=T pid=P" per thread and "DLOP
 *                timestamp=S.NS tid=T sid=SID base=HEX libname=\"PATH\"" per
 *                object loaded later.  A record older than its session's or
 *                its task's timestamp is read with no symbols and misnested,
 *                so those timestamps must not be later than the first record.
 *   sid-SID.map  the memory map: one line per object, /proc/PID/maps'
 *                layout, the object's lowest address to its end.  Without a
 *                [stack] line anywhere in it uftrace names nothing in the
 *                executable (tried), so one always ends it.
 *   NAME.sym     per object (NAME: the base name of its path): "# symbols:",
 *                "# path name:", "# build-id:" lines, then "%016x T name"
 *                sorted by address, relative to the object's lowest address
 *                (feature SYM_REL_ADDR); a symbol ends where the next
 *                begins, so "? __func_end" closes the last function.
 *   TID.dat      16-byte records: u64 CLOCK_MONOTONIC ns; u64 of type (bits
 *                0-1: entry, exit, lost, event), "more" (bit 2: argument
 *                data follows), magic 5 (bits 3-5), depth (bits 6-15) and the
 *                address (bits 16-63).  Depth is how uftrace nests: an exit
 *                must carry its entry's depth, and nothing else pairs them.
 *   events.txt   "EVENT: ID provider:name" for event records (ID >= 1000000
 *                for user events), read under feature EVENT.
 *   perf-cpuN.dat Linux perf records (perf_event_open(2)); uftrace takes a
 *                thread's name from PERF_RECORD_COMM ({pid, tid, comm},
 *                then sample id {pid, tid, time}), under feature PERF_EVENT.
 *
 * What this file meets:
 *   - entries and exits with their depth, as uftrace's own; a function's
 *     address is its entry (uftrace's own point 5 bytes or a call further
 *     in: both fall in the symbol), so replay, report, graph, tui, info,
 *     dump --chrome and --flame-graph name and nest every call;
 *   - threads (TASK lines) and their names (COMM records in perf-cpu0.dat:
 *     uftrace's info, report --task, graph --task and chrome show them);
 *   - lost records: uftrace's "LOST N records";
 *   - XProbes sites as user events (a "provider:name" comment in replay),
 *     given a name callback; without one they are left out (counted);
 *   - objects loaded later (uft_object): DLOP lines;
 *   - arguments and return values (-A/-R, trace_argspec.c): the record's
 *     more bit and the values in uftrace's layout after it
 *     (trace_argfmt.c), info's argspec section with the rules as given
 *     (pattern_type glob) and the ARGUMENT and RETVAL features; the
 *     reader reads them back by the same section (uftrace's own too:
 *     pattern_type regex), and refuses data no rule describes;
 *   - -a (trace_dwarf.c's specs, as the agent records them): each traced
 *     object's NAME.dbg, "auto-args:1" in info's argspec section and the
 *     AUTO_ARGS and DEBUG_INFO features; the reader takes the .dbg specs
 *     of such a recording by address (uftrace's own: by the function an
 *     address is in, and its argauto:/retauto: specs of library calls),
 *     a struct by value (uftrace's) skipped and shown as NAME{...}.
 * What it does not, and why:
 *   - kernel functions, sched in/out and other perf events: not recorded;
 *   - an exit whose entry is not in the recording (the call was entered
 *     before it began: under an earlier recording, which hooked its
 *     return) has no record of its own in uftrace's format, and an exit
 *     without its entry makes uftrace invent a duration: it is written as
 *     the call entered and left at the exit's time with a user event
 *     "xprobes:entry_not_recorded" between (uftrace replay: the comment
 *     inside a call of no time), which the reader turns back into the
 *     exit alone; the depth stays at 0, never below;
 *   - a call the agent marks unwound (XP_TRACE_UNWOUND: longjmp or an
 *     exception left it) closes with an exit record all the same, since
 *     uftrace pairs by depth and nests by counting (without one, all
 *     that follows shows nested inside it), preceded by a user event
 *     "xprobes:exit_not_recorded": uftrace replay shows that comment in
 *     the call, and the reader makes the exit unwound again; an unmarked
 *     exit that unwinds calls left without theirs first closes each of
 *     them at its time; uftrace's own recordings of a longjmp have no
 *     exit for the calls it left: the reader finds them gone by the
 *     depth of the next record;
 *   - a library call of longjmp has no exit record, and of the calls it
 *     left only the outermost has its exit (is_jump);
 *   - calls deeper than 1023 (the depth field's 10 bits; uftrace's own
 *     --max-stack is 1024) are left out, their callers' times kept, and
 *     marked by a LOST record of their records' count (STACK_FRAMES);
 *   - a later exec (uft_exec, when the run form follows one) is a SESS
 *     line of its own, a fork()ed child (uft_fork) a FORK line, as
 *     uftrace writes them; a child starts at the depth of the calls it
 *     inherited open, but without uftrace's record of the fork() call
 *     itself, so `uftrace replay` indents its first calls from 0;
 *   - the info sections about the machine (cpuinfo, meminfo, osinfo,
 *     loadinfo) are not written: the writer knows the recording, not the
 *     machine; the program's exit status and resource use (exit_status,
 *     usageinfo) are, when the caller knows them (uft_exit: the run form,
 *     which reaps the program);
 *   - the map lists the given objects, then the other files the maps text
 *     shows with executable mappings (no .sym for those: uftrace reads the
 *     file itself if it still exists); data symbols and PLT entries are
 *     not in the .sym files (a library call is recorded at its GOT slot,
 *     which is there, a 'P' symbol of 8 bytes); two objects with one
 *     base name share NAME.sym in uftrace's scheme, so only the first
 *     gets one;
 *   - paths and names are written with bytes outside printable ASCII, and
 *     quotes, as '?' (the files are line- and word-based text);
 *   - cmdline is the traced program's, not a `uftrace record` line;
 *   - `uftrace record -d DIR` moves an existing DIR to DIR.old; here a
 *     non-empty DIR is refused, or with overwrite emptied, and only if it
 *     is a uftrace data directory (nothing else is ever removed).
 */
#define _GNU_SOURCE
#include "xprobes.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xprobes/version.h>

#define UFT_MAGIC "Ftrace!"
#define UFT_VERSION 4
#define UFT_HDR_SIZE 40
#define UFT_REC_MAGIC 5u
#define UFT_MAX_DEPTH 1024 /* depths 0..1023: the field's 10 bits */
#define UFT_ADDR_MASK ((UINT64_C(1) << 48) - 1)
#define UFT_EVENT_USER 1000000u
/* The user event that marks an exit the agent did not see (a call left
 * by longjmp or an exception): uftrace replay shows it inside the call,
 * as a comment, before its closing line. */
#define UFT_UNWOUND_EVENT "xprobes:exit_not_recorded"
/* And an exit whose entry is not in the recording (the call was entered
 * before it began): the call entered and left at the exit's time with
 * the event between, which uftrace shows as the comment inside a call of
 * no time, and the reader as the exit alone. */
#define UFT_NOENTRY_EVENT "xprobes:entry_not_recorded"

enum { R_ENTRY = 0, R_EXIT = 1, R_LOST = 2, R_EVENT = 3 };

/* Feature bits (the header's u64 at 16). */
#define F_TASK_SESSION (1u << 1)
#define F_ARGUMENT (1u << 3)
#define F_RETVAL (1u << 4)
#define F_SYM_REL_ADDR (1u << 5)
#define F_MAX_STACK (1u << 6)
#define F_EVENT (1u << 7)
#define F_PERF_EVENT (1u << 8)
#define F_AUTO_ARGS (1u << 9)
#define F_DEBUG_INFO (1u << 10)

/* Info bits (the header's u64 at 24): each a text section, in bit order. */
enum { I_EXE_NAME = 0, I_BUILD_ID = 1, I_EXIT_STATUS = 2, I_CMDLINE = 3, I_TASKINFO = 7,
       I_USAGEINFO = 8, I_ARG_SPEC = 10, I_RECORD_DATE = 11, I_PATTERN_TYPE = 12, I_VERSION = 13 };

#define PERF_COMM 3 /* PERF_RECORD_COMM */

/* Bounds on what the reader takes from a directory. */
#define MAX_TEXT (16u << 20)    /* task.txt, a map, events.txt, info */
#define MAX_SYMFILE (256u << 20)
#define MAX_PERF (256u << 20)
#define MAX_RECORDS (UINT64_C(1) << 27) /* 2 GiB of .dat */
#define MAX_TASKS (1u << 20)
#define MAX_OBJECTS 65536u
#define MAX_PERF_FILES 4096

static __thread char last_error[512];

/* printable ASCII but for quotes: every path and name goes into
 * line- and word-based text. */
static void clean_word(char *s)
{
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e || *s == '"')
			*s = '?';
}

static char *clean_dup(const char *s)
{
	char *d = strdup(s ? s : "");
	if (d)
		clean_word(d);
	return d;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

static void ns_text(char buf[32], uint64_t ns)
{
	snprintf(buf, 32, "%" PRIu64 ".%09" PRIu64, ns / 1000000000u, ns % 1000000000u);
}

/* ---- ELF: an object's functions, extent and build id ------------------ */

struct esym {
	uint64_t value, size;
	uint32_t name; /* offset in the pool */
	int rank;      /* globals, weaks, locals; .symtab before .dynsym */
};

struct elfinfo {
	struct esym *syms;
	size_t n;
	char *pool;
	size_t plen;
	uint64_t first_vaddr; /* the first PT_LOAD's, page-aligned: the lowest mapping */
	uint64_t end_vaddr;   /* the end of the last PT_LOAD, page-rounded */
	char build_id[41];
};

static int pool_add(struct elfinfo *e, size_t *pcap, const char *s, uint32_t *off)
{
	size_t len = strlen(s) + 1;
	if (e->plen + len > TRACE_ELF_MAX_NAMES) /* and so below UINT32_MAX */
		return -1;
	if (e->plen + len > *pcap) {
		size_t ncap = 2 * (e->plen + len) + 4096;
		char *grown = realloc(e->pool, ncap);
		if (!grown)
			return -1;
		e->pool = grown;
		*pcap = ncap;
	}
	memcpy(e->pool + e->plen, s, len);
	clean_word(e->pool + e->plen);
	*off = (uint32_t)e->plen;
	e->plen += len;
	return 0;
}

static int esym_cmp(const void *a, const void *b)
{
	const struct esym *x = a, *y = b;
	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	return x->rank - y->rank;
}

static void elf_build_id(const struct trace_elf *te, struct elfinfo *out)
{
	Elf *elf = te->elf;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_NOTE && trace_elf_note_ok(te, &sh)) {
			Elf_Data *d = elf_getdata(scn, NULL);
			GElf_Nhdr nh;
			size_t off = 0, noff, doff;
			while (d && (off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0)
				if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
				    !memcmp((char *)d->d_buf + noff, "GNU", 4) && nh.n_descsz >= 1) {
					const unsigned char *id = (unsigned char *)d->d_buf + doff;
					size_t len = nh.n_descsz < 20 ? nh.n_descsz : 20;
					for (size_t i = 0; i < len; i++)
						snprintf(out->build_id + 2 * i, 3, "%02x", id[i]);
					return;
				}
		}
}

/* A library call's GOT slot (trace_libcall.c): a symbol of rank
 * RANK_SLOT, written as uftrace writes its PLT entries ('P'). */
#define RANK_SLOT 6
struct slot_adder {
	struct elfinfo *e;
	size_t *cap, *pcap;
};

static void add_slot(void *ctx, uint64_t vaddr, const char *name)
{
	struct slot_adder *a = ctx;
	if (a->e->n >= TRACE_ELF_MAX_SYMS) /* the target's file's word: bounded */
		return;
	if (a->e->n == *a->cap) {
		size_t ncap = *a->cap ? 2 * *a->cap : 512;
		struct esym *grown = realloc(a->e->syms, ncap * sizeof(*grown));
		if (!grown)
			return;
		a->e->syms = grown;
		*a->cap = ncap;
	}
	struct esym *s = &a->e->syms[a->e->n];
	*s = (struct esym){ vaddr, 8, 0, RANK_SLOT };
	if (pool_add(a->e, a->pcap, name, &s->name) == 0)
		a->e->n++;
}

/* What elf_read takes of the mapped file, under trace_elf_guard (a file
 * the target shrinks while it is read ends this, not the tool): 0, or -1
 * (bounded < 0 and why when over a limit). */
struct elf_scan {
	const struct trace_elf *te;
	struct elfinfo *out;
	char why[160];
	int bounded;
};

static int elf_scan(void *arg)
{
	struct elf_scan *c = arg;
	Elf *elf = c->te->elf;
	struct elfinfo *out = c->out;
	size_t cap = 0, pcap = 0, nph = 0;
	GElf_Phdr ph;
	int seen = 0;
	if (elf_getphdrnum(elf, &nph) == 0)
		for (size_t i = 0; i < nph; i++)
			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
				if (!seen++)
					out->first_vaddr = ph.p_vaddr & ~UINT64_C(0xfff);
				uint64_t end = (ph.p_vaddr + ph.p_memsz + 0xfff) & ~UINT64_C(0xfff);
				if (end > out->end_vaddr)
					out->end_vaddr = end;
			}
	elf_build_id(c->te, out);
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		if ((c->bounded = trace_elf_symtab_ok(c->te, &sh, c->why, sizeof(c->why))) != 0)
			return -1;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t count = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
		for (size_t i = 0; d && i < count; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_value ||
			    s.st_value < out->first_vaddr)
				continue;
			int type = GELF_ST_TYPE(s.st_info), bind = GELF_ST_BIND(s.st_info);
			const char *name = elf_strptr(elf, sh.sh_link, s.st_name);
			if ((type != STT_FUNC && type != STT_GNU_IFUNC) || !name || !*name)
				continue;
			if (out->n == cap) {
				size_t ncap = cap ? 2 * cap : 512;
				struct esym *grown = realloc(out->syms, ncap * sizeof(*grown));
				if (!grown)
					return -1;
				out->syms = grown;
				cap = ncap;
			}
			struct esym *e = &out->syms[out->n];
			e->value = s.st_value;
			e->size = s.st_size;
			e->rank = (bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 2 : 4) +
				  (sh.sh_type == SHT_DYNSYM);
			if (pool_add(out, &pcap, name, &e->name)) {
				if (out->plen + strlen(name) + 1 > TRACE_ELF_MAX_NAMES) {
					snprintf(c->why, sizeof(c->why), "more than %u bytes of names",
						 TRACE_ELF_MAX_NAMES);
					c->bounded = -1;
				}
				return -1;
			}
			out->n++;
		}
	}
	struct slot_adder a = { out, &cap, &pcap };
	trace_libcall_slots(elf, add_slot, &a);
	if (out->n)
		qsort(out->syms, out->n, sizeof(*out->syms), esym_cmp);
	return 0;
}

/* The functions of the ELF file at path: 0, or -1 (not readable, not a
 * regular file, not ELF, or over trace_bounds.c's limits or shrunk while
 * read: then said, naming shown). */
static int elf_read(const char *path, const char *shown, struct elfinfo *out)
{
	memset(out, 0, sizeof(*out));
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -1;
	}
	struct trace_elf te;
	struct elf_scan c = { .te = &te, .out = out };
	int rc = -1;
	c.bounded = trace_elf_begin(fd, &te, c.why, sizeof(c.why));
	if (te.elf && (rc = trace_elf_guard(elf_scan, &c)) == TRACE_ELF_SHRANK) {
		snprintf(c.why, sizeof(c.why), "the file shrank while it was read");
		c.bounded = -1;
	}
	trace_elf_end(&te);
	close(fd);
	if (c.bounded < 0)
		fprintf(stderr, "xprobes: trace record: not reading the symbols of %s: %s; its "
				"functions have no names in the recording\n", shown, c.why);
	return rc == 0 ? 0 : -1;
}

static void elf_free(struct elfinfo *e)
{
	free(e->syms);
	free(e->pool);
	memset(e, 0, sizeof(*e));
}

/* ---- the writer ------------------------------------------------------- */

struct uthread {
	int tid;
	uint64_t first_ns; /* its first record's time, once has_ns */
	uint64_t *stack; /* addresses of the open calls */
	size_t sp, cap;
	uint64_t over;   /* calls open beyond the stack: counted, not kept */
	uint64_t deep;   /* their records dropped since the last LOST mark */
	uint64_t last_ns;
	int has_ns;
	/* After a longjmp (is_jump): the calls it left are closed in turn
	 * from the innermost; only the outermost's exit is written, at the
	 * thread's next other record. */
	int jumped, jump_left;
	uint64_t jump_ns, jump_addr;
	size_t jump_depth;
	/* A kept request (trace start --requests): its label being read;
	 * once whole, the call named by it, open at depth req_sp (req_addr
	 * 0: none), or counted beyond the stack (req_over). */
	struct trace_label label;
	uint64_t req_addr;
	size_t req_sp;
	int req_over;
	/* An entry or exit of a function with an argument spec, held until
	 * its argument records come (pay: their payload so far, need bytes
	 * of it) or something else does; then written, with them if whole. */
	int held;
	uint64_t held_ns, held_addr;
	unsigned held_type;
	size_t held_depth;
	struct ta_spec held_spec;
	uint8_t *pay;
	size_t pay_need, pay_have;
};

struct site_id {
	uint64_t addr;
	uint32_t id;
};

/* What one target may make the writer hold.  A thread's stack keeps the
 * open calls uftrace can show (depths 0..1023, STACK_FRAMES); deeper
 * entries are only counted (over), and so are the exits that close them,
 * then marked by one LOST record where the calls were: memory and the
 * scan of an exit stay bounded whatever the target sends, and a real
 * recursion past 1023 reads as loss, not as silence.  All threads'
 * stacks together take at most STACK_BUDGET frames (64 MiB); a thread
 * that would pass it goes on as if deeper than its stack.  Threads and
 * probe sites past their limits are left out, their records counted. */
#define STACK_FRAMES UFT_MAX_DEPTH
#define STACK_BUDGET (UINT64_C(8) << 20)
#define MAX_THREADS 65536u
#define MAX_SITES 65536u

struct writer_bounds {
	uint64_t frames;    /* stack room allocated, all threads */
	uint64_t deep;      /* records of calls beyond a stack */
	uint64_t limited;   /* records of threads and sites past their limits */
	struct u64map site_index; /* site address -> its place in sites */
	struct u64map event_index; /* name_hash of an event's name -> its place */
	struct u64map thread_index; /* tid -> its place in th */
};

/* A task.txt line after SESS, in order: a thread, or an object loaded later. */
struct task_line {
	int tid;      /* TASK; 0: DLOP */
	char *path;   /* DLOP */
	uint64_t base;
	/* Following (uft_fork, uft_exec, uft_task): a TASK of another
	 * process (pid), a FORK (ppid), a SESS (sess: the rest of its line),
	 * each at its own time ns.  0 / NULL otherwise. */
	int pid, ppid;
	uint64_t ns;
	char *sess;
	int again;    /* its thread's TASK line again (an exec): listed once in info */
};

/* The GOT slots of longjmp and its kin (any name with "longjmp" in it,
 * as uftrace replay picks them) the writer keeps apart: a few an object. */
#define MAX_JUMP_SLOTS 64

struct uft_writer {
	int dirfd;
	char *dir;
	int pid;
	char *exe, *cmdline, *build_id;
	uint64_t mono_ns, real_ns;
	char sid[17];
	const char *(*site_name)(void *, uint64_t);
	void *site_ctx;
	struct uthread *th; /* in order of first sight (bounds.thread_index) */
	size_t nth, thcap;
	struct task_line *lines;
	size_t nlines;
	struct site_id *sites;
	size_t nsites;
	char **events; /* by id - UFT_EVENT_USER */
	size_t nevents;
	char **symfiles; /* base names given a NAME.sym */
	size_t nsymfiles;
	uint64_t jumps[MAX_JUMP_SLOTS]; /* library call slots of a longjmp: no exit record */
	size_t njumps;
	/* Kept requests' calls: REQ_OBJECT's symbols, one byte each from
	 * req_base (0: no room in the address space: events instead). */
	uint64_t req_base, req_next;
	int req_sym;
	uint64_t first_ns, last_ns;
	int any_ns;
	uint64_t skipped;
	struct writer_bounds bounds;
	int failed;
	char err[512];
	int have_exit, exit_status; /* uft_exit */
	struct rusage ru;
	const struct argspecs *args; /* -A/-R; NULL: none */
};

/* Why something failed, into err: -1 with errno set. */
static int errf(char *err, size_t len, int e, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int errf(char *err, size_t len, int e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	errno = e;
	return -1;
}

/* The writer's failures are sticky: every later call fails the same way. */
static int nonzero(int e)
{
	return e ? e : EIO;
}
#define fail(w, e, ...) ((w)->failed = nonzero(e), \
			 errf((w)->err, sizeof((w)->err), (w)->failed, __VA_ARGS__))
#define rfail(r, e, ...) errf((r)->err, sizeof((r)->err), (e), __VA_ARGS__)

/* All of buf to fd, named for the message. */
static int put(struct uft_writer *w, int fd, const char *name, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t k = write(fd, p, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return fail(w, k < 0 ? errno : ENOSPC, "writing %s/%s: %s", w->dir, name,
				    strerror(k < 0 ? errno : ENOSPC));
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* Append buf to DIR/name (created if absent, never through a symlink). */
static int append_file(struct uft_writer *w, const char *name, const void *buf, size_t len)
{
	if (w->failed) {
		errno = w->failed;
		return -1;
	}
	int fd = openat(w->dirfd, name, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(w, errno, "writing %s/%s: %s", w->dir, name, strerror(errno));
	int rc = put(w, fd, name, buf, len);
	if (close(fd) != 0 && !rc)
		rc = fail(w, errno, "writing %s/%s: %s", w->dir, name, strerror(errno));
	return rc;
}

/* Replace DIR/name with buf whole (a temporary file, then rename). */
static int replace_file(struct uft_writer *w, const char *name, const void *buf, size_t len)
{
	char tmp[300];
	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	unlinkat(w->dirfd, tmp, 0);
	int fd = openat(w->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(w, errno, "writing %s/%s: %s", w->dir, name, strerror(errno));
	int rc = put(w, fd, name, buf, len);
	if (close(fd) != 0 && !rc)
		rc = fail(w, errno, "writing %s/%s: %s", w->dir, name, strerror(errno));
	if (!rc && renameat(w->dirfd, tmp, w->dirfd, name) != 0)
		rc = fail(w, errno, "writing %s/%s: %s", w->dir, name, strerror(errno));
	if (rc)
		unlinkat(w->dirfd, tmp, 0);
	return rc;
}

/* A growing text, for the files written whole. */
struct text {
	char *s;
	size_t len;
	FILE *f;
};

static int text_open(struct text *t)
{
	t->s = NULL;
	t->len = 0;
	t->f = open_memstream(&t->s, &t->len);
	return t->f ? 0 : -1;
}

/* Close the stream; 0 if every print fitted in memory. */
static int text_close(struct text *t)
{
	int bad = ferror(t->f);
	if (fclose(t->f) != 0 || bad) {
		free(t->s);
		t->s = NULL;
		return -1;
	}
	return 0;
}

static int write_text(struct uft_writer *w, const char *name, struct text *t, int whole)
{
	if (text_close(t))
		return fail(w, ENOMEM, "writing %s/%s: %s", w->dir, name, strerror(ENOMEM));
	int rc = whole ? replace_file(w, name, t->s, t->len) : append_file(w, name, t->s, t->len);
	free(t->s);
	return rc;
}

static struct uthread *find_thread(struct uft_writer *w, int tid, size_t *at);

/* A task.txt line in uftrace's order: by time, a thread's TASK line at
 * its first record (as uftrace stamps a task when it starts), a line a
 * follow call added (FORK, SESS, a followed thread's TASK) at its own
 * time at the earliest, the rest at the session's start; ties by tid, an
 * object's DLOP line (and a FORK or SESS line) first. */
struct line_at {
	uint64_t ns;
	int tid;
	size_t i;
};

static int line_at_cmp(const void *a, const void *b)
{
	const struct line_at *x = a, *y = b;
	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* The session's time: its start, or its first record if earlier. */
static uint64_t sess_ns(const struct uft_writer *w)
{
	return w->any_ns && w->first_ns < w->mono_ns ? w->first_ns : w->mono_ns;
}

/* w's lines so ordered, each at its time (never before sess); NULL when
 * out of memory. */
static struct line_at *lines_in_order(struct uft_writer *w, uint64_t sess)
{
	struct line_at *v = calloc(w->nlines ? w->nlines : 1, sizeof(*v));
	for (size_t i = 0; v && i < w->nlines; i++) {
		size_t at;
		const struct task_line *l = &w->lines[i];
		struct uthread *th = l->tid ? find_thread(w, l->tid, &at) : NULL;
		uint64_t ns = l->ns > sess ? l->ns : sess;
		v[i] = (struct line_at){ th && th->has_ns && th->first_ns > ns ? th->first_ns : ns,
					 l->tid, i };
	}
	if (v)
		qsort(v, w->nlines, sizeof(*v), line_at_cmp);
	return v;
}

/* uftrace's usageinfo section: the program's rusage. */
static void usage_info(FILE *f, const struct rusage *ru)
{
	fprintf(f, "usageinfo:lines=6\nusageinfo:systime=%ld.%06ld\nusageinfo:usrtime=%ld.%06ld\n",
		(long)ru->ru_stime.tv_sec, (long)ru->ru_stime.tv_usec, (long)ru->ru_utime.tv_sec,
		(long)ru->ru_utime.tv_usec);
	fprintf(f, "usageinfo:ctxsw=%ld / %ld (voluntary / involuntary)\nusageinfo:maxrss=%ld\n",
		ru->ru_nvcsw, ru->ru_nivcsw, ru->ru_maxrss);
	fprintf(f, "usageinfo:pagefault=%ld / %ld (major / minor)\n"
		   "usageinfo:iops=%ld / %ld (read / write)\n",
		ru->ru_majflt, ru->ru_minflt, ru->ru_inblock, ru->ru_oublock);
}

/* uftrace's argspec section: the -A and -R rules (the items of each
 * kind), and its automatic specs' lines, empty (no -a). */
static void arg_spec_info(FILE *f, const struct argspecs *a)
{
	int nargs = 0, nret = 0;
	for (size_t i = 0; i < a->nrules; i++)
		for (size_t k = 0; k < a->rule[i].n; k++) {
			nret |= a->rule[i].item[k].kind == TA_RETVAL;
			nargs |= a->rule[i].item[k].kind != TA_RETVAL;
		}
	fprintf(f, "argspec:lines=%d\n", nargs + nret + 3 + !!a->autoargs);
	if (nargs) {
		fputs("argspec:", f);
		argspec_info(a, 0, f);
		fputc('\n', f);
	}
	if (nret) {
		fputs("retspec:", f);
		argspec_info(a, 1, f);
		fputc('\n', f);
	}
	/* -a: uftrace's replay reads each object's .dbg; its built-in specs
	 * of library calls are not ours (none recorded: none listed). */
	fputs("argauto:\nretauto:\nenumauto:\n", f);
	if (a->autoargs)
		fputs("auto-args:1\n", f);
}

int uft_write_dbgs(struct uft_writer *w)
{
	for (size_t i = 0; w->args && i < w->args->ndbg; i++) {
		const struct ta_dbg *d = &w->args->dbg[i];
		char name[NAME_MAX + 1];
		const char *base = base_name(d->path);
		if (!*base || snprintf(name, sizeof(name), "%s.dbg", base) >= (int)sizeof(name))
			continue;
		if (replace_file(w, name, d->text, strlen(d->text)))
			return -1;
	}
	return 0;
}

/* info: the header, then the sections of the bits set, in bit order. */
static int write_info(struct uft_writer *w)
{
	struct text t;
	if (text_open(&t))
		return fail(w, ENOMEM, "writing %s/info: %s", w->dir, strerror(ENOMEM));
	uint64_t info = (1u << I_EXE_NAME) | (1u << I_CMDLINE) | (1u << I_RECORD_DATE) |
			(1u << I_PATTERN_TYPE) | (1u << I_VERSION);
	if (w->build_id)
		info |= 1u << I_BUILD_ID;
	if (w->nth)
		info |= 1u << I_TASKINFO;
	if (w->have_exit)
		info |= 1u << I_EXIT_STATUS | 1u << I_USAGEINFO;
	if (w->args)
		info |= 1u << I_ARG_SPEC;
	uint64_t feat = F_TASK_SESSION | F_SYM_REL_ADDR | F_MAX_STACK | F_PERF_EVENT |
			(w->site_name || w->nevents ? F_EVENT : 0) |
			(w->args ? F_ARGUMENT | F_RETVAL : 0) |
			(w->args && w->args->autoargs ? F_AUTO_ARGS | F_DEBUG_INFO : 0);
	unsigned char hdr[UFT_HDR_SIZE] = UFT_MAGIC;
	uint32_t version = UFT_VERSION;
	uint16_t hsize = UFT_HDR_SIZE, max_stack = UFT_MAX_DEPTH;
	memcpy(hdr + 8, &version, 4);
	memcpy(hdr + 12, &hsize, 2);
	hdr[14] = 1; /* little endian */
	hdr[15] = 2; /* ELFCLASS64 */
	memcpy(hdr + 16, &feat, 8);
	memcpy(hdr + 24, &info, 8);
	memcpy(hdr + 32, &max_stack, 2);
	fwrite(hdr, 1, sizeof(hdr), t.f);
	fprintf(t.f, "exename:%s\n", w->exe);
	if (w->build_id)
		fprintf(t.f, "build_id:%s\n", w->build_id);
	if (w->have_exit)
		fprintf(t.f, "exit_status:%d\n", w->exit_status);
	fprintf(t.f, "cmdline:%s\n", w->cmdline);
	if (w->nth) {
		const char *sep = "";
		struct line_at *order = lines_in_order(w, sess_ns(w));
		if (!order) {
			text_close(&t);
			free(t.s);
			return fail(w, ENOMEM, "writing %s/info: %s", w->dir, strerror(ENOMEM));
		}
		fprintf(t.f, "taskinfo:lines=2\ntaskinfo:nr_tid=%zu\ntaskinfo:tids=", w->nth);
		for (size_t i = 0; i < w->nlines; i++) /* as task.txt lists them */
			if (order[i].tid && !w->lines[order[i].i].again) {
				fprintf(t.f, "%s%d", sep, order[i].tid);
				sep = ",";
			}
		fputc('\n', t.f);
		free(order);
	}
	if (w->have_exit)
		usage_info(t.f, &w->ru);
	if (w->args)
		arg_spec_info(t.f, w->args);
	time_t secs = (time_t)(w->real_ns / 1000000000u);
	struct tm tm;
	char date[64] = "?", elapsed[32];
	if (localtime_r(&secs, &tm))
		strftime(date, sizeof(date), "%a %b %e %H:%M:%S %Y", &tm);
	uint64_t from = w->any_ns && w->first_ns < w->mono_ns ? w->first_ns : w->mono_ns;
	ns_text(elapsed, w->any_ns && w->last_ns > from ? w->last_ns - from : 0);
	fprintf(t.f, "record_date:%s\nelapsed_time:%s sec\n", date, elapsed);
	/* The specs' patterns are globs, as -F takes them. */
	fprintf(t.f, "pattern_type:%s\nuftrace_version:xprobes %s\n", w->args ? "glob" : "regex",
		XPROBES_VERSION);
	return write_text(w, "info", &t, 1);
}

static void task_line(FILE *f, const struct uft_writer *w, const struct task_line *l,
		      const char *ts)
{
	if (l->sess)
		fprintf(f, "SESS timestamp=%s %s\n", ts, l->sess);
	else if (l->ppid)
		fprintf(f, "FORK timestamp=%s pid=%d ppid=%d\n", ts, l->pid, l->ppid);
	else if (l->tid)
		fprintf(f, "TASK timestamp=%s tid=%d pid=%d\n", ts, l->tid, l->pid ? l->pid : w->pid);
	else
		fprintf(f, "DLOP timestamp=%s tid=%d sid=%s base=%" PRIx64 " libname=\"%s\"\n", ts,
			w->pid, w->sid, l->base, l->path);
}

/* task.txt whole: the session at time ns, then its lines in order. */
static int write_tasks(struct uft_writer *w, uint64_t ns)
{
	struct text t;
	char ts[32];
	struct line_at *order = lines_in_order(w, ns);
	if (!order || text_open(&t)) {
		free(order);
		return fail(w, ENOMEM, "writing %s/task.txt: %s", w->dir, strerror(ENOMEM));
	}
	ns_text(ts, ns);
	fprintf(t.f, "SESS timestamp=%s pid=%d sid=%s exename=\"%s\"\n", ts, w->pid, w->sid, w->exe);
	for (size_t i = 0; i < w->nlines; i++) {
		ns_text(ts, order[i].ns);
		task_line(t.f, w, &w->lines[order[i].i], ts);
	}
	free(order);
	return write_text(w, "task.txt", &t, 1);
}

static int add_line_as(struct uft_writer *w, int tid, const char *path, uint64_t base,
		       const struct task_line *follow);

static int add_line(struct uft_writer *w, int tid, const char *path, uint64_t base)
{
	return add_line_as(w, tid, path, base, NULL);
}

/* follow: the line's other fields (pid, ppid, ns, sess: taken over). */
static int add_line_as(struct uft_writer *w, int tid, const char *path, uint64_t base,
		       const struct task_line *follow)
{
	struct task_line *grown = realloc(w->lines, (w->nlines + 1) * sizeof(*grown));
	if (!grown) {
		if (follow)
			free(follow->sess);
		return fail(w, ENOMEM, "%s", strerror(ENOMEM));
	}
	w->lines = grown;
	w->lines[w->nlines] = follow ? *follow : (struct task_line){ 0 };
	w->lines[w->nlines].tid = tid;
	w->lines[w->nlines].path = NULL;
	w->lines[w->nlines].base = base;
	if (path && !(w->lines[w->nlines].path = clean_dup(path)))
		return fail(w, ENOMEM, "%s", strerror(ENOMEM));
	w->nlines++;
	struct text t;
	char ts[32];
	if (text_open(&t))
		return fail(w, ENOMEM, "%s", strerror(ENOMEM));
	ns_text(ts, w->mono_ns);
	task_line(t.f, w, &w->lines[w->nlines - 1], ts);
	return write_text(w, "task.txt", &t, 0);
}

/* NAME.sym of an object, unless one of that base name was written. */
static int write_sym(struct uft_writer *w, const char *path, const struct elfinfo *e)
{
	const char *base = base_name(path);
	char name[NAME_MAX + 1];
	for (size_t i = 0; i < w->nsymfiles; i++)
		if (!strcmp(w->symfiles[i], base))
			return 0;
	if (!*base || snprintf(name, sizeof(name), "%s.sym", base) >= (int)sizeof(name))
		return 0;
	char **grown = realloc(w->symfiles, (w->nsymfiles + 1) * sizeof(*grown));
	if (!grown || !(grown[w->nsymfiles] = strdup(base)))
		return fail(w, ENOMEM, "%s", strerror(ENOMEM));
	w->symfiles = grown;
	w->nsymfiles++;
	struct text t;
	if (text_open(&t))
		return fail(w, ENOMEM, "%s", strerror(ENOMEM));
	size_t count = 0;
	for (size_t i = 0; i < e->n; i++)
		count += !i || e->syms[i].value != e->syms[i - 1].value;
	fprintf(t.f, "# symbols: %zu\n# path name: %s\n", count, path);
	if (e->build_id[0])
		fprintf(t.f, "# build-id: %s\n", e->build_id);
	uint64_t end = 0;
	size_t nfunc = 0;
	for (size_t i = 0; i < e->n; i++) {
		const struct esym *s = &e->syms[i];
		if (s->rank == RANK_SLOT)
			continue;
		nfunc++;
		if (s->value + s->size > end)
			end = s->value + s->size;
		if (i && s->value == e->syms[i - 1].value)
			continue; /* the best ranked of one address is first */
		char type = s->rank < 2 ? 'T' : s->rank < 4 ? 'w' : 't';
		fprintf(t.f, "%016" PRIx64 " %c %s\n", s->value - e->first_vaddr, type, e->pool + s->name);
	}
	if (nfunc)
		fprintf(t.f, "%016" PRIx64 " ? __func_end\n", end - e->first_vaddr);
	/* Library calls are recorded at their GOT slots (in the data, after
	 * the functions): one 'P' symbol of 8 bytes each, as uftrace marks
	 * its PLT entries, and an end after the last. */
	uint64_t slot_end = 0;
	for (size_t i = 0; i < e->n; i++) {
		const struct esym *s = &e->syms[i];
		if (s->rank != RANK_SLOT || s->value < end || s->value < slot_end)
			continue;
		fprintf(t.f, "%016" PRIx64 " P %s\n", s->value - e->first_vaddr, e->pool + s->name);
		slot_end = s->value + 8;
	}
	if (slot_end)
		fprintf(t.f, "%016" PRIx64 " ? __dynsym_end\n", slot_end - e->first_vaddr);
	return write_text(w, name, &t, 1);
}

/* One map line, /proc/PID/maps' layout. */
static void map_line(FILE *f, uint64_t start, uint64_t end, const char *perm, const char *path,
		     const char *build_id)
{
	int len = fprintf(f, "%" PRIx64 "-%" PRIx64 " %s 00000000 00:00 0", start, end, perm);
	fprintf(f, "%*s%s%s%s\n", len < 73 ? 73 - len : 1, "", path, build_id && *build_id ? " build-id:" : "",
		build_id ? build_id : "");
}

struct mapped {
	char *path;
	uint64_t start, end; /* lowest address, end of its last executable mapping */
	int exec;
};

/* The files of the maps text with their extents; the [stack] line. */
static int parse_maps(const char *maps, struct mapped **out, size_t *n, uint64_t stack[2])
{
	*out = NULL;
	*n = 0;
	stack[0] = stack[1] = 0;
	for (const char *p = maps; p && *p;) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		char *line = strndup(p, len);
		p += len + (eol != NULL);
		if (!line)
			return -1;
		unsigned long long start, end;
		char perm[8];
		int off = 0;
		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &start, &end, perm, &off) >= 3 && off) {
			char *file = line + off;
			file[strcspn(file, " \t")] = '\0';
			if (!strcmp(file, "[stack]")) {
				stack[0] = start;
				stack[1] = end;
			} else if (*file == '/') {
				size_t i = 0;
				while (i < *n && strcmp((*out)[i].path, file))
					i++;
				if (i == *n) {
					struct mapped *grown = realloc(*out, (*n + 1) * sizeof(*grown));
					if (grown)
						*out = grown;
					char *copy = grown ? clean_dup(file) : NULL;
					if (!copy) {
						free(line);
						return -1;
					}
					(*out)[(*n)++] = (struct mapped){ copy, start, end, 0 };
				}
				struct mapped *m = &(*out)[i];
				if (start < m->start)
					m->start = start;
				if (strchr(perm, 'x') && (!m->exec || end > m->end)) {
					m->end = end;
					m->exec = 1;
				}
			}
		}
		free(line);
	}
	return 0;
}

/* Kept requests (trace start --requests) are calls of an object that
 * is not mapped: REQ_OBJECT, in the map at an address nothing in the
 * process uses (the lowest free REQ_SPAN-aligned span from REQ_LOW up),
 * with a symbol per request appended to its NAME.sym as the request is
 * written, "? __request_end" after each so that each has its size
 * whenever the recording stops.  uftrace keeps a symbol's name to the
 * end of its line (a tab cuts it), so a label's spaces and UTF-8 stay. */
#define REQ_OBJECT "/xprobes-requests"
#define REQ_SYM "xprobes-requests.sym"
#define REQ_SPAN (UINT64_C(1) << 20)
#define REQ_LOW (UINT64_C(1) << 20)
#define REQ_HIGH (UINT64_C(1) << 47)

struct range {
	uint64_t start, end;
};

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* The start of a free span for REQ_OBJECT in the maps text, or 0. */
static uint64_t request_region(const char *maps)
{
	size_t n = 0, cap = 0;
	struct range *r = NULL;
	for (const char *p = maps; p && *p;) {
		unsigned long long start, end;
		if (sscanf(p, "%llx-%llx", &start, &end) == 2 && start < end) {
			if (n == cap) {
				size_t ncap = cap ? 2 * cap : 64;
				struct range *grown = realloc(r, ncap * sizeof(*grown));
				if (!grown) {
					free(r);
					return 0;
				}
				r = grown;
				cap = ncap;
			}
			r[n++] = (struct range){ start, end };
		}
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	if (n)
		qsort(r, n, sizeof(*r), cmp_range);
	uint64_t at = REQ_LOW;
	for (size_t i = 0; i < n && at < REQ_HIGH; i++) {
		if (r[i].end <= at)
			continue;
		if (r[i].start >= at + REQ_SPAN)
			break;
		at = r[i].end > REQ_HIGH ? REQ_HIGH : (r[i].end + REQ_SPAN - 1) & ~(REQ_SPAN - 1);
	}
	free(r);
	return at + REQ_SPAN <= REQ_HIGH ? at : 0;
}

/* sid-SID.map and the objects' NAME.sym files. */
/* The slots of o that call a longjmp, where the process has them (see
 * is_jump). */
static void note_jumps(struct uft_writer *w, const struct uft_object *o, const struct elfinfo *e)
{
	for (size_t i = 0; i < e->n && w->njumps < MAX_JUMP_SLOTS; i++)
		if (e->syms[i].rank == RANK_SLOT && strstr(e->pool + e->syms[i].name, "longjmp"))
			w->jumps[w->njumps++] = o->base + e->syms[i].value;
}

static int write_objects(struct uft_writer *w, const struct uft_session *s)
{
	struct mapped *maps = NULL;
	size_t nmaps = 0;
	uint64_t stack[2];
	struct text t;
	char name[64];
	int rc = 0;
	if (parse_maps(s->maps, &maps, &nmaps, stack) || text_open(&t)) {
		for (size_t i = 0; i < nmaps; i++)
			free(maps[i].path);
		free(maps);
		return fail(w, ENOMEM, "%s", strerror(ENOMEM));
	}
	for (size_t i = 0; i < s->nobjects && !rc; i++) {
		const struct uft_object *o = &s->objects[i];
		struct elfinfo e;
		char *path = clean_dup(o->path);
		if (!path) {
			rc = fail(w, ENOMEM, "%s", strerror(ENOMEM));
			break;
		}
		if (elf_read(o->file ? o->file : o->path, path, &e) == 0) {
			map_line(t.f, o->base + e.first_vaddr, o->base + e.end_vaddr, "r-xp", path,
				 e.build_id);
			note_jumps(w, o, &e);
			rc = write_sym(w, path, &e);
			if (!w->build_id && e.build_id[0] && !strcmp(path, w->exe) &&
			    !(w->build_id = strdup(e.build_id)))
				rc = fail(w, ENOMEM, "%s", strerror(ENOMEM));
			for (size_t j = 0; j < nmaps; j++) /* listed: not again below */
				if (!strcmp(maps[j].path, path))
					maps[j].exec = 0;
		}
		elf_free(&e);
		free(path);
	}
	for (size_t i = 0; i < nmaps; i++)
		if (maps[i].exec)
			map_line(t.f, maps[i].start, maps[i].end, "r-xp", maps[i].path, NULL);
	/* Each session's own span; the symbols count from its start. */
	w->req_base = request_region(s->maps);
	if (w->req_base)
		map_line(t.f, w->req_base, w->req_base + REQ_SPAN, "r-xp", REQ_OBJECT, NULL);
	if (!rc && w->req_base && !w->req_sym) {
		static const char head[] = "# symbols: 1\n# path name: " REQ_OBJECT "\n";
		rc = append_file(w, REQ_SYM, head, sizeof(head) - 1);
		w->req_sym = 1;
	}
	if (!stack[1]) { /* uftrace needs the line: the top of a 47-bit address space */
		stack[0] = UINT64_C(0x7ffffffde000);
		stack[1] = UINT64_C(0x7ffffffff000);
	}
	map_line(t.f, stack[0], stack[1], "rw-p", "[stack]", NULL);
	for (size_t i = 0; i < nmaps; i++)
		free(maps[i].path);
	free(maps);
	snprintf(name, sizeof(name), "sid-%s.map", w->sid);
	if (rc) {
		text_close(&t);
		free(t.s);
		return rc;
	}
	return write_text(w, name, &t, 1);
}

static int is_uftrace_dir(int dfd)
{
	char magic[8];
	int fd = openat(dfd, "info", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int yes = fd >= 0 && read(fd, magic, 8) == 8 && !memcmp(magic, UFT_MAGIC, 8);
	if (fd >= 0)
		close(fd);
	return yes;
}

/* DIR, created or taken empty; with overwrite, a uftrace data directory
 * emptied of its files (nothing else is ever removed).  Its fd, or -1. */
static int make_dir(struct uft_writer *w, int overwrite)
{
	if (mkdir(w->dir, 0755) != 0 && errno != EEXIST)
		return fail(w, errno, "creating %s: %s", w->dir, strerror(errno));
	int dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return fail(w, errno, "opening %s: %s", w->dir, strerror(errno));
	DIR *d = fdopendir(dup(dfd));
	if (!d) {
		close(dfd);
		return fail(w, errno, "reading %s: %s", w->dir, strerror(errno));
	}
	int uft = is_uftrace_dir(dfd), rc = 0;
	struct dirent *de;
	while (!rc && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (!overwrite || !uft)
			rc = fail(w, EEXIST, "%s exists and is not empty%s", w->dir,
				  overwrite ? " (and is no uftrace data directory)" : "");
		else if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode))
			rc = fail(w, EEXIST, "%s holds %s: not overwritten", w->dir, de->d_name);
		else if (unlinkat(dfd, de->d_name, 0) != 0)
			rc = fail(w, errno, "removing %s/%s: %s", w->dir, de->d_name, strerror(errno));
	}
	closedir(d);
	if (rc) {
		close(dfd);
		return -1;
	}
	return dfd;
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void writer_free(struct uft_writer *w)
{
	if (w->dirfd >= 0)
		close(w->dirfd);
	for (size_t i = 0; i < w->nth; i++) {
		free(w->th[i].stack);
		free(w->th[i].pay);
	}
	for (size_t i = 0; i < w->nlines; i++) {
		free(w->lines[i].path);
		free(w->lines[i].sess);
	}
	for (size_t i = 0; i < w->nevents; i++)
		free(w->events[i]);
	for (size_t i = 0; i < w->nsymfiles; i++)
		free(w->symfiles[i]);
	free(w->th);
	free(w->lines);
	free(w->sites);
	u64map_free(&w->bounds.site_index);
	u64map_free(&w->bounds.event_index);
	u64map_free(&w->bounds.thread_index);
	free(w->events);
	free(w->symfiles);
	free(w->dir);
	free(w->exe);
	free(w->cmdline);
	free(w->build_id);
	free(w);
}

struct uft_writer *uft_open(const char *dir, const struct uft_session *s)
{
	struct uft_writer *w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(last_error, sizeof(last_error), "%s", strerror(ENOMEM));
		errno = ENOMEM;
		return NULL;
	}
	w->dirfd = -1;
	w->dir = strdup(dir);
	w->exe = clean_dup(s->exe);
	w->cmdline = strdup(s->cmdline ? s->cmdline : "");
	if (!w->dir || !w->exe || !w->cmdline) {
		fail(w, ENOMEM, "%s", strerror(ENOMEM));
		goto bad;
	}
	for (char *c = w->cmdline; *c; c++) /* one line */
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	w->pid = s->pid;
	w->mono_ns = s->mono_ns;
	w->real_ns = s->real_ns;
	w->site_name = s->site_name;
	w->site_ctx = s->site_ctx;
	w->args = s->args && (s->args->nrules || s->args->autoargs) ? s->args : NULL;
	snprintf(w->sid, sizeof(w->sid), "%016" PRIx64,
		 mix64(mix64((uint64_t)s->pid) ^ s->mono_ns ^ s->real_ns));
	if ((w->dirfd = make_dir(w, s->overwrite)) < 0)
		goto bad;
	if (write_objects(w, s) || uft_write_dbgs(w) || write_tasks(w, w->mono_ns) || write_info(w) ||
	    append_file(w, "perf-cpu0.dat", "", 0) ||
	    (w->site_name && append_file(w, "events.txt", "", 0)))
		goto bad;
	return w;
bad:
	snprintf(last_error, sizeof(last_error), "%s", w->err);
	int err = w->failed ? w->failed : ENOMEM;
	writer_free(w);
	errno = err;
	return NULL;
}

void uft_exit(struct uft_writer *w, int status, const struct rusage *ru)
{
	w->have_exit = 1;
	w->exit_status = status;
	w->ru = *ru;
}

int uft_dir_usable(const char *dir)
{
	struct stat st;
	int e = 0;
	if (lstat(dir, &st) == 0) {
		DIR *d = S_ISDIR(st.st_mode) ? opendir(dir) : NULL;
		struct dirent *de;
		e = d ? 0 : S_ISDIR(st.st_mode) ? errno : ENOTDIR;
		while (d && !e && (de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				e = ENOTEMPTY;
		if (d)
			closedir(d);
		if (e == ENOTEMPTY)
			return errf(last_error, sizeof(last_error), EEXIST,
				    "%s exists and is not empty", dir);
	} else if (errno == ENOENT) { /* its parent must be there */
		char *copy = strdup(dir), *slash = copy ? strrchr(copy, '/') : NULL;
		if (slash)
			slash[slash == copy] = '\0'; /* "/x": the parent is "/" */
		if (!copy)
			e = ENOMEM;
		else if (stat(slash ? copy : ".", &st) != 0)
			e = errno;
		else if (!S_ISDIR(st.st_mode))
			e = ENOTDIR;
		free(copy);
	} else {
		e = errno;
	}
	if (e)
		return errf(last_error, sizeof(last_error), e, "cannot create %s: %s", dir,
			    strerror(e));
	return 0;
}

const char *uft_error(const struct uft_writer *w)
{
	return w ? w->err : last_error;
}

static struct uthread *find_thread(struct uft_writer *w, int tid, size_t *at);

uint64_t uft_skipped(const struct uft_writer *w)
{
	return w->skipped;
}

void uft_bounded(const struct uft_writer *w, uint64_t *deep, uint64_t *limited)
{
	*deep = w->bounds.deep;
	*limited = w->bounds.limited;
}

/* Whether thread tid is one too many: its records are then counted. */
static int thread_refused(struct uft_writer *w, int tid, size_t n)
{
	size_t at;
	if (w->nth < MAX_THREADS || find_thread(w, tid, &at))
		return 0;
	w->bounds.limited += n;
	return 1;
}

/* Thread tid, or NULL and *at where it would go (through an index: a
 * sorted array took a memmove per new thread). */
static struct uthread *find_thread(struct uft_writer *w, int tid, size_t *at)
{
	uint32_t i;
	*at = w->nth;
	if (u64map_get(&w->bounds.thread_index, (uint64_t)(uint32_t)tid, &i) != 0)
		return NULL;
	return &w->th[i];
}

/* A PERF_RECORD_COMM for tid at ns. */
static int write_comm(struct uft_writer *w, int tid, const char *name, uint64_t ns)
{
	unsigned char rec[8 + 8 + 64 + 16] = { 0 };
	char comm[64];
	snprintf(comm, sizeof(comm), "%s", name);
	clean_word(comm);
	size_t clen = (strlen(comm) + 1 + 7) & ~(size_t)7;
	uint32_t type = PERF_COMM, pid = (uint32_t)w->pid, t = (uint32_t)tid;
	uint16_t misc = 0, size = (uint16_t)(8 + 8 + clen + 16);
	memcpy(rec, &type, 4);
	memcpy(rec + 4, &misc, 2);
	memcpy(rec + 6, &size, 2);
	memcpy(rec + 8, &pid, 4);
	memcpy(rec + 12, &t, 4);
	memcpy(rec + 16, comm, strlen(comm));
	memcpy(rec + 16 + clen, &pid, 4);
	memcpy(rec + 20 + clen, &t, 4);
	memcpy(rec + 24 + clen, &ns, 8);
	return append_file(w, "perf-cpu0.dat", rec, size);
}

static struct uthread *add_thread_as(struct uft_writer *w, int tid,
				     const struct task_line *follow);

static struct uthread *add_thread(struct uft_writer *w, int tid)
{
	return add_thread_as(w, tid, NULL);
}

/* follow: its TASK line's pid and time (uft_task, uft_fork). */
static struct uthread *add_thread_as(struct uft_writer *w, int tid,
				     const struct task_line *follow)
{
	size_t at;
	struct uthread *th = find_thread(w, tid, &at);
	char name[32];
	if (th)
		return th;
	if (tid <= 0) {
		fail(w, EINVAL, "thread id %d", tid);
		return NULL;
	}
	if (w->nth == w->thcap) {
		size_t ncap = w->thcap ? 2 * w->thcap : 16;
		struct uthread *grown = realloc(w->th, ncap * sizeof(*grown));
		if (!grown) {
			fail(w, ENOMEM, "%s", strerror(ENOMEM));
			return NULL;
		}
		w->th = grown;
		w->thcap = ncap;
	}
	snprintf(name, sizeof(name), "%d.dat", tid);
	int fd = openat(w->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || close(fd) != 0) {
		fail(w, errno, "writing %s/%s: %s", w->dir, name, strerror(errno));
		return NULL;
	}
	if (u64map_put(&w->bounds.thread_index, (uint64_t)(uint32_t)tid, (uint32_t)at)) {
		fail(w, ENOMEM, "%s", strerror(ENOMEM));
		return NULL;
	}
	w->th[at] = (struct uthread){ .tid = tid };
	w->nth++;
	if (add_line_as(w, tid, NULL, 0, follow))
		return NULL;
	return &w->th[at];
}

int uft_thread(struct uft_writer *w, int tid, const char *name)
{
	if (w->failed) {
		errno = w->failed;
		return -1;
	}
	if (thread_refused(w, tid, 0))
		return 0;
	struct uthread *th = add_thread(w, tid);
	if (!th)
		return -1;
	if (name && write_comm(w, tid, name, th->has_ns ? th->last_ns : w->mono_ns))
		return -1;
	return 0;
}

int uft_object(struct uft_writer *w, const struct uft_object *o)
{
	if (w->failed) {
		errno = w->failed;
		return -1;
	}
	struct elfinfo e;
	char *path = clean_dup(o->path);
	if (!path)
		return fail(w, ENOMEM, "%s", strerror(ENOMEM));
	int rc = 0;
	if (elf_read(o->file ? o->file : o->path, path, &e) == 0) {
		note_jumps(w, o, &e);
		rc = write_sym(w, path, &e);
		if (!rc)
			rc = add_line(w, 0, path, o->base + e.first_vaddr);
	}
	elf_free(&e);
	free(path);
	return rc;
}

/* The names the target gives its sites are its own: found through an
 * index of a hash seeded per recording, not by comparing each. */
static uint64_t name_hash(const struct uft_writer *w, const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull ^ w->mono_ns ^ w->real_ns;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return mix64(h);
}

/* The place of event name in events, or nevents if it is new. */
static size_t event_of(const struct uft_writer *w, const char *name, uint64_t hash)
{
	uint32_t at;
	size_t k = 0;
	if (u64map_get(&w->bounds.event_index, hash, &at) != 0)
		return w->nevents;
	if (!strcmp(w->events[at], name))
		return at;
	while (k < w->nevents && strcmp(w->events[k], name)) /* another of that hash */
		k++;
	return k;
}

/* The event id of name, its events.txt line written on first sight; 0:
 * not to be written. */
static uint32_t event_id(struct uft_writer *w, const char *name)
{
	uint64_t hash = name_hash(w, name);
	size_t k = event_of(w, name, hash);
	if (k == w->nevents && k >= 65536)
		return 0;
	if (k == w->nevents) {
		char **ev = realloc(w->events, (w->nevents + 1) * sizeof(*ev)), line[300];
		if (!ev || !(ev[k] = strdup(name)))
			return fail(w, ENOMEM, "%s", strerror(ENOMEM)), 0;
		w->events = ev;
		w->nevents++;
		uint32_t at;
		if (u64map_get(&w->bounds.event_index, hash, &at) &&
		    u64map_put(&w->bounds.event_index, hash, (uint32_t)k))
			return fail(w, ENOMEM, "%s", strerror(ENOMEM)), 0;
		int len = snprintf(line, sizeof(line), "EVENT: %u %s\n", UFT_EVENT_USER + (unsigned)k,
				   name);
		if (append_file(w, "events.txt", line, (size_t)len))
			return 0;
	}
	return UFT_EVENT_USER + (uint32_t)k;
}

/* The event id of the site at addr, allocated on first sight; 0: not to
 * be written. */
static uint32_t site_event(struct uft_writer *w, uint64_t addr)
{
	uint32_t at;
	if (u64map_get(&w->bounds.site_index, addr, &at) == 0)
		return w->sites[at].id;
	if (w->nsites >= MAX_SITES) {
		w->bounds.limited++;
		return 0;
	}
	const char *got = w->site_name(w->site_ctx, addr);
	char name[256];
	snprintf(name, sizeof(name), "%s%s", got && strchr(got, ':') ? "" : "xprobes:",
		 got && *got ? got : "?");
	clean_word(name);
	struct site_id *grown = realloc(w->sites, (w->nsites + 1) * sizeof(*grown));
	if (!grown)
		return fail(w, ENOMEM, "%s", strerror(ENOMEM)), 0;
	w->sites = grown;
	uint32_t id = event_id(w, name);
	if (!id)
		return 0;
	if (u64map_put(&w->bounds.site_index, addr, (uint32_t)w->nsites))
		return fail(w, ENOMEM, "%s", strerror(ENOMEM)), 0;
	w->sites[w->nsites++] = (struct site_id){ addr, id };
	return id;
}

/* Records of one uft_append, written in chunks. */
struct recbuf {
	uint64_t v[2 * 512];
	size_t n;
	int fd;
	const char *name;
};

/* A record with nmore bytes of argument data (a multiple of 8) after it. */
static int emit_more(struct uft_writer *w, struct recbuf *b, uint64_t ns, unsigned type,
		     size_t depth, uint64_t addr, const uint8_t *more, size_t nmore)
{
	if (depth >= UFT_MAX_DEPTH) {
		w->skipped++;
		return 0;
	}
	size_t words = 2 + nmore / 8, cap = sizeof(b->v) / sizeof(b->v[0]);
	if (2 * b->n + words > cap) {
		if (put(w, b->fd, b->name, b->v, b->n * 16))
			return -1;
		b->n = 0;
	}
	/* b->n counts 16-byte units: the data is a multiple of 8, padded to 16
	 * with a record of its own only in the count, so the data is written
	 * from the words. */
	uint64_t *v = b->v + 2 * b->n;
	v[0] = ns;
	v[1] = type | 4u | UFT_REC_MAGIC << 3 | (uint64_t)depth << 6 | (addr & UFT_ADDR_MASK) << 16;
	memcpy(v + 2, more, nmore);
	size_t len = 16 + nmore;
	if (len % 16) { /* an odd number of words: flushed now, as they are */
		int rc = put(w, b->fd, b->name, b->v, b->n * 16 + len);
		b->n = 0;
		return rc;
	}
	b->n += len / 16;
	return 0;
}

static int emit(struct uft_writer *w, struct recbuf *b, uint64_t ns, unsigned type, size_t depth,
		uint64_t addr)
{
	if (depth >= UFT_MAX_DEPTH && type != R_LOST) {
		w->skipped++;
		return 0;
	}
	if (depth >= UFT_MAX_DEPTH)
		depth = UFT_MAX_DEPTH - 1;
	if (addr > UFT_ADDR_MASK)
		addr = UFT_ADDR_MASK;
	b->v[2 * b->n] = ns;
	b->v[2 * b->n + 1] = type | UFT_REC_MAGIC << 3 | (uint64_t)depth << 6 | addr << 16;
	if (++b->n < sizeof(b->v) / sizeof(b->v[0]) / 2)
		return 0;
	b->n = 0;
	return put(w, b->fd, b->name, b->v, sizeof(b->v));
}

/* A record of a call beyond th's stack, dropped: counted. */
static void drop_deep(struct uft_writer *w, struct uthread *th)
{
	th->deep++;
	w->bounds.deep++;
}

/* The records dropped since the last mark, said by a LOST record. */
static int mark_deep(struct uft_writer *w, struct uthread *th, struct recbuf *b, uint64_t ns)
{
	uint64_t n = th->deep;
	th->deep = 0;
	return n ? emit(w, b, ns, R_LOST, th->sp, n) : 0;
}

/* A call of longjmp (a node of no length, the agent's XP_CALL_INSTANT)
 * has its entry written and not its exit: uftrace replay takes the record
 * after a longjmp's entry as where setjmp returned and nests by counting
 * from there, so an exit there, or one of each call it left, nested all
 * that followed too shallow (uftrace's own recordings have only setjmp's
 * second return).  The reader shows the calls left without their exits,
 * as in uftrace's. */
static int is_jump(const struct uft_writer *w, uint64_t addr)
{
	for (size_t i = 0; i < w->njumps; i++)
		if (w->jumps[i] == addr)
			return 1;
	return 0;
}

/* Before ev, the thread's first record after a longjmp that is not an
 * exit of a call it left: the outermost such exit, marked. */
static int after_jump(struct uft_writer *w, struct uthread *th, struct recbuf *b,
		      const struct tf_event *ev)
{
	if (ev->kind == XP_TRACE_EXIT && ev->addr & XP_TRACE_UNWOUND)
		return 0;
	th->jumped = 0;
	if (!th->jump_left)
		return 0;
	th->jump_left = 0;
	uint32_t mark = event_id(w, UFT_UNWOUND_EVENT);
	if (w->failed || emit(w, b, th->jump_ns, R_EVENT, 0, mark))
		return -1;
	return emit(w, b, th->jump_ns, R_EXIT, th->jump_depth, th->jump_addr);
}

/* 1: addr is on th's stack; 0: it went beyond (counted); -1: failed. */
static int push(struct uft_writer *w, struct uthread *th, uint64_t addr)
{
	size_t ncap = th->cap ? 2 * th->cap : 64;
	if (th->over || th->sp == STACK_FRAMES ||
	    (th->sp == th->cap && w->bounds.frames + (ncap - th->cap) > STACK_BUDGET)) {
		th->over++;
		drop_deep(w, th);
		return 0;
	}
	if (th->sp == th->cap) {
		uint64_t *grown = realloc(th->stack, ncap * sizeof(*grown));
		if (!grown)
			return fail(w, ENOMEM, "%s", strerror(ENOMEM));
		w->bounds.frames += ncap - th->cap;
		th->stack = grown;
		th->cap = ncap;
	}
	th->stack[th->sp++] = addr;
	return 1;
}

/* An exit of a call entered before the recording began, marked so. */
static int no_entry(struct uft_writer *w, struct uthread *th, struct recbuf *b, uint64_t ns,
		    uint64_t addr)
{
	uint32_t mark = event_id(w, UFT_NOENTRY_EVENT);
	if (w->failed)
		return -1;
	if (!mark || th->sp >= UFT_MAX_DEPTH) {
		w->skipped++;
		return 0;
	}
	return emit(w, b, ns, R_ENTRY, th->sp, addr) || emit(w, b, ns, R_EVENT, 0, mark) ||
	       emit(w, b, ns, R_EXIT, th->sp, addr);
}

/* A kept request's label records (trace start --requests, lib/trace/
 * trace.h, trace_labels.c): once its text is whole, a call named by it
 * at the request's begin (a symbol of REQ_OBJECT), which its end closes:
 * its calls are nested under it.  With no room for another symbol, an
 * event "request:TEXT" (spaces as '_', bytes past ASCII as '?':
 * events.txt is word-based) instead.  Parts out of order (a hostile
 * target) are skipped. */
static int request_label(struct uft_writer *w, struct uthread *th, struct recbuf *b,
			 const struct tf_event *ev)
{
	switch (ev->addr & (UINT64_C(0x7f) << 56)) {
	case XP_TRACE_LABEL_BEGIN:
		trace_label_start(&th->label, ev->addr, ev->ns);
		th->req_addr = 0;
		th->req_over = 0;
		return 0;
	case XP_TRACE_LABEL_TEXT:
		if (!trace_label_text(&th->label, ev->addr))
			return 0;
		if (w->req_base && w->req_next < REQ_SPAN - 1) {
			char line[2 * 20 + XP_TRACE_LABEL_MAX + 64];
			uint64_t at = w->req_next++;
			int len = snprintf(line, sizeof(line), "%016" PRIx64 " T %s\n%016" PRIx64
					   " ? __request_end\n", at, th->label.text, at + 1);
			if (append_file(w, REQ_SYM, line, (size_t)len))
				return -1;
			uint64_t addr = w->req_base + at;
			size_t depth = th->sp;
			int kept = push(w, th, addr);
			if (kept < 0)
				return -1;
			th->req_addr = addr;
			th->req_sp = depth;
			th->req_over = !kept; /* its end closes it as an exit would */
			return kept ? emit(w, b, th->label.ns, R_ENTRY, depth, addr) : 0;
		} else {
			char name[80];
			snprintf(name, sizeof(name), "request:%s", th->label.text);
			for (char *c = name; *c; c++)
				if (*c == ' ')
					*c = '_';
			clean_word(name);
			uint32_t id = event_id(w, name);
			if (w->failed)
				return -1;
			return id ? emit(w, b, th->label.ns, R_EVENT, 0, id) : 0;
		}
	case XP_TRACE_LABEL_END: /* the request's calls are closed already */
		th->label.open = 0;
		if (th->req_over && th->over) { /* opened beyond the stack */
			th->req_over = 0;
			th->req_addr = 0;
			drop_deep(w, th);
			return --th->over ? 0 : mark_deep(w, th, b, ev->ns);
		}
		if (!th->req_addr || th->req_sp >= th->sp || th->stack[th->req_sp] != th->req_addr)
			return 0;
		while (th->sp > th->req_sp + 1) { /* none, from the agent: a hostile one's */
			th->sp--;
			if (emit(w, b, ev->ns, R_EXIT, th->sp, th->stack[th->sp]))
				return -1;
		}
		th->sp--;
		th->req_addr = 0;
		return emit(w, b, ev->ns, R_EXIT, th->sp, th->stack[th->sp]);
	default:
		return 0;
	}
}

/* The held record, with its argument data if whole and fitting its spec. */
static int write_held(struct uft_writer *w, struct uthread *th, struct recbuf *b)
{
	if (!th->held)
		return 0;
	th->held = 0;
	uint8_t u[TA_UFT_MAX];
	size_t n = th->pay_need && th->pay_have == th->pay_need
			   ? ta_to_uftrace(&th->held_spec, th->held_type == R_EXIT, th->pay,
					   th->pay_need, u) : 0;
	th->pay_need = th->pay_have = 0;
	if (n)
		return emit_more(w, b, th->held_ns, th->held_type, th->held_depth, th->held_addr, u, n);
	return emit(w, b, th->held_ns, th->held_type, th->held_depth, th->held_addr);
}

/* An entry (or exit) record: held if its function records arguments (or
 * a return value), else written. */
static int entry_exit(struct uft_writer *w, struct uthread *th, struct recbuf *b, uint64_t ns,
		      unsigned type, size_t depth, uint64_t addr)
{
	const struct ta_spec *spec = argspec_find(w->args, addr);
	if (!spec || !(type == R_EXIT ? spec->has_ret != 0 : spec->nargs != 0))
		return emit(w, b, ns, type, depth, addr);
	if (!th->pay && !(th->pay = malloc(TA_PAYLOAD_MAX)))
		return fail(w, ENOMEM, "%s", strerror(ENOMEM));
	th->held = 1;
	th->held_ns = ns;
	th->held_type = type;
	th->held_depth = depth;
	th->held_addr = addr;
	th->held_spec = *spec;
	th->pay_need = th->pay_have = 0;
	return 0;
}

/* An argument record: a header starts the held record's payload, data
 * records fill it; one with no held record to go with (a flight
 * recorder's oldest, or a hostile target's) is skipped. */
static int arg_record(struct uft_writer *w, struct uthread *th, struct recbuf *b,
		      const struct tf_event *ev)
{
	if (!th->held || (ta_is_header(ev) && th->pay_need) ||
	    (ta_is_data(ev) && th->pay_have >= th->pay_need)) {
		w->skipped++;
		return write_held(w, th, b); /* out of order: its data goes */
	}
	if (ta_is_header(ev)) {
		uint64_t n = ev->addr & 0xffff;
		if (!n || n > TA_PAYLOAD_MAX || (ev->addr & ((UINT64_C(1) << 56) - 1)) != n)
			return write_held(w, th, b);
		th->pay_need = (size_t)n;
		return 0;
	}
	for (size_t j = 0; j < 14 && th->pay_have < th->pay_need; j++)
		th->pay[th->pay_have++] = (uint8_t)(j < 7 ? ev->addr >> (8 * j) : ev->ns >> (8 * (j - 6)));
	return th->pay_have == th->pay_need ? write_held(w, th, b) : 0;
}

static int append_one(struct uft_writer *w, struct uthread *th, struct recbuf *b,
		      const struct tf_event *ev)
{
	if (ta_is_header(ev) || ta_is_data(ev))
		return arg_record(w, th, b, ev);
	if (write_held(w, th, b))
		return -1;
	switch (ev->kind) {
	case XP_TRACE_ENTRY: {
		size_t depth = th->sp;
		int kept = push(w, th, ev->addr);
		return kept <= 0 ? kept : entry_exit(w, th, b, ev->ns, R_ENTRY, depth, ev->addr);
	}
	case XP_TRACE_EXIT: {
		if (th->over) { /* closes a call beyond the stack: the innermost */
			drop_deep(w, th);
			return --th->over ? 0 : mark_deep(w, th, b, ev->ns);
		}
		uint64_t addr = ev->addr & ~XP_TRACE_UNWOUND;
		size_t k = th->sp; /* at most STACK_FRAMES to scan */
		while (k > 0 && th->stack[k - 1] != addr)
			k--;
		if (!k) /* its entry was never seen: entered before the recording */
			return ev->addr & XP_TRACE_UNWOUND ? 0 : no_entry(w, th, b, ev->ns, addr);

		while (th->sp > k) { /* unwound without their exits: closed here */
			th->sp--;
			if (!th->jumped && emit(w, b, ev->ns, R_EXIT, th->sp, th->stack[th->sp]))
				return -1;
		}
		th->sp--;
		if (is_jump(w, ev->addr) || th->jumped) {
			/* Its entry alone; then the outermost call it left (after_jump). */
			th->jump_left = th->jumped;
			th->jump_ns = ev->ns;
			th->jump_addr = addr;
			th->jump_depth = th->sp;
			th->jumped = 1;
			return 0;
		}
		/* Left by longjmp or an exception: uftrace pairs by depth, so it
		 * needs the exit, and shows the mark before it. */
		uint32_t mark = ev->addr & XP_TRACE_UNWOUND ? event_id(w, UFT_UNWOUND_EVENT) : 0;
		if (w->failed || (mark && emit(w, b, ev->ns, R_EVENT, 0, mark)))
			return -1;
		return mark ? emit(w, b, ev->ns, R_EXIT, th->sp, addr)
			    : entry_exit(w, th, b, ev->ns, R_EXIT, th->sp, addr);
	}
	case XP_TRACE_LOST:
		if (ev->addr & XP_TRACE_LABEL)
			return request_label(w, th, b, ev);
		return emit(w, b, ev->ns, R_LOST, th->sp, ev->addr);
	case XP_TRACE_SITE: {
		uint32_t id = w->site_name ? site_event(w, ev->addr) : 0;
		if (w->failed)
			return -1;
		if (!id) {
			w->skipped++;
			return 0;
		}
		return emit(w, b, ev->ns, R_EVENT, 0, id);
	}
	default:
		w->skipped++;
		return 0;
	}
}

static int append(struct uft_writer *w, int tid, const struct tf_event *ev, size_t n, int final);

int uft_append(struct uft_writer *w, int tid, const struct tf_event *ev, size_t n)
{
	return append(w, tid, ev, n, 0);
}

/* final: the thread's held record is written too (nothing follows). */
static int append(struct uft_writer *w, int tid, const struct tf_event *ev, size_t n, int final)
{
	if (w->failed) {
		errno = w->failed;
		return -1;
	}
	if (thread_refused(w, tid, n))
		return 0;
	struct uthread *th = add_thread(w, tid);
	if (!th)
		return -1;
	char name[32];
	snprintf(name, sizeof(name), "%d.dat", tid);
	struct recbuf *b = malloc(sizeof(*b));
	if (!b)
		return fail(w, ENOMEM, "%s", strerror(ENOMEM));
	b->n = 0;
	b->name = name;
	b->fd = openat(w->dirfd, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	int rc = b->fd < 0 ? fail(w, errno, "writing %s/%s: %s", w->dir, name, strerror(errno)) : 0;
	for (size_t i = 0; i < n && !rc; i++) {
		if (th->jumped && (rc = after_jump(w, th, b, &ev[i])) != 0)
			break;
		rc = append_one(w, th, b, &ev[i]);
		if (ta_is_data(&ev[i]))
			continue; /* its ns is payload, no time */
		if (!w->any_ns || ev[i].ns < w->first_ns)
			w->first_ns = ev[i].ns;
		if (!w->any_ns || ev[i].ns > w->last_ns)
			w->last_ns = ev[i].ns;
		w->any_ns = 1;
		if (!th->has_ns)
			th->first_ns = ev[i].ns;
		th->last_ns = ev[i].ns;
		th->has_ns = 1;
	}
	if (!rc && final)
		rc = write_held(w, th, b);
	if (!rc && b->n)
		rc = put(w, b->fd, name, b->v, b->n * 16);
	if (b->fd >= 0 && close(b->fd) != 0 && !rc)
		rc = fail(w, errno, "writing %s/%s: %s", w->dir, name, strerror(errno));
	free(b);
	return rc;
}

/* Calls still open beyond a stack at the end: what they dropped is
 * marked, as their exits would have. */
static void mark_open_deep(struct uft_writer *w)
{
	for (size_t i = 0; i < w->nth && !w->failed; i++)
		if (w->th[i].deep) {
			struct tf_event ev = { w->th[i].last_ns, w->th[i].deep, XP_TRACE_LOST };
			w->th[i].deep = 0;
			uft_append(w, w->th[i].tid, &ev, 1);
		}
}

/* ---- following a program's children and execs (trace_follow.c) ---- */

static int writer_ok(struct uft_writer *w)
{
	if (!w->failed)
		return 0;
	errno = w->failed;
	return -1;
}

int uft_task(struct uft_writer *w, int tid, int pid, uint64_t ns)
{
	size_t at;
	if (writer_ok(w))
		return -1;
	if (find_thread(w, tid, &at) || thread_refused(w, tid, 0))
		return 0;
	struct task_line l = { .pid = pid, .ns = ns ? ns : w->mono_ns };
	return add_thread_as(w, tid, &l) ? 0 : -1;
}

int uft_fork(struct uft_writer *w, int pid, int ppid, uint64_t ns, const uint64_t *open,
	     size_t nopen, size_t depth)
{
	size_t at;
	if (writer_ok(w))
		return -1;
	struct task_line fork = { .pid = pid, .ppid = ppid, .ns = ns };
	if (add_line_as(w, 0, NULL, 0, &fork))
		return -1;
	struct uthread *th = find_thread(w, pid, &at);
	if (!th && thread_refused(w, pid, 0))
		return 0;
	if (!th) {
		struct task_line l = { .pid = pid, .ns = ns };
		if (!(th = add_thread_as(w, pid, &l)))
			return -1;
	}
	/* The calls it inherited open, outermost first: their exits come
	 * in its records, at their depths.  Those not named are kept as 0
	 * (their exits are left out, their depth counted). */
	th->sp = 0;
	th->over = 0;
	nopen = nopen > depth ? depth : nopen;
	for (size_t i = 0; i < depth; i++)
		if (push(w, th, i < depth - nopen ? 0 : open[i - (depth - nopen)]) < 0)
			return -1;
	return 0;
}

int uft_exec(struct uft_writer *w, const struct uft_session *s)
{
	size_t at;
	if (writer_ok(w))
		return -1;
	char root_sid[sizeof(w->sid)], *exe = clean_dup(s->exe), *line = NULL;
	memcpy(root_sid, w->sid, sizeof(root_sid));
	snprintf(w->sid, sizeof(w->sid), "%016" PRIx64,
		 mix64(mix64((uint64_t)s->pid) ^ s->mono_ns ^ s->real_ns ^ w->nlines));
	int rc = exe ? write_objects(w, s) : fail(w, ENOMEM, "%s", strerror(ENOMEM));
	if (!rc && asprintf(&line, "pid=%d sid=%s exename=\"%s\"", s->pid, w->sid, exe) < 0) {
		line = NULL;
		rc = fail(w, ENOMEM, "%s", strerror(ENOMEM));
	}
	memcpy(w->sid, root_sid, sizeof(root_sid));
	free(exe);
	if (rc) {
		free(line);
		return rc;
	}
	struct task_line sess = { .pid = s->pid, .ns = s->mono_ns, .sess = line };
	if (add_line_as(w, 0, NULL, 0, &sess))
		return -1;
	/* The thread that exec'd is the new image's first (tid = pid): its
	 * old calls never return; its new ones start at depth 0. */
	struct uthread *th = find_thread(w, s->pid, &at);
	struct task_line task = { .pid = s->pid, .ns = s->mono_ns };
	if (th) {
		th->sp = 0;
		th->over = 0;
		task.again = 1;
		return add_line_as(w, s->pid, NULL, 0, &task);
	}
	if (thread_refused(w, s->pid, 0))
		return 0;
	return add_thread_as(w, s->pid, &task) ? 0 : -1;
}

int uft_close(struct uft_writer *w)
{
	for (size_t i = 0; i < w->nth && !w->failed; i++)
		if (w->th[i].held)
			append(w, w->th[i].tid, NULL, 0, 1);
	mark_open_deep(w);
	int rc = w->failed ? -1 : 0;
	/* Each thread at its first record; and a record before the
	 * session's start (the target's buffers held older ones) would be
	 * read without names: the session's time moves back to it. */
	if (!rc)
		rc = write_tasks(w, sess_ns(w));
	if (!rc)
		rc = write_info(w);
	int err = w->failed;
	snprintf(last_error, sizeof(last_error), "%s", rc ? w->err : "");
	writer_free(w);
	if (rc)
		errno = err ? err : EIO;
	return rc;
}

/* ---- the reader ------------------------------------------------------- */

struct rsym {
	uint64_t value;
	const char *name; /* NULL: a boundary (uftrace's "?" lines) */
};

struct symfile {
	char *base;     /* NAME of NAME.sym */
	int loaded;
	struct rsym *syms;
	size_t n;
	char *text;     /* the file, names pointing into it */
};

struct robject {
	uint64_t start, end;
	char *path;
	struct symfile *sf;
};

struct cache_slot {
	uint64_t addr;
	const char *name;
};

struct uft_names {
	int dirfd;
	int rel;        /* SYM_REL_ADDR: symbols count from the object's start */
	struct robject *objs;
	size_t nobjs;
	struct symfile **sfs;
	size_t nsfs;
	char **events;  /* by id - UFT_EVENT_USER */
	size_t nevents;
	struct cache_slot *cache;
	size_t ncache, cache_cap;
	char **owned;
	size_t nowned;
	struct argspecs args; /* info's argspec and retspec */
	int have_args;
	/* uftrace's -a (info's "auto-args:1"): each object's specs from its
	 * DIR/NAME.dbg, by address, and the built-in ones of library calls
	 * (argauto:, retauto:), by name; -A/-R's win as uftrace merges them. */
	int autoargs, autos_loaded;
	struct argspecs autos, autorules;
	/* The .dbg texts, and where each function's lines start in them (by
	 * address): parsed when a record of it carries data, so that a big
	 * (or hostile) .dbg costs 8 bytes a function, not a spec. */
	char **dbgs;
	size_t ndbgs;
	struct u64map dbg_at;
	struct dbg_line { uint32_t text, off; } *dbg_lines;
	size_t ndbg_lines, capdbg_lines;
};

/* A regular file of the directory, whole, NUL-terminated.  1 if it is
 * not there, 0, or -1 with r->err. */
static int slurp(struct uft_recording *r, int dfd, const char *dir, const char *name, size_t max,
		 char **out, size_t *len)
{
	*out = NULL;
	*len = 0;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 1;
	if (fd < 0)
		return rfail(r, errno, "%s/%s: %s", dir, name, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return rfail(r, EINVAL, "%s/%s: not a regular file", dir, name);
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return rfail(r, EFBIG, "%s/%s: %" PRIu64 " bytes, more than the %zu allowed", dir,
			     name, (uint64_t)st.st_size, max);
	}
	char *buf = malloc((size_t)st.st_size + 1);
	size_t got = 0;
	while (buf && got < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	int err = errno;
	close(fd);
	if (!buf)
		return rfail(r, ENOMEM, "%s/%s: %s", dir, name, strerror(ENOMEM));
	buf[got] = '\0';
	if (got < (size_t)st.st_size && got == 0 && st.st_size) {
		free(buf);
		return rfail(r, err ? err : EIO, "%s/%s: %s", dir, name, strerror(err ? err : EIO));
	}
	*out = buf;
	*len = got; /* a file that shrank meanwhile: what was there */
	return 0;
}

static int parse_u64(const char *s, int base, uint64_t *v)
{
	char *end;
	if (!*s || *s == '-' || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	unsigned long long x = strtoull(s, &end, base);
	if (errno || *end)
		return -1;
	*v = x;
	return 0;
}

/* "S.NNNNNNNNN" seconds to ns, checked. */
static int parse_ts(const char *s, uint64_t *ns)
{
	char sec[32], frac[16] = "0";
	const char *dot = strchr(s, '.');
	size_t sl = dot ? (size_t)(dot - s) : strlen(s);
	if (sl == 0 || sl >= sizeof(sec) || (dot && (strlen(dot + 1) == 0 || strlen(dot + 1) > 9)))
		return -1;
	memcpy(sec, s, sl);
	sec[sl] = '\0';
	if (dot) {
		snprintf(frac, sizeof(frac), "%s", dot + 1);
		while (strlen(frac) < 9)
			strcat(frac, "0");
	}
	uint64_t a, b;
	if (parse_u64(sec, 10, &a) || parse_u64(frac, 10, &b) || a > UINT64_MAX / 1000000000u ||
	    a * 1000000000u > UINT64_MAX - b)
		return -1;
	*ns = a * 1000000000u + b;
	return 0;
}

/* The value of key=VALUE in a task.txt line (quoted: to the last quote). */
static int field(const char *line, const char *key, char *out, size_t outlen)
{
	size_t kl = strlen(key);
	for (const char *p = line; (p = strstr(p, key)); p++) {
		if ((p != line && p[-1] != ' ') || p[kl] != '=')
			continue;
		const char *v = p + kl + 1;
		size_t len;
		if (*v == '"') {
			const char *q = strrchr(v + 1, '"');
			if (!q)
				return -1;
			v++;
			len = (size_t)(q - v);
		} else {
			len = strcspn(v, " ");
		}
		if (len >= outlen)
			return -1;
		memcpy(out, v, len);
		out[len] = '\0';
		return 0;
	}
	return -1;
}

static struct symfile *symfile_for(struct uft_names *nm, const char *path)
{
	const char *base = base_name(path);
	for (size_t i = 0; i < nm->nsfs; i++)
		if (!strcmp(nm->sfs[i]->base, base))
			return nm->sfs[i];
	struct symfile *sf = calloc(1, sizeof(*sf));
	struct symfile **grown = sf ? realloc(nm->sfs, (nm->nsfs + 1) * sizeof(*grown)) : NULL;
	if (!grown || !(sf->base = strdup(base))) {
		free(sf);
		return NULL;
	}
	nm->sfs = grown;
	return nm->sfs[nm->nsfs++] = sf;
}

static int add_object(struct uft_recording *r, uint64_t start, uint64_t end, const char *path)
{
	struct uft_names *nm = r->priv;
	if (nm->nobjs >= MAX_OBJECTS)
		return rfail(r, EFBIG, "more than %u objects", MAX_OBJECTS);
	struct symfile *sf = symfile_for(nm, path);
	struct robject *grown = sf ? realloc(nm->objs, (nm->nobjs + 1) * sizeof(*grown)) : NULL;
	if (grown)
		nm->objs = grown;
	char *copy = grown ? strdup(path) : NULL;
	if (!copy)
		return rfail(r, ENOMEM, "%s", strerror(ENOMEM));
	nm->objs[nm->nobjs++] = (struct robject){ start, end, copy, sf };
	return 0;
}

/* A session's map: each file's lowest address to its highest end. */
static int read_map(struct uft_recording *r, const char *dir, const char *sid)
{
	char name[64], *text;
	size_t len;
	snprintf(name, sizeof(name), "sid-%s.map", sid);
	int rc = slurp(r, r->priv->dirfd, dir, name, MAX_TEXT, &text, &len);
	if (rc)
		return rc < 0 ? -1 : 0; /* no map: addresses stay numbers */
	size_t first = r->priv->nobjs;
	for (char *line = text, *next; line && *line && !rc; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		unsigned long long start, end;
		int off = 0;
		if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %n", &start, &end, &off) < 2 || !off ||
		    start >= end)
			continue;
		char *path = line + off;
		path[strcspn(path, " \t")] = '\0';
		if (*path != '/')
			continue;
		size_t i = first;
		while (i < r->priv->nobjs && strcmp(r->priv->objs[i].path, path))
			i++;
		if (i < r->priv->nobjs) {
			struct robject *o = &r->priv->objs[i];
			o->start = start < o->start ? start : o->start;
			o->end = end > o->end ? end : o->end;
		} else {
			rc = add_object(r, start, end, path);
		}
	}
	free(text);
	return rc;
}

static int cmp_rsym(const void *a, const void *b)
{
	const struct rsym *x = a, *y = b;
	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	return (x->name == NULL) - (y->name == NULL); /* names before boundaries */
}

/* NAME.sym, once: "%x %c name" lines, '#' comments; a bad line is skipped. */
static void load_symfile(struct uft_names *nm, struct symfile *sf)
{
	char name[NAME_MAX + 1];
	struct uft_recording scratch;
	size_t len, cap = 0;
	sf->loaded = 1;
	if (snprintf(name, sizeof(name), "%s.sym", sf->base) >= (int)sizeof(name) ||
	    slurp(&scratch, nm->dirfd, ".", name, MAX_SYMFILE, &sf->text, &len))
		return;
	for (char *line = sf->text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *sp1 = strchr(line, ' ');
		if (*line == '#' || !sp1 || sp1[1] == '\0' || sp1[2] != ' ' || !sp1[3])
			continue;
		*sp1 = '\0';
		uint64_t v;
		if (parse_u64(line, 16, &v))
			continue;
		if (sf->n == cap) {
			size_t ncap = cap ? 2 * cap : 1024;
			struct rsym *grown = realloc(sf->syms, ncap * sizeof(*grown));
			if (!grown)
				break;
			sf->syms = grown;
			cap = ncap;
		}
		char *sym = sp1 + 3;
		if (!strcmp(sf->base, base_name(REQ_OBJECT)))
			trace_label_clean(sym); /* a request's label: spaces and UTF-8 kept */
		else
			clean_word(sym);
		sf->syms[sf->n++] = (struct rsym){ v, sp1[1] == '?' ? NULL : sym };
	}
	if (sf->n)
		qsort(sf->syms, sf->n, sizeof(*sf->syms), cmp_rsym);
}

/* The function holding v: the last symbol at or below it, if v is below
 * the next symbol's value (the symbol itself when it is the last). */
static const struct rsym *rsym_at(const struct symfile *sf, uint64_t v)
{
	size_t lo = 0, hi = sf->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (sf->syms[mid].value <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	size_t i = lo - 1;
	while (i > 0 && sf->syms[i - 1].value == sf->syms[i].value)
		i--; /* the first of that value: a name, if any */
	const struct rsym *s = &sf->syms[i];
	if (lo == sf->n && s->value != v)
		return NULL;
	return s;
}

static const char *sym_at(const struct symfile *sf, uint64_t v)
{
	const struct rsym *s = rsym_at(sf, v);
	return s ? s->name : NULL;
}

/* The symbol of the function addr is in, and its object, or NULL. */
static const struct rsym *sym_containing(struct uft_names *nm, uint64_t addr,
					 const struct robject **obj)
{
	for (size_t i = 0; i < nm->nobjs; i++) {
		struct robject *o = &nm->objs[i];
		if (addr < o->start || addr >= o->end)
			continue;
		if (!o->sf->loaded)
			load_symfile(nm, o->sf);
		const struct rsym *s = rsym_at(o->sf, nm->rel ? addr - o->start : addr);
		if (s && s->name) {
			*obj = o;
			return s;
		}
	}
	return NULL;
}

/* The start of the function addr is in (uftrace's -pg records an address
 * inside it, after its call of mcount), or addr. */
static uint64_t func_start(struct uft_names *nm, uint64_t addr)
{
	const struct robject *o;
	const struct rsym *s = sym_containing(nm, addr, &o);
	return !s ? addr : nm->rel ? o->start + s->value : s->value;
}

/* tf_names' sym: the function addr is in, or NULL. */
static const char *names_sym(void *ctx, uint64_t addr)
{
	const struct robject *o;
	const struct rsym *s = sym_containing(ctx, addr, &o);
	return s ? s->name : NULL;
}

static struct cache_slot *cslot(struct uft_names *nm, uint64_t addr)
{
	size_t mask = nm->cache_cap - 1;
	size_t i = (size_t)((addr * 0x9e3779b97f4a7c15ull) >> 20) & mask;
	while (nm->cache[i].name && nm->cache[i].addr != addr)
		i = (i + 1) & mask;
	return &nm->cache[i];
}

static const char *keep_name(struct uft_names *nm, uint64_t addr, const char *name)
{
	if (2 * (nm->ncache + 1) > nm->cache_cap) {
		struct cache_slot *old = nm->cache;
		size_t oldcap = nm->cache_cap;
		nm->cache_cap = oldcap ? 2 * oldcap : 1024;
		nm->cache = calloc(nm->cache_cap, sizeof(*nm->cache));
		if (!nm->cache) {
			nm->cache = old;
			nm->cache_cap = oldcap;
			return name;
		}
		for (size_t i = 0; i < oldcap; i++)
			if (old[i].name)
				*cslot(nm, old[i].addr) = old[i];
		free(old);
	}
	*cslot(nm, addr) = (struct cache_slot){ addr, name };
	nm->ncache++;
	return name;
}

static const char *own_name(struct uft_names *nm, char *s)
{
	char **grown = s ? realloc(nm->owned, (nm->nowned + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		free(s);
		return "?";
	}
	nm->owned = grown;
	return nm->owned[nm->nowned++] = s;
}

static const char *names_func(void *ctx, uint64_t addr)
{
	struct uft_names *nm = ctx;
	if (nm->cache_cap) {
		struct cache_slot *c = cslot(nm, addr);
		if (c->name)
			return c->name;
	}
	const char *name = NULL;
	for (size_t i = 0; i < nm->nobjs && !name; i++) {
		struct robject *o = &nm->objs[i];
		if (addr < o->start || addr >= o->end)
			continue;
		if (!o->sf->loaded)
			load_symfile(nm, o->sf);
		name = sym_at(o->sf, nm->rel ? addr - o->start : addr);
	}
	if (!name) {
		char *s;
		name = own_name(nm, asprintf(&s, "0x%" PRIx64, addr) < 0 ? NULL : s);
	}
	return keep_name(nm, addr, name);
}

static const char *names_site(void *ctx, uint64_t id)
{
	struct uft_names *nm = ctx;
	if (id >= UFT_EVENT_USER && id - UFT_EVENT_USER < nm->nevents &&
	    nm->events[id - UFT_EVENT_USER])
		return nm->events[id - UFT_EVENT_USER];
	char *s;
	return own_name(nm, asprintf(&s, "event %" PRIu64, id) < 0 ? NULL : s);
}

static int read_events(struct uft_recording *r, const char *dir)
{
	struct uft_names *nm = r->priv;
	char *text;
	size_t len;
	int rc = slurp(r, nm->dirfd, dir, "events.txt", MAX_TEXT, &text, &len);
	if (rc)
		return rc < 0 ? -1 : 0;
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char idtext[16], *sp;
		uint64_t id;
		if (strncmp(line, "EVENT: ", 7) || !(sp = strchr(line + 7, ' ')) ||
		    (size_t)(sp - line - 7) >= sizeof(idtext))
			continue;
		memcpy(idtext, line + 7, (size_t)(sp - line - 7));
		idtext[sp - line - 7] = '\0';
		if (parse_u64(idtext, 10, &id) || id < UFT_EVENT_USER || id - UFT_EVENT_USER >= 65536)
			continue;
		size_t k = (size_t)(id - UFT_EVENT_USER);
		if (k >= nm->nevents) {
			char **grown = realloc(nm->events, (k + 1) * sizeof(*grown));
			if (!grown) {
				free(text);
				return rfail(r, ENOMEM, "%s", strerror(ENOMEM));
			}
			memset(grown + nm->nevents, 0, (k + 1 - nm->nevents) * sizeof(*grown));
			nm->events = grown;
			nm->nevents = k + 1;
		}
		free(nm->events[k]);
		if ((nm->events[k] = strdup(sp + 1)))
			clean_word(nm->events[k]);
	}
	free(text);
	return 0;
}

/* The threads' names from the COMM records of perf-cpuN.dat: the last by time. */
static void read_comms(struct uft_recording *r, const char *dir, uint64_t *when)
{
	for (int cpu = 0; cpu < MAX_PERF_FILES; cpu++) {
		char name[32], *buf;
		size_t len;
		snprintf(name, sizeof(name), "perf-cpu%d.dat", cpu);
		if (slurp(r, r->priv->dirfd, dir, name, MAX_PERF, &buf, &len))
			break;
		for (size_t off = 0; off + 8 <= len;) {
			uint32_t type, pid, tid;
			uint16_t size;
			uint64_t ns;
			memcpy(&type, buf + off, 4);
			memcpy(&size, buf + off + 6, 2);
			if (size < 8 || size > len - off)
				break;
			if (type == PERF_COMM && size >= 8 + 8 + 8 + 16) {
				const char *rec = buf + off;
				memcpy(&pid, rec + 8, 4);
				memcpy(&tid, rec + 12, 4);
				memcpy(&ns, rec + size - 8, 8);
				size_t clen = strnlen(rec + 16, (size_t)size - 32);
				for (size_t i = 0; i < r->nthreads; i++)
					if ((uint32_t)r->threads[i].tid == tid && ns >= when[i]) {
						char *c = strndup(rec + 16, clen);
						if (!c)
							break;
						clean_word(c);
						free(r->thread_names[i]);
						r->thread_names[i] = c;
						when[i] = ns;
					}
			}
			off += size;
		}
		free(buf);
	}
}

/* uftrace pairs an exit with its entry by depth alone, and a call that
 * longjmp left has no exit record (uftrace's own recordings, and ours of
 * a call the agent marked unwound): a record at a lower depth than the
 * calls open says they are gone.  Each becomes an exit marked unwound at
 * that record's time, as the agent records it, and the views show it
 * left without its exit. */
struct open_calls {
	uint64_t addr[UFT_MAX_DEPTH]; /* by depth; 0: its entry was not read */
	size_t n;
	uint64_t unwound_id;          /* UFT_UNWOUND_EVENT's id, 0: none */
	int marked;                   /* that event came: the next exit is unwound */
	uint64_t noentry_id;          /* UFT_NOENTRY_EVENT's id, 0: none */
	int noentry;                  /* 1: an entry held back; 2: and that event after it */
	struct tf_event held;         /* that entry, until its exit */
	size_t held_depth;
};

struct evbuf {
	struct tf_event *ev;
	size_t n, cap;
};

/* Room for what one record may make: itself, an entry held back before
 * it, the unwound exits of each, and its argument records. */
#define EV_PER_RECORD (2 * (UFT_MAX_DEPTH + 1) + 2 + TA_PAYLOAD_MAX / 14)
static int evbuf_room(struct evbuf *b)
{
	if (b->n + EV_PER_RECORD <= b->cap)
		return 0;
	size_t cap = 2 * b->cap + EV_PER_RECORD;
	struct tf_event *grown = reallocarray(b->ev, cap, sizeof(*grown));
	if (!grown)
		return -1;
	b->ev = grown;
	b->cap = cap;
	return 0;
}

static void unwind_to(struct open_calls *o, size_t depth, uint64_t ns, struct evbuf *b)
{
	while (o->n > depth)
		if (o->addr[--o->n])
			b->ev[b->n++] = (struct tf_event){ ns, o->addr[o->n] | XP_TRACE_UNWOUND,
							   XP_TRACE_EXIT };
}

static void take_plain(struct open_calls *o, struct evbuf *b, uint64_t ns, unsigned type,
		       size_t depth, uint64_t addr);

/* An entry, UFT_NOENTRY_EVENT, its exit: the exit alone.  Each entry
 * waits for the next record to see whether the mark follows (only in a
 * directory that has the event).  1 when the record was taken so. */
static int take_no_entry(struct open_calls *o, struct evbuf *b, uint64_t ns, unsigned type,
			 size_t depth, uint64_t addr)
{
	int held = o->noentry;
	o->noentry = 0;
	if (held == 1 && type == R_EVENT && addr == o->noentry_id) {
		o->noentry = 2;
		return 1;
	}
	if (held == 2 && type == R_EXIT && addr == o->held.addr && depth == o->held_depth) {
		b->ev[b->n++] = (struct tf_event){ ns, addr, XP_TRACE_EXIT };
		return 1;
	}
	if (held) /* not ours after all: the entry as it was */
		take_plain(o, b, o->held.ns, R_ENTRY, o->held_depth, o->held.addr);
	if (type != R_ENTRY || !o->noentry_id)
		return 0;
	o->held = (struct tf_event){ ns, addr, XP_TRACE_ENTRY };
	o->held_depth = depth;
	o->noentry = 1;
	return 1;
}

static void take_plain(struct open_calls *o, struct evbuf *b, uint64_t ns, unsigned type,
		       size_t depth, uint64_t addr)
{
	static const unsigned kinds[] = { XP_TRACE_ENTRY, XP_TRACE_EXIT, XP_TRACE_LOST,
					  XP_TRACE_SITE };
	int marked = o->marked;
	o->marked = 0;
	if (type == R_EVENT && o->unwound_id && addr == o->unwound_id) {
		o->marked = 1; /* our mark: the exit it precedes says it */
		return;
	}
	if (type == R_EXIT && marked)
		addr |= XP_TRACE_UNWOUND;
	if (type == R_ENTRY) {
		unwind_to(o, depth, ns, b);
		while (o->n < depth)
			o->addr[o->n++] = 0;
		if (o->n < UFT_MAX_DEPTH)
			o->addr[o->n++] = addr;
	} else if (type == R_EXIT && depth < o->n) {
		/* Its own entry at its depth: what was above it is gone.  Another
		 * call there: that one is gone too (uftrace's longjmp back into
		 * setjmp shows setjmp's exit at the depth of the call it left). */
		int own = o->addr[depth] == (addr & ~XP_TRACE_UNWOUND);
		unwind_to(o, depth + own, ns, b);
		if (own)
			o->n = depth;
	}
	b->ev[b->n++] = (struct tf_event){ ns, addr, kinds[type] };
}

/* One record (uftrace's type, depth, address) into b. */
static void take_record(struct open_calls *o, struct evbuf *b, uint64_t ns, unsigned type,
			size_t depth, uint64_t addr)
{
	if (!take_no_entry(o, b, ns, type, depth, addr))
		take_plain(o, b, ns, type, depth, addr);
}

/* One object's DIR/NAME.dbg: its E: lines (enum definitions) into
 * nm->autos, and where each F: line (offset name, then the function's A:
 * and R: lines) is, at start + offset.  Untrusted: bounded by its size. */
static void load_dbg(struct uft_names *nm, const struct robject *o)
{
	char name[NAME_MAX + 1], *text;
	struct uft_recording scratch;
	size_t len;
	if (snprintf(name, sizeof(name), "%s.dbg", o->sf->base) >= (int)sizeof(name) ||
	    nm->ndbgs >= MAX_OBJECTS ||
	    slurp(&scratch, nm->dirfd, ".", name, MAX_SYMFILE, &text, &len))
		return;
	/* Two NULs at the end: a walk from a function's line past the
	 * last line meets an empty one (dbg_spec). */
	char *two = realloc(text, len + 2);
	char **grown = two ? realloc(nm->dbgs, (nm->ndbgs + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		free(two ? two : text);
		return;
	}
	text = two;
	text[len + 1] = '\0';
	nm->dbgs = grown;
	nm->dbgs[nm->ndbgs] = text;
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		unsigned long long off;
		if (!strncmp(line, "E: ", 3)) {
			argspec_enum(&nm->autos, line + 3);
		} else if (!strncmp(line, "F: ", 3) && sscanf(line + 3, "%llx", &off) == 1) {
			if (nm->ndbg_lines == nm->capdbg_lines) {
				size_t cap = nm->capdbg_lines ? 2 * nm->capdbg_lines : 1024;
				struct dbg_line *g = cap < UINT32_MAX ? realloc(nm->dbg_lines,
										cap * sizeof(*g)) : NULL;
				if (!g)
					break;
				nm->dbg_lines = g;
				nm->capdbg_lines = cap;
			}
			uint64_t addr = nm->rel ? o->start + off : off;
			if (u64map_put(&nm->dbg_at, addr, (uint32_t)nm->ndbg_lines))
				break;
			nm->dbg_lines[nm->ndbg_lines++] = (struct dbg_line){ (uint32_t)nm->ndbgs,
									(uint32_t)(line - text) };
		}
	}
	nm->ndbgs++;
}

/* The -a spec of the function at addr from its .dbg lines: 1, or 0 when
 * it has none (or they do not parse). */
static int dbg_spec(struct uft_names *nm, uint64_t addr, struct ta_spec *out)
{
	uint32_t at;
	char why[TRACE_WHY_SIZE];
	*out = (struct ta_spec){ 0 };
	if (u64map_get(&nm->dbg_at, addr, &at))
		return 0;
	const char *line = nm->dbgs[nm->dbg_lines[at].text] + nm->dbg_lines[at].off;
	for (line += strlen(line) + 1; !strncmp(line, "L: ", 3) || !strncmp(line, "A: @", 4) ||
				       !strncmp(line, "R: @", 4); line += strlen(line) + 1)
		if (line[0] != 'L' &&
		    argspec_parse_auto(&nm->autos, line + 4, line[0] == 'R', out, why, sizeof(why)))
			return 0;
	return out->nargs || out->has_ret;
}

/* The spec of the function at addr in a recording (info's rules matched
 * against its name, merged with -a's, once per address); NULL: none. */
static const struct ta_spec *recorded_spec(struct uft_recording *r, uint64_t addr)
{
	struct uft_names *nm = r->priv;
	struct argspecs *a = &nm->args;
	if (nm->autoargs && !nm->autos_loaded) {
		nm->autos_loaded = 1;
		for (size_t i = 0; i < nm->nobjs; i++) {
			size_t k = 0;
			while (k < i && nm->objs[k].start != nm->objs[i].start)
				k++;
			if (k == i) /* an object mapped again in a later session: once */
				load_dbg(nm, &nm->objs[i]);
		}
	}
	const struct ta_spec *s = argspec_find(a, addr);
	if (!s) {
		struct ta_spec user, autos;
		const struct ta_spec *found = NULL;
		char why[TRACE_WHY_SIZE];
		const char *name = names_func(nm, addr);
		if (argspec_match(a, name ? name : "", &user, why, sizeof(why)) <= 0)
			user = (struct ta_spec){ 0 };
		if (nm->autoargs && (dbg_spec(nm, func_start(nm, addr), &autos) ||
				     argspec_match(&nm->autorules, name ? name : "", &autos, why,
						   sizeof(why)) > 0))
			found = &autos;
		argspec_merge_auto(&user, found, &user);
		if (argspec_bind(a, addr, &user) != 0)
			return NULL;
		s = argspec_find(a, addr);
	}
	return s && (s->nargs || s->has_ret) ? s : NULL;
}

/* The argument data after a record (u, at most ulen bytes) as argument
 * records after its event in b: the bytes it takes, 0 if no spec of its
 * function says how to read it, or it is cut. */
static size_t take_args(struct uft_recording *r, struct open_calls *o, struct evbuf *b,
			uint64_t ns, unsigned type, uint64_t addr, const uint8_t *u, size_t ulen)
{
	const struct ta_spec *s = type == R_ENTRY || type == R_EXIT ? recorded_spec(r, addr) : NULL;
	uint8_t p[TA_PAYLOAD_MAX];
	size_t used, len;
	if (!s || !(len = ta_from_uftrace(s, type == R_EXIT, u, ulen, p, &used)))
		return 0;
	/* After the event just taken (an entry held back, ours marking an
	 * exit without its entry, keeps no arguments). */
	if (!o->noentry && b->n && b->ev[b->n - 1].addr == addr)
		b->n += ta_encode(p, len, ns, b->ev + b->n);
	return used;
}

/* TID.dat into thread th: 1 if there is none. */
static int read_dat(struct uft_recording *r, const char *dir, struct tf_thread *th,
		    uint64_t *total)
{
	char name[32];
	snprintf(name, sizeof(name), "%d.dat", th->tid);
	int fd = openat(r->priv->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 1;
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		int err = fd < 0 ? errno : EINVAL;
		if (fd >= 0)
			close(fd);
		return rfail(r, err, "%s/%s: %s", dir, name, fd < 0 ? strerror(err) : "not a regular file");
	}
	uint64_t n = (uint64_t)st.st_size / 16; /* a torn last record (a crash mid-write) is left */
	if (n > MAX_RECORDS - *total) {
		close(fd);
		return rfail(r, EFBIG, "%s: more than %" PRIu64 " records: too large to load", dir,
			     MAX_RECORDS);
	}
	struct evbuf b = { tf_big_array(n + EV_PER_RECORD, sizeof(*b.ev)), 0, n + EV_PER_RECORD };
	enum { CHUNK_BYTES = 65536 };
	uint8_t *raw = malloc(CHUNK_BYTES);
	uint64_t off = 0;
	struct open_calls *open = calloc(1, sizeof(*open));
	size_t got = 0;
	int rc = b.ev && raw && open ? 0 : rfail(r, ENOMEM, "%s", strerror(ENOMEM));
	for (size_t i = 0; !rc && i < r->priv->nevents; i++)
		if (r->priv->events[i] && !strcmp(r->priv->events[i], UFT_UNWOUND_EVENT))
			open->unwound_id = UFT_EVENT_USER + i;
		else if (r->priv->events[i] && !strcmp(r->priv->events[i], UFT_NOENTRY_EVENT))
			open->noentry_id = UFT_EVENT_USER + i;
	/* Records are 16 bytes, and argument data (at most TA_UFT_MAX
	 * bytes) after one with the more bit: read in chunks, each starting
	 * on a record, refilled before a record whose data could pass its
	 * end. */
	uint64_t size = (uint64_t)st.st_size;
	while (!rc && off + 16 <= size) {
		size_t want = size - off < CHUNK_BYTES ? (size_t)(size - off) : CHUNK_BYTES;
		ssize_t k = pread(fd, raw, want, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 16)
			break; /* shrank meanwhile: what was there */
		size_t pos = 0;
		while (!rc && pos + 16 <= (size_t)k) {
			uint64_t t, word;
			memcpy(&t, raw + pos, 8);
			memcpy(&word, raw + pos + 8, 8);
			int more = (word & 4) != 0;
			if (more && (size_t)k - pos < 16 + TA_UFT_MAX && off + (uint64_t)k < size && pos)
				break; /* its data may pass the chunk: from here again */
			unsigned type = (unsigned)(word & 3);
			uint64_t addr = word >> 16;
			size_t used = 0;
			if (((word >> 3) & 7) != UFT_REC_MAGIC) {
				rc = rfail(r, EINVAL, "%s/%s: record %zu: bad magic (not a uftrace record)",
					   dir, name, got);
			} else if (evbuf_room(&b) != 0) {
				rc = rfail(r, ENOMEM, "%s", strerror(ENOMEM));
			} else {
				take_record(open, &b, t, type, (size_t)(word >> 6) & (UFT_MAX_DEPTH - 1),
					    addr);
				if (more && !(used = take_args(r, open, &b, t, type, addr, raw + pos + 16,
							       (size_t)k - pos - 16)))
					rc = rfail(r, ENOTSUP, "%s/%s: record %zu carries data (arguments, "
						   "a return value or an event's) that no -A/-R in "
						   "info describes (uftrace record -a?)", dir, name, got);
			}
			pos += 16 + used;
			got++;
		}
		off += pos;
	}
	if (!rc && open->noentry) /* an entry held back, and no more: the entry as it was */
		take_plain(open, &b, open->held.ns, R_ENTRY, open->held_depth, open->held.addr);
	close(fd);
	free(raw);
	free(open);
	if (rc) {
		free(b.ev);
		return -1;
	}
	th->ev = b.ev;
	th->n = b.n;
	*total += got;
	return 0;
}

static int read_tasks(struct uft_recording *r, const char *dir)
{
	char *text;
	size_t len;
	int rc = slurp(r, r->priv->dirfd, dir, "task.txt", MAX_TEXT, &text, &len);
	if (rc > 0)
		return rfail(r, ENOENT, "%s/task.txt: %s", dir, strerror(ENOENT));
	if (rc)
		return -1;
	int sessions = 0;
	size_t cap = 0;
	for (char *line = text, *next; line && *line && !rc; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char v[PATH_MAX], sid[40];
		uint64_t x, ts;
		if (!strncmp(line, "SESS ", 5)) {
			if (field(line, "sid", sid, sizeof(sid)) || strlen(sid) == 0 ||
			    strspn(sid, "0123456789abcdef") != strlen(sid)) {
				rc = rfail(r, EINVAL, "%s/task.txt: a session without a valid sid", dir);
				break;
			}
			if (!sessions++) {
				if (field(line, "pid", v, sizeof(v)) == 0 && parse_u64(v, 10, &x) == 0 &&
				    x <= INT_MAX)
					r->pid = (int)x;
				if (field(line, "timestamp", v, sizeof(v)) == 0 && parse_ts(v, &ts) == 0)
					r->origin_ns = ts;
				if (field(line, "exename", v, sizeof(v)) == 0) {
					free(r->exename);
					r->exename = clean_dup(v);
				}
			}
			rc = read_map(r, dir, sid);
		} else if (!strncmp(line, "TASK ", 5)) {
			if (field(line, "tid", v, sizeof(v)) || parse_u64(v, 10, &x) || !x || x > INT_MAX)
				continue;
			size_t i = 0;
			while (i < r->nthreads && r->threads[i].tid != (int)x)
				i++;
			if (i < r->nthreads)
				continue;
			if (r->nthreads >= MAX_TASKS) {
				rc = rfail(r, EFBIG, "%s/task.txt: more than %u tasks", dir, MAX_TASKS);
				break;
			}
			if (r->nthreads == cap) {
				size_t ncap = cap ? 2 * cap : 16;
				struct tf_thread *g = realloc(r->threads, ncap * sizeof(*g));
				if (g)
					r->threads = g;
				char **gn = g ? realloc(r->thread_names, ncap * sizeof(*gn)) : NULL;
				if (!gn) {
					rc = rfail(r, ENOMEM, "%s", strerror(ENOMEM));
					break;
				}
				r->thread_names = gn;
				cap = ncap;
			}
			r->threads[r->nthreads] = (struct tf_thread){ .tid = (int)x };
			r->thread_names[r->nthreads++] = NULL;
		} else if (!strncmp(line, "DLOP ", 5)) {
			if (field(line, "base", v, sizeof(v)) || parse_u64(v, 16, &x))
				continue;
			if (field(line, "libname", v, sizeof(v)) || *v != '/')
				continue;
			/* It ends at its last symbol (its "? __func_end"). */
			rc = add_object(r, x, x, v);
			if (!rc) {
				struct robject *o = &r->priv->objs[r->priv->nobjs - 1];
				load_symfile(r->priv, o->sf);
				uint64_t last = o->sf->n ? o->sf->syms[o->sf->n - 1].value : 0;
				if (!r->priv->rel) /* absolute symbols */
					o->start = o->sf->n ? o->sf->syms[0].value : 0;
				o->end = !r->priv->rel ? last + 1 : last < UINT64_MAX - x ? x + last + 1 : UINT64_MAX;
			}
		}
	}
	free(text);
	if (!rc && !sessions)
		rc = rfail(r, EINVAL, "%s/task.txt: no session", dir);
	return rc;
}

/* The text of the info line beginning with key (not "key" "lines="), in
 * text; NULL if there is none. */
static char *info_line(char *text, const char *key)
{
	size_t klen = strlen(key);
	for (char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (!strncmp(l, key, klen) && strncmp(l + klen, "lines=", 6))
			return l + klen;
	return NULL;
}

/* info's -A/-R (argspec and retspec lines; uftrace's -a lines are not
 * read): rules to read the argument data by, patterns as pattern_type says. */
static int read_arg_specs(struct uft_recording *r, const char *dir, char *text)
{
	struct argspecs *a = &r->priv->args;
	const char *pt = info_line(text, "pattern_type:");
	a->regex = !pt || strncmp(pt, "glob", 4);
	a->lenient = 1;
	const char *aa = info_line(text, "auto-args:");
	if (aa && *aa == '1') {
		r->priv->autoargs = r->priv->have_args = 1;
		r->priv->autos.lenient = r->priv->autorules.lenient = 1;
		r->priv->autorules.regex = a->regex;
		/* uftrace's built-in specs of library calls: a word that does
		 * not parse is left out (its calls' data then refused). */
		static const char *const akeys[] = { "argauto:", "retauto:" };
		for (int k = 0; k < 2; k++) {
			char *line = info_line(text, akeys[k]), *save, why[TRACE_WHY_SIZE];
			if (!line)
				continue;
			char *end = strchr(line, '\n');
			char *copy = strndup(line, end ? (size_t)(end - line) : strlen(line));
			for (char *w = copy ? strtok_r(copy, ";", &save) : NULL; w;
			     w = strtok_r(NULL, ";", &save))
				if (r->priv->autorules.nrules < 65536)
					argspec_option(&r->priv->autorules, w, why, sizeof(why));
			free(copy);
		}
	}
	static const char *const keys[] = { "argspec:", "retspec:" };
	char *lines[2] = { info_line(text, keys[0]), info_line(text, keys[1]) };
	for (int k = 0; k < 2; k++) { /* both found first: parsing cuts them */
		char *line = lines[k], *save, why[TRACE_WHY_SIZE];
		if (!line)
			continue;
		char *end = strchr(line, '\n');
		if (end)
			*end = '\0';
		for (char *w = strtok_r(line, ";", &save); w; w = strtok_r(NULL, ";", &save)) {
			if (a->nrules >= 65536 || argspec_option(a, w, why, sizeof(why)))
				return clean_word(w), rfail(r, ENOTSUP, "%s/info: %s %.80s: %s", dir, keys[k], w,
					     a->nrules >= 65536 ? "too many" : why);
			r->priv->have_args = 1;
		}
	}
	return 0;
}

static int read_info(struct uft_recording *r, const char *dir)
{
	char *text;
	size_t len;
	int rc = slurp(r, r->priv->dirfd, dir, "info", MAX_TEXT, &text, &len);
	if (rc > 0)
		return rfail(r, ENOENT, "%s: no info file: not a uftrace data directory", dir);
	if (rc)
		return -1;
	uint32_t version = 0;
	uint16_t hsize = 0;
	uint64_t feat = 0;
	if (len >= UFT_HDR_SIZE) {
		memcpy(&version, text + 8, 4);
		memcpy(&hsize, text + 12, 2);
		memcpy(&feat, text + 16, 8);
	}
	if (len < UFT_HDR_SIZE || memcmp(text, UFT_MAGIC, 8))
		rc = rfail(r, EINVAL, "%s/info: not a uftrace data directory (no \"Ftrace!\" header)", dir);
	else if (version != UFT_VERSION)
		rc = rfail(r, ENOTSUP, "%s/info: file version %u (only %u is read)", dir, version,
			   UFT_VERSION);
	else if (text[14] != 1 || text[15] != 2)
		rc = rfail(r, ENOTSUP, "%s/info: not a little-endian 64-bit recording", dir);
	else if (hsize < UFT_HDR_SIZE || hsize > len)
		rc = rfail(r, EINVAL, "%s/info: header size %u", dir, hsize);
	else if (!(feat & F_TASK_SESSION))
		rc = rfail(r, ENOTSUP, "%s/info: no task.txt sessions (an older uftrace's format)", dir);
	r->priv->rel = (feat & F_SYM_REL_ADDR) != 0;
	if (!rc && hsize < len)
		rc = read_arg_specs(r, dir, text + hsize);
	free(text);
	return rc;
}

int uft_load(const char *dir, struct uft_recording *r)
{
	memset(r, 0, sizeof(*r));
	struct uft_names *nm = calloc(1, sizeof(*nm));
	if (!nm)
		return rfail(r, ENOMEM, "%s", strerror(ENOMEM));
	r->priv = nm;
	nm->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (nm->dirfd < 0) {
		int err = errno;
		free(nm);
		r->priv = NULL;
		return rfail(r, err, "%s: %s", dir, strerror(err));
	}
	uint64_t total = 0;
	int rc = read_info(r, dir);
	if (!rc)
		rc = read_tasks(r, dir);
	if (!rc)
		rc = read_events(r, dir);
	size_t kept = 0;
	for (size_t i = 0; i < r->nthreads && !rc; i++)
		if (read_dat(r, dir, &r->threads[i], &total) < 0)
			rc = -1;
	if (!rc) {
		/* No TID.dat (ev still NULL): uftrace shows no such thread either. */
		for (size_t i = 0; i < r->nthreads; i++)
			if (r->threads[i].ev)
				r->threads[kept++] = r->threads[i];
		r->nthreads = kept;
		uint64_t *when = calloc(kept ? kept : 1, sizeof(*when));
		if (!when)
			rc = rfail(r, ENOMEM, "%s", strerror(ENOMEM));
		else
			read_comms(r, dir, when);
		free(when);
		r->err[0] = '\0'; /* read_comms ends on the first missing file */
	}
	for (size_t i = 0; i < r->nthreads && !rc; i++)
		if (!r->thread_names[i] &&
		    !(r->thread_names[i] = strdup(base_name(r->exename ? r->exename : ""))))
			rc = rfail(r, ENOMEM, "%s", strerror(ENOMEM));
	if (!rc && !r->exename && !(r->exename = strdup("")))
		rc = rfail(r, ENOMEM, "%s", strerror(ENOMEM));
	if (rc) {
		char err[sizeof(r->err)];
		int e = errno;
		memcpy(err, r->err, sizeof(err));
		uft_free(r);
		memcpy(r->err, err, sizeof(err));
		errno = e;
		return -1;
	}
	r->names = (struct tf_names){ names_func, names_site, nm, names_sym };
	r->args = nm->have_args ? &nm->args : NULL;
	return 0;
}

void uft_free(struct uft_recording *r)
{
	struct uft_names *nm = r->priv;
	for (size_t i = 0; i < r->nthreads; i++) {
		free((void *)r->threads[i].ev);
		if (r->thread_names)
			free(r->thread_names[i]);
	}
	free(r->threads);
	free(r->thread_names);
	free(r->exename);
	if (nm) {
		for (size_t i = 0; i < nm->nobjs; i++)
			free(nm->objs[i].path);
		for (size_t i = 0; i < nm->nsfs; i++) {
			free(nm->sfs[i]->base);
			free(nm->sfs[i]->syms);
			free(nm->sfs[i]->text);
			free(nm->sfs[i]);
		}
		for (size_t i = 0; i < nm->nevents; i++)
			free(nm->events[i]);
		for (size_t i = 0; i < nm->nowned; i++)
			free(nm->owned[i]);
		if (nm->dirfd >= 0)
			close(nm->dirfd);
		free(nm->sfs);
		free(nm->objs);
		free(nm->events);
		free(nm->cache);
		free(nm->owned);
		argspecs_free(&nm->args);
		argspecs_free(&nm->autos);
		for (size_t i = 0; i < nm->ndbgs; i++)
			free(nm->dbgs[i]);
		free(nm->dbgs);
		free(nm->dbg_lines);
		u64map_free(&nm->dbg_at);
		argspecs_free(&nm->autorules);
		free(nm);
	}
	memset(r, 0, sizeof(*r));
}
