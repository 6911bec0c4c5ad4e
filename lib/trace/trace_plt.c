/* SPDX-License-Identifier: MIT */
/* Library calls in the function graph: each call a traced object makes to
 * another object through a GOT slot (its PLT's JUMP_SLOT slots, and the
 * GLOB_DAT slots of functions that -fno-plt code calls through) becomes a
 * node of the graph, named by the slot's symbol.
 *
 * While tracing, each such slot holds the address of a stub of its own,
 *
 *   movabs $slot_data, %r11 ; jmp *(%r11)      (r11: the PLT's scratch)
 *
 * written into fresh pages made read-only and executable, and never freed
 * or changed (a thread may have read the slot before a stop and enter the
 * stub long after).  The stub's data begins with the address of
 * xp_plt_hook, which saves the argument registers, records the entry
 * (trace_record.c: the same shadow stack and exit trampoline as a traced
 * function, so a callback into traced code nests under the call) and
 * jumps to the function the slot held.
 *
 * The records name a call by its slot's address; the tool names that
 * address from the object's relocations (tools/xprobes/trace_libcall.c).
 *
 * Lazy binding: a slot not resolved yet holds its PLT entry's way to the
 * loader's resolver, which writes the function into the slot when called.
 * So the stub calls that way, and the loader writes over the stub: when
 * such a call returns (or its frame is left by longjmp), the calling
 * thread reads the resolved value, keeps it as the target and puts the
 * stub back (resolved()); a call that leaves no frame (setjmp, vfork), or
 * one of a function that never returns (pthread_exit, exit), has the next
 * library call of any thread do it; every command of the control thread
 * does it for slots resolved by other calls that never returned.
 * A resolution is always the loader's own: no symbol is looked up here.
 *
 * Read-only slots (full RELRO) are written with the page made writable
 * for the moment of the write, then read-only again.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trace.h"
#include "trace_nosse.h"

struct plt_slot {
	void (*hook)(void);        /* first: the stub jumps through it */
	_Atomic uintptr_t target;  /* what the stub calls */
	_Atomic uint32_t kind;     /* enum xp_call_kind */
	uint32_t hooked;           /* control: the slot was given the stub */
	uintptr_t got;             /* the slot */
	uintptr_t stub;
	uintptr_t lazy;            /* the slot's unresolved value, 0 if resolved */
	uintptr_t base;            /* its object's load bias */
	int writable;              /* the slot's page is writable (lazy slots are) */
	int watched;               /* lazy, and its call leaves no frame or never returns */
};

#define STUB_SIZE 16
#define CHUNK 256                 /* slots a chunk: its stubs fill a page */
#define MAX_SLOTS (1u << 15)
#define HASH_CAP (1u << 16)       /* a power of two, twice MAX_SLOTS */

const char *xp_trace_plt_error = "";

static struct plt_slot **slots;   /* every slot ever hooked (control thread) */
static size_t nslots;
static struct plt_slot *free_slot; /* the next unused one of the last chunk */
static size_t free_left;
/* got address -> slot, for the calling threads: entries only ever added. */
static struct plt_slot *_Atomic *hash;
/* Set while slots are hooked; threads that put a stub back after a lazy
 * resolution count themselves in rehooking, so that a stop, once it has
 * cleared live, waits for them before putting slots back. */
static _Atomic int live;
static _Atomic int rehooking;
static int any_lazy; /* a lazy slot was hooked: commands look for resolutions */

/* The hook the stubs jump through: r11 = the slot's data, [rsp] = the
 * return into the caller, rsp = 8 mod 16.  Saves what a call may pass
 * arguments in (rdi rsi rdx rcx r8 r9; rax: the vector count of a
 * variadic call; r10: the static chain); the C code never touches the
 * vector registers.  Jumps to the target through r11, scratch at a PLT.
 *
 * With --requests, a thread with no request open records nothing: a
 * resolved slot's call (kind XP_CALL_HOOK) then goes to its target at
 * once, as the entry hook returns at once (trace_hook.S), before any
 * register is saved.  rax is borrowed for the TLS offset and put back by
 * a pop, which leaves the flags.  Other kinds take the long way, which
 * also runs a pending look at instant slots (a thread with a request
 * open, or the control thread's next command, does it meanwhile). */
_Static_assert(offsetof(struct plt_slot, target) == 8 && offsetof(struct plt_slot, kind) == 16,
	       "xp_plt_hook reads the target and kind at these offsets");
_Static_assert(XP_CALL_HOOK == 0, "xp_plt_hook tests the kind against 0");
__asm__(".pushsection .text\n"
	".globl xp_plt_hook\n"
	".hidden xp_plt_hook\n"
	".type xp_plt_hook, @function\n"
	".p2align 4\n"
	"xp_plt_hook:\n"
	".cfi_startproc\n"
	"cmpb $0, xp_trace_requests_only(%rip)\n"
	"jne 2f\n"
	"1:\n"
	"pushq %rdi\n .cfi_adjust_cfa_offset 8\n"
	"pushq %rsi\n .cfi_adjust_cfa_offset 8\n"
	"pushq %rdx\n .cfi_adjust_cfa_offset 8\n"
	"pushq %rcx\n .cfi_adjust_cfa_offset 8\n"
	"pushq %r8\n .cfi_adjust_cfa_offset 8\n"
	"pushq %r9\n .cfi_adjust_cfa_offset 8\n"
	"pushq %rax\n .cfi_adjust_cfa_offset 8\n"
	"pushq %r10\n .cfi_adjust_cfa_offset 8\n"
	"subq $8, %rsp\n .cfi_adjust_cfa_offset 8\n"
	"movq %r11, %rdi\n"
	"leaq 72(%rsp), %rsi\n"
	"call xp_plt_enter\n"
	"movq %rax, %r11\n"
	"addq $8, %rsp\n .cfi_adjust_cfa_offset -8\n"
	"popq %r10\n .cfi_adjust_cfa_offset -8\n"
	"popq %rax\n .cfi_adjust_cfa_offset -8\n"
	"popq %r9\n .cfi_adjust_cfa_offset -8\n"
	"popq %r8\n .cfi_adjust_cfa_offset -8\n"
	"popq %rcx\n .cfi_adjust_cfa_offset -8\n"
	"popq %rdx\n .cfi_adjust_cfa_offset -8\n"
	"popq %rsi\n .cfi_adjust_cfa_offset -8\n"
	"popq %rdi\n .cfi_adjust_cfa_offset -8\n"
	"jmp *%r11\n"
	"2:\n"
	"pushq %rax\n .cfi_adjust_cfa_offset 8\n"
	"movq xp_trace_request_open@gottpoff(%rip), %rax\n"
	"cmpb $0, %fs:(%rax)\n"
	"popq %rax\n .cfi_adjust_cfa_offset -8\n"
	"jne 1b\n"
	"cmpl $0, 16(%r11)\n"
	"jne 1b\n"
	"jmp *8(%r11)\n"
	".cfi_endproc\n"
	".size xp_plt_hook, . - xp_plt_hook\n"
	".popsection\n");
void xp_plt_hook(void);
uintptr_t xp_plt_enter(struct plt_slot *s, uintptr_t *ret);

/* What runs on the calling threads: general registers only, as in
 * trace_record.c. */
XP_TRACE_NOSSE_BEGIN

static struct plt_slot *find(uintptr_t got)
{
	struct plt_slot *_Atomic *h = hash;
	if (!h)
		return NULL;
	for (size_t i = (size_t)((got >> 3) * 0x9e3779b97f4a7c15ull >> 48) & (HASH_CAP - 1);;
	     i = (i + 1) & (HASH_CAP - 1)) {
		struct plt_slot *s = atomic_load_explicit(&h[i], memory_order_acquire);
		if (!s || s->got == got)
			return s;
	}
}

/* Five bytes at a are a traced function's patch site: a NOP, or a call to
 * a trampoline (jmp *0(%rip) to the hook).  Such a function records
 * itself: a slot that leads to it is left alone, or it would show twice. */
static int traced_entry(uintptr_t a)
{
	const uint8_t *p = (const uint8_t *)a;
	if (xp_trace_site_is_nop(p))
		return 1;
	if (p[0] != XP_TRACE_CALL)
		return 0;
	int32_t rel;
	__builtin_memcpy(&rel, p + 1, 4);
	const uint8_t *t = p + 5 + rel;
	static const uint8_t jmp[6] = { 0xff, 0x25, 0, 0, 0, 0 };
	uintptr_t hook;
	__builtin_memcpy(&hook, t + 6, sizeof(hook));
	return __builtin_memcmp(t, jmp, sizeof(jmp)) == 0 && hook == (uintptr_t)xp_trace_hook_target;
}

/* The loader resolved the lazy slot of s (a call through it returned, its
 * frame was left, or it was an instant call: the resolver wrote the
 * function over the stub).  Keep the function as the target and put the
 * stub back, unless tracing stopped. */
static void resolved(struct plt_slot *s)
{
	enum xp_call_kind k = atomic_load_explicit(&s->kind, memory_order_relaxed);
	if (!s->writable || !s->lazy ||
	    (k != XP_CALL_LAZY &&
	     (k != XP_CALL_INSTANT || atomic_load_explicit(&s->target, memory_order_relaxed) != s->lazy)))
		return;
	atomic_fetch_add(&rehooking, 1);
	if (atomic_load(&live)) {
		_Atomic uintptr_t *slot = (_Atomic uintptr_t *)s->got;
		uintptr_t v = atomic_load_explicit(slot, memory_order_acquire);
		if (v && v != s->stub && v != s->lazy) {
			atomic_store_explicit(&s->target, v, memory_order_release);
			if (traced_entry(v)) {
				atomic_store_explicit(&s->kind, XP_CALL_OFF, memory_order_release);
			} else {
				if (k == XP_CALL_LAZY)
					atomic_store_explicit(&s->kind, XP_CALL_HOOK, memory_order_release);
				atomic_compare_exchange_strong(slot, &v, s->stub);
			}
		}
	}
	atomic_fetch_sub(&rehooking, 1);
}

static void lazy_return(uintptr_t got)
{
	struct plt_slot *s = find(got);
	if (s)
		resolved(s);
}

/* Instant calls (setjmp, vfork...) leave no frame to return through, and
 * calls that never return (never_returns) none that returns: an
 * unresolved one sets pending, and the next library call of any thread
 * (a vfork child's exec included) looks at their slots.  (Another
 * thread's call through the slot between the loader's write and that
 * next call still goes unrecorded.) */
#define MAX_WATCHED 64 /* a few names an object, of the few traced objects */
static struct plt_slot *_Atomic instants[MAX_WATCHED];
static _Atomic unsigned ninstants;
static _Atomic int pending;

static void __attribute__((noinline, cold)) run_pending(void)
{
	atomic_store_explicit(&pending, 0, memory_order_relaxed);
	unsigned n = atomic_load_explicit(&ninstants, memory_order_acquire);
	for (unsigned i = 0; i < n && i < MAX_WATCHED; i++) {
		struct plt_slot *s = atomic_load_explicit(&instants[i], memory_order_acquire);
		if (!s)
			continue;
		resolved(s);
		if (atomic_load_explicit(&s->target, memory_order_relaxed) == s->lazy &&
		    atomic_load((_Atomic uintptr_t *)s->got) != s->stub)
			atomic_store_explicit(&pending, 1, memory_order_relaxed); /* not yet */
	}
}

uintptr_t xp_plt_enter(struct plt_slot *s, uintptr_t *ret)
{
	/* kind before target: a slot resolved meanwhile is made XP_CALL_HOOK
	 * after its target is the function. */
	enum xp_call_kind kind = atomic_load_explicit(&s->kind, memory_order_acquire);
	uintptr_t target = atomic_load_explicit(&s->target, memory_order_acquire);
	if (__builtin_expect(atomic_load_explicit(&pending, memory_order_relaxed), 0))
		run_pending();
	if (__builtin_expect(target == s->lazy, 0) && s->watched)
		atomic_store_explicit(&pending, 1, memory_order_relaxed);
	xp_trace_enter_call(s->got, ret, kind);
	return target;
}

XP_TRACE_NOSSE_END

/* ---- the control thread's side (xp_agent.lock held) ---------------- */

static uintptr_t page_size(void)
{
	return (uintptr_t)sysconf(_SC_PAGESIZE);
}

/* The protections of the process's mappings, from /proc/self/maps. */
struct prot_map {
	struct { uintptr_t start, end; int prot; } *v;
	size_t n;
};

static void prot_map_free(struct prot_map *m)
{
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

static int prot_map_read(struct prot_map *m)
{
	m->v = NULL;
	m->n = 0;
	FILE *f = xp_fault() ? NULL : fopen("/proc/self/maps", "re");
	if (!f)
		return -errno ? -errno : -EIO;
	char line[512];
	size_t cap = 0;
	int rc = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end;
		char perm[5];
		if (sscanf(line, "%lx-%lx %4s", &start, &end, perm) != 3)
			continue;
		if (m->n == cap) {
			size_t ncap = cap ? 2 * cap : 256;
			void *grown = xp_realloc(m->v, ncap * sizeof(*m->v));
			if (!grown) {
				rc = -ENOMEM;
				break;
			}
			m->v = grown;
			cap = ncap;
		}
		m->v[m->n].start = start;
		m->v[m->n].end = end;
		m->v[m->n].prot = (perm[0] == 'r' ? PROT_READ : 0) | (perm[1] == 'w' ? PROT_WRITE : 0) |
				  (perm[2] == 'x' ? PROT_EXEC : 0);
		m->n++;
		if (!strchr(line, '\n')) { /* a long path: skip the rest of the line */
			int c;
			while ((c = fgetc(f)) != EOF && c != '\n')
				;
		}
	}
	fclose(f);
	if (rc)
		prot_map_free(m);
	return rc;
}

/* The protection of the page holding a, -1 if unmapped. */
static int prot_of(const struct prot_map *m, uintptr_t a)
{
	for (size_t i = 0; i < m->n; i++)
		if (a >= m->v[i].start && a < m->v[i].end)
			return m->v[i].prot;
	return -1;
}

/* Compare and exchange one slot.  A read-only page is made writable for
 * the moment of the write and read-only again; its protection is never
 * left changed.  1 exchanged, 0 the slot held something else, < 0 an
 * errno (nothing changed). */
static int slot_cas(const struct prot_map *m, uintptr_t got, uintptr_t expect, uintptr_t val)
{
	_Atomic uintptr_t *slot = (_Atomic uintptr_t *)got;
	int prot = prot_of(m, got);
	if (prot < 0 || !(prot & PROT_READ))
		return -EFAULT;
	if (atomic_load(slot) != expect)
		return 0;
	if (prot & PROT_WRITE)
		return atomic_compare_exchange_strong(slot, &expect, val);
	uintptr_t page = got & ~(page_size() - 1);
	if (xp_fault() || mprotect((void *)page, page_size(), prot | PROT_WRITE) != 0)
		return errno ? -errno : -EPERM;
	int done = atomic_compare_exchange_strong(slot, &expect, val);
	if (mprotect((void *)page, page_size(), prot) != 0) {
		/* Cannot happen (the same range, a protection it had); say so
		 * rather than leave a writable GOT unsaid. */
		xp_trace_plt_error = "a GOT page made writable could not be made read-only again";
		return -EIO;
	}
	return done;
}

/* A new slot record and its stub. */
static struct plt_slot *slot_new(void)
{
	if (nslots >= MAX_SLOTS)
		return NULL;
	if (!hash) {
		void *h = xp_fault() ? MAP_FAILED :
			mmap(NULL, HASH_CAP * sizeof(*hash), PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (h == MAP_FAILED)
			return NULL;
		hash = h;
	}
	if (!free_left) {
		size_t pg = page_size();
		size_t dlen = (CHUNK * sizeof(struct plt_slot) + pg - 1) & ~(pg - 1);
		struct plt_slot *d = xp_fault() ? MAP_FAILED :
			mmap(NULL, dlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint8_t *code = xp_fault() ? MAP_FAILED :
			mmap(NULL, CHUNK * STUB_SIZE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (d == MAP_FAILED || code == MAP_FAILED) {
			if (d != MAP_FAILED)
				munmap(d, dlen);
			if (code != MAP_FAILED)
				munmap(code, CHUNK * STUB_SIZE);
			return NULL;
		}
		for (size_t i = 0; i < CHUNK; i++) {
			uint8_t *p = code + i * STUB_SIZE;
			uint64_t data = (uintptr_t)&d[i];
			p[0] = 0x49, p[1] = 0xbb; /* movabs imm64, %r11 */
			memcpy(p + 2, &data, 8);
			p[10] = 0x41, p[11] = 0xff, p[12] = 0x23; /* jmp *(%r11) */
			memset(p + 13, 0xcc, STUB_SIZE - 13);
			d[i].hook = xp_plt_hook;
			d[i].stub = (uintptr_t)p;
		}
		if (xp_fault() || mprotect(code, CHUNK * STUB_SIZE, PROT_READ | PROT_EXEC) != 0) {
			munmap(d, dlen);
			munmap(code, CHUNK * STUB_SIZE);
			return NULL;
		}
		free_slot = d;
		free_left = CHUNK;
	}
	struct plt_slot **grown = xp_realloc(slots, (nslots + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	slots = grown;
	free_left--;
	return slots[nslots++] = free_slot++;
}

/* The slot record of got, made (and entered in the hash) if new. */
static struct plt_slot *slot_for(uintptr_t got)
{
	struct plt_slot *s = find(got);
	if (s)
		return s;
	if (!(s = slot_new()))
		return NULL;
	s->got = got;
	size_t i = (size_t)((got >> 3) * 0x9e3779b97f4a7c15ull >> 48) & (HASH_CAP - 1);
	while (atomic_load_explicit(&hash[i], memory_order_relaxed))
		i = (i + 1) & (HASH_CAP - 1);
	atomic_store_explicit(&hash[i], s, memory_order_release);
	return s;
}

/* What is done with calls to a function, by its name. */
static enum xp_call_kind kind_of(const char *name)
{
	/* Left alone: the program's start and end, the unwinder and C++'s
	 * exception entry points (an unwinder walking through a hooked
	 * return would stop; the agent's interposers handle the unwinding of
	 * traced frames), profiling hooks, and what takes its caller's
	 * address as an argument (dlopen and dlsym look at their return
	 * address to pick the caller's object). */
	static const char *const off[] = {
		"__libc_start_main", "__cxa_finalize", "_mcleanup", "__gmon_start__",
		"__cxa_throw", "__cxa_rethrow", "__cxa_begin_catch", "__cxa_end_catch",
		"_Unwind_Resume", "_Unwind_RaiseException", "_Unwind_Resume_or_Rethrow",
		"mcount", "_mcount", "__fentry__", "__cyg_profile_func_enter",
		"__cyg_profile_func_exit", "dlopen", "dlmopen", "dlsym", "dlvsym",
	};
	/* Return twice (their return address must not change), or never
	 * return but elsewhere in the stack (the frames longjmp leaves are
	 * closed when the stack shows it, trace_record.c): a node of no
	 * length. */
	static const char *const instant[] = {
		"setjmp", "_setjmp", "sigsetjmp", "__sigsetjmp", "vfork", "getcontext",
		"savectx", "longjmp", "_longjmp", "siglongjmp", "__longjmp_chk",
	};
	for (size_t i = 0; i < sizeof(off) / sizeof(*off); i++)
		if (!strcmp(name, off[i]))
			return XP_CALL_OFF;
	for (size_t i = 0; i < sizeof(instant) / sizeof(*instant); i++)
		if (!strcmp(name, instant[i]))
			return XP_CALL_INSTANT;
	return XP_CALL_HOOK;
}

/* Recorded as any call, but their frame is left only when the thread or
 * the process ends: a lazy slot of one is watched as an instant call's is
 * (without it, the first call's resolution stayed in the slot, and every
 * later call, the pthread_exit of each other thread, went unrecorded). */
static int never_returns(const char *name)
{
	static const char *const names[] = {
		"exit", "_exit", "_Exit", "quick_exit", "pthread_exit", "thrd_exit", "abort",
		"__assert_fail", "__stack_chk_fail", "err", "errx", "verr", "verrx",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (!strcmp(name, names[i]))
			return 1;
	return 0;
}

struct scan {
	struct prot_map map;
	int rc;
	size_t hooked;
	const uintptr_t *only; /* sorted; NULL: every slot */
	size_t nonly;
};

/* v points into an executable segment of the object. */
static int in_text(const struct dl_phdr_info *info, uintptr_t v, size_t len)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && v >= lo &&
		    v + len <= lo + ph->p_memsz)
			return 1;
	}
	return 0;
}

/* A JUMP_SLOT slot's value is its PLT entry's way to the resolver (not
 * resolved yet): `push $index` (after an endbr64 in an IBT PLT) in the
 * object's own text. */
static int unresolved(const struct dl_phdr_info *info, uintptr_t v, size_t index)
{
	if (!in_text(info, v, 9))
		return 0;
	const uint8_t *p = (const uint8_t *)v;
	if (p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa)
		p += 4;
	uint32_t imm;
	memcpy(&imm, p + 1, 4);
	return p[0] == 0x68 && imm == index;
}

static int cmp_ulong(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
	return x < y ? -1 : x > y;
}

/* Hook one slot: got, of symbol sym (index: its JUMP_SLOT number, or -1). */
static void hook_slot(struct scan *sc, const struct dl_phdr_info *info, uintptr_t got,
		      const char *name, long index)
{
	enum xp_call_kind kind = kind_of(name);
	if (kind == XP_CALL_OFF ||
	    (sc->only && !bsearch(&got, sc->only, sc->nonly, sizeof(got), cmp_ulong)))
		return;
	int prot = prot_of(&sc->map, got);
	if (prot < 0 || !(prot & PROT_READ))
		return;
	uintptr_t v = atomic_load((_Atomic uintptr_t *)got);
	if (!v)
		return; /* a weak function nobody defines */
	struct plt_slot *s = find(got);
	if (s && s->hooked && v == s->stub)
		return; /* hooked already (a library loaded while tracing: again) */
	int lazy = index >= 0 && unresolved(info, v, (size_t)index);
	if (!lazy && traced_entry(v))
		return; /* a traced function: it records itself */
	if (!s && !(s = slot_for(got))) {
		if (!sc->rc)
			sc->rc = -ENOMEM;
		return;
	}
	s->base = info->dlpi_addr;
	s->writable = !!(prot & PROT_WRITE);
	s->lazy = lazy ? v : 0;
	s->watched = lazy && (kind == XP_CALL_INSTANT || never_returns(name));
	atomic_store_explicit(&s->target, v, memory_order_release);
	atomic_store_explicit(&s->kind, lazy && kind == XP_CALL_HOOK ? XP_CALL_LAZY : kind,
			      memory_order_release);
	int rc = slot_cas(&sc->map, got, v, s->stub);
	if (rc == 1) {
		s->hooked = 1;
		sc->hooked++;
		any_lazy |= lazy;
		unsigned n = atomic_load(&ninstants);
		int known = 0;
		for (unsigned i = 0; i < n; i++)
			known |= atomic_load(&instants[i]) == s;
		if (s->watched && !known && n < MAX_WATCHED) {
			atomic_store(&instants[n], s);
			atomic_store(&ninstants, n + 1);
		}
	} else if (rc < 0 && !sc->rc) {
		sc->rc = rc;
	}
}

/* The dynamic section's address d_ptr: the loader adjusts some in place
 * by the load bias, not all (a read-only dynamic section). */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, uintptr_t p)
{
	return p < info->dlpi_addr ? p + info->dlpi_addr : p;
}

static int traced_base(uintptr_t base)
{
	for (size_t i = 0; i < xp_trace_nobjects; i++)
		if (xp_trace_objects[i]->base == base)
			return 1;
	return 0;
}

/* Runs inside dl_iterate_phdr: the object stays loaded meanwhile. */
static int hook_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct scan *sc = arg;
	if (!traced_base(info->dlpi_addr))
		return 0;
	const ElfW(Dyn) *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	if (!dyn)
		return 0;
	uintptr_t jmprel = 0, rela = 0, symtab = 0, strtab = 0;
	size_t pltsz = 0, relasz = 0, relaent = sizeof(ElfW(Rela)), syment = sizeof(ElfW(Sym));
	long pltrel = DT_RELA;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_JMPREL: jmprel = dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_PLTRELSZ: pltsz = dyn->d_un.d_val; break;
		case DT_PLTREL: pltrel = (long)dyn->d_un.d_val; break;
		case DT_RELA: rela = dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_RELASZ: relasz = dyn->d_un.d_val; break;
		case DT_RELAENT: relaent = dyn->d_un.d_val; break;
		case DT_SYMTAB: symtab = dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_STRTAB: strtab = dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_SYMENT: syment = dyn->d_un.d_val; break;
		default: break;
		}
	}
	if (!symtab || !strtab || relaent < sizeof(ElfW(Rela)) || syment < sizeof(ElfW(Sym)))
		return 0;
	if (pltrel != DT_RELA)
		jmprel = 0;
	size_t njump = jmprel ? pltsz / sizeof(ElfW(Rela)) : 0;
	/* The symbols the PLT calls: a GLOB_DAT slot of one of them holds its
	 * address for the program's pointers (&f), not its calls. */
	unsigned long *called = njump ? xp_realloc(NULL, njump * sizeof(*called)) : NULL;
	if (njump && !called) {
		if (!sc->rc)
			sc->rc = -ENOMEM;
		return 1;
	}
	for (size_t i = 0; i < njump; i++) {
		const ElfW(Rela) *r = (const ElfW(Rela) *)jmprel + i;
		called[i] = ELF64_R_SYM(r->r_info);
		if (ELF64_R_TYPE(r->r_info) != R_X86_64_JUMP_SLOT)
			continue;
		const ElfW(Sym) *sym = (const ElfW(Sym) *)(symtab + ELF64_R_SYM(r->r_info) * syment);
		hook_slot(sc, info, info->dlpi_addr + r->r_offset, (const char *)strtab + sym->st_name,
			  (long)i);
	}
	if (njump)
		qsort(called, njump, sizeof(*called), cmp_ulong);
	/* -fno-plt calls: GLOB_DAT slots of functions defined elsewhere. */
	for (size_t i = 0; rela && i < relasz / relaent; i++) {
		const ElfW(Rela) *r = (const ElfW(Rela) *)(rela + i * relaent);
		if (ELF64_R_TYPE(r->r_info) != R_X86_64_GLOB_DAT)
			continue;
		unsigned long si = ELF64_R_SYM(r->r_info);
		const ElfW(Sym) *sym = (const ElfW(Sym) *)(symtab + si * syment);
		int type = ELF64_ST_TYPE(sym->st_info);
		if (sym->st_shndx != SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    (njump && bsearch(&si, called, njump, sizeof(*called), cmp_ulong)))
			continue;
		hook_slot(sc, info, info->dlpi_addr + r->r_offset, (const char *)strtab + sym->st_name, -1);
	}
	free(called);
	return 0;
}

static size_t nhooked;

size_t xp_trace_plt_hooked(void)
{
	return nhooked;
}

int xp_trace_plt_on(const uintptr_t *gots, size_t ngots)
{
	struct scan sc = { .rc = 0, .only = gots, .nonly = ngots };
	xp_trace_plt_error = "";
	xp_trace_lazy_return = lazy_return;
	int rc = prot_map_read(&sc.map);
	if (rc)
		return rc;
	atomic_store(&live, 1);
	dl_iterate_phdr(hook_object, &sc);
	prot_map_free(&sc.map);
	nhooked += sc.hooked;
	if (sc.rc) {
		if (!*xp_trace_plt_error)
			xp_trace_plt_error = sc.rc == -ENOMEM ? "out of memory for the library call stubs"
							      : "a GOT slot could not be written";
		xp_trace_plt_off();
	}
	return sc.rc;
}

/* got lies in a writable segment of the object: its slot is still there
 * (an object loaded at the same address since has its own). */
static int slot_in(const struct dl_phdr_info *info, const struct plt_slot *s)
{
	if (s->base != info->dlpi_addr)
		return 0;
	for (int k = 0; k < info->dlpi_phnum; k++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W) && s->got >= lo &&
		    s->got + 8 <= lo + ph->p_memsz)
			return 1;
	}
	return 0;
}

/* Runs inside dl_iterate_phdr: slots of an object still loaded are put back. */
static int unhook_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct scan *sc = arg;
	for (size_t i = 0; i < nslots; i++) {
		struct plt_slot *s = slots[i];
		if (!s->hooked || !slot_in(info, s))
			continue;
		s->hooked = 2; /* seen: its object is loaded */
		int rc = slot_cas(&sc->map, s->got, s->stub,
				  atomic_load_explicit(&s->target, memory_order_acquire));
		if (rc >= 0)
			s->hooked = 0; /* put back, or the loader wrote it meanwhile */
		else if (!sc->rc)
			sc->rc = rc;
	}
	return 0;
}

int xp_trace_plt_off(void)
{
	struct scan sc = { .rc = 0 };
	atomic_store(&live, 0);
	/* Threads putting a stub back after a lazy resolution saw live set;
	 * let them finish (a few instructions) before the slots go back. */
	for (int i = 0; atomic_load(&rehooking) && i < 100000; i++)
		sched_yield();
	int rc = prot_map_read(&sc.map);
	if (rc)
		return rc;
	dl_iterate_phdr(unhook_object, &sc);
	prot_map_free(&sc.map);
	/* Slots not seen went with their objects; those that could not be
	 * written stay hooked, for the next stop. */
	nhooked = 0;
	for (size_t i = 0; i < nslots; i++) {
		slots[i]->hooked = slots[i]->hooked == 2;
		nhooked += slots[i]->hooked;
	}
	if (sc.rc && !*xp_trace_plt_error)
		xp_trace_plt_error = "a GOT slot could not be written back";
	return sc.rc;
}

static int resync_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	for (size_t i = 0; i < nslots; i++) /* resolved(): as lazy_return without the look-up */
		if (slots[i]->hooked && slots[i]->lazy && slot_in(info, slots[i]))
			resolved(slots[i]);
	return 0;
}

void xp_trace_plt_resync(void)
{
	if (!atomic_load(&live) || !any_lazy)
		return;
	dl_iterate_phdr(resync_object, NULL);
}
