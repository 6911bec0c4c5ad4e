/* SPDX-License-Identifier: MIT */
/* The function-graph tracer's recorder: what the entry hook and
 * the exit trampoline (trace_hook.S) call, and the control thread's side
 * of the per-thread buffers.
 *
 * Hot path rules: the hook runs inside any traced function, maybe in a
 * signal handler, with the vector registers unsaved.  So this file never
 * touches SSE/x87 (checked: objdump shows no xmm), never calls malloc or
 * anything that may lock, and finds its thread through one initial-exec
 * TLS pointer.  A thread's state and shadow stack (one mmap) and its
 * buffer (another) are made on its first traced call.
 *
 * Who writes what: each thread alone writes its state and buffer (single
 * writer; a buffer is never emptied by anyone else: `trace clear` bumps a
 * generation and each thread empties its own buffer when it next records).
 * The control thread, under xp_agent.lock, writes the configuration and
 * frees the state of threads that no longer exist.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "trace.h"
#include "trace_nosse.h"

/* Everything below compiles to general-register code only (trace_nosse.h). */
XP_TRACE_NOSSE_BEGIN

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
/* Against the thread's own signal handlers: the compiler must not move
 * stores across these (the CPU keeps a thread's order for itself). */
#define barrier() atomic_signal_fence(memory_order_seq_cst)

/* One shadow stack frame: a return address we replaced. */
struct frame {
	uintptr_t slot;  /* where it was on the machine stack */
	uintptr_t ret;   /* what it was (a tail call: the frame below's) */
	uintptr_t func;
	uint32_t flags;
	uint32_t gen;    /* the clear generation of its entry record */
};
#define F_TAIL 1u  /* tail-called: returns with the frame below it */
#define F_REC 2u   /* its entry is recorded (its exit will be) */
#define F_LOST 4u  /* its entry was dropped (buffer full): so is its exit */
#define F_UNHOOKED 8u /* its return address put back while an exception unwinds */
#define F_LAZY 16u /* a library call through a slot the loader had not resolved */
#define F_RET 32u  /* recorded, with return items (trace args): its exit carries them */
/* Bits 8-15: records kept for the exit beyond its own (F_RET's payload). */
#define F_RESERVE_SHIFT 8
#define F_RESERVE(f) (1u + (((f)->flags >> F_RESERVE_SHIFT) & 0xffu))

struct xp_trace_thread {
	int busy;                   /* inside enter/exit (a signal handler's calls pass) */
	int selected;               /* -T */
	uint32_t depth, nframes;    /* shadow stack use, size */
	uint32_t max_depth;         /* -D, or UINT32_MAX */
	uint32_t depth_base;        /* depth 0 of -D: the request's begin, else 0 */
	uint32_t gen;               /* the clear generation its buffer holds */
	uint32_t open;              /* recorded frames whose exits have room kept */
	uint64_t epoch;             /* the value of `epoch` last acted on */
	uint64_t head;              /* = buf->head, kept here to avoid reading it */
	uint64_t limit;             /* head may reach this: tail + cap as last read, or no limit */
	uint64_t cap;               /* = buf->cap */
	uint64_t pos;               /* head % cap, where the next record goes */
	uint64_t unreported;        /* records dropped since the last LOST record */
	struct frame *stack;
	struct xp_trace_buf *_Atomic buf;
	struct xp_trace_buf *_Atomic retired; /* replaced by a bigger one; freed by control */
	_Atomic uint64_t overruns;  /* calls not followed: shadow stack full */
	int32_t tid;
	int exited;                 /* control thread only */
	struct xp_trace_buf *ahead_buf; /* control thread only: the buffer it */
	size_t ahead;               /* has faulted in, and how far (bytes), */
	uint64_t ahead_head;        /* and its head then */
	size_t map_len;
	uint32_t ring_start;        /* start_count when its ring was made (a follower's) */
	struct xp_trace_thread *next; /* the registry */
	/* Request-scoped recording (trace start --requests): open between
	 * xp_trace_request_begin and _end; what the ring was at the begin,
	 * to drop back to; req_e and req_cancel: the epoch and the cancel
	 * count it opened under (either changed: it is dropped). */
	int req_open;
	uint32_t req_gen, req_cancel;
	uint64_t req_e, req_head, req_unreported, req_lost, req_tsc;
	/* An entry's or exit's payload (trace args), and room to read 8
	 * bytes past its end. */
	uint8_t argbuf[XP_TRACE_ARG_MAX_BYTES + XP_TRACE_ARG_SLACK];
};

/* Bit 0: tracing on.  Counts up by 2 on every start, stop and clear, so
 * that one load tells a thread both whether to record and whether its
 * copy of the configuration is current. */
static _Atomic uint64_t epoch;
static _Atomic uint32_t clear_gen = 1;
/* Written by the control thread before epoch changes; read by threads
 * after they see it change (a read torn by a later start is redone, as
 * epoch changes again after it). */
static struct {
	uint32_t buf_kib, max_depth;
	uint32_t overwrite;
	uint32_t budget_kib;
	uint32_t ntids;
	int32_t tids[XP_TRACE_MAX_TIDS];
	uint32_t requests; /* --requests: only threads with a request open record */
} cfg = { 1024, 0, 0, 0, 0, { 0 }, 0 };
static uint64_t start_tsc, start_ns;

uint32_t xp_trace_shadow_frames = 8192;

static struct xp_trace_thread *_Atomic registry;
static __thread struct xp_trace_thread *self __attribute__((tls_model("initial-exec")));
/* Read by the entry hook (trace_hook.S) before it saves a register: with
 * --requests (xp_trace_requests_only), a thread whose request_open byte
 * is 0 returns from the hook at once.  request_open mirrors req_open of
 * the thread's own state; both are written by the thread alone. */
uint8_t xp_trace_requests_only;
__thread uint8_t xp_trace_request_open __attribute__((tls_model("initial-exec")));
/* Stands in for a thread's state while it is being made: busy, so a
 * signal handler's traced calls meanwhile pass through. */
static struct xp_trace_thread making = { .busy = 1 };
/* The agent's own threads, from their first instruction on: always busy,
 * so none of their calls (an application's traced malloc, a module's
 * code) is ever recorded, and they never get a buffer. */
static struct xp_trace_thread agent_thread = { .busy = 1 };

void xp_trace_thread_exclude(void)
{
	self = &agent_thread;
}

static inline uint64_t tsc(void)
{
	return __builtin_ia32_rdtsc();
}

static size_t page_round(size_t n)
{
	size_t pg = 4096;
	return (n + pg - 1) & ~(pg - 1);
}

static void *map(size_t len)
{
	int saved = errno; /* a traced function may be about to read it */
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	errno = saved;
	return p == MAP_FAILED ? NULL : p;
}

static void unmap(void *p, size_t len)
{
	int saved = errno;
	munmap(p, len);
	errno = saved;
}

static size_t buf_len(uint64_t cap)
{
	return page_round(sizeof(struct xp_trace_buf) + cap * sizeof(struct xp_trace_rec));
}

static __attribute__((noinline, cold)) struct xp_trace_thread *thread_new(void)
{
	/* The caller read self as NULL; a signal handler that ran since then
	 * and made a traced call has made this thread's state itself.  Two
	 * states for one thread would split its records over two buffers of
	 * the same tid (a reader keeps one: the handler's calls without the
	 * thread's own, as a signal storm test showed now and then).  One
	 * locked compare-exchange: a handler runs before it or after it,
	 * never inside, and after it sees `making`, busy. */
	struct xp_trace_thread *had = NULL;
	if (!__atomic_compare_exchange_n(&self, &had, &making, 0, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return had == &making || had == &agent_thread ? NULL : had;
	size_t len = page_round(sizeof(struct xp_trace_thread) +
				(size_t)xp_trace_shadow_frames * sizeof(struct frame));
	struct xp_trace_thread *t = map(len); /* zeroed */
	if (!t) {
		self = NULL; /* try again on a later call */
		return NULL;
	}
	t->stack = (struct frame *)(t + 1);
	t->nframes = xp_trace_shadow_frames;
	t->map_len = len;
	t->tid = (int32_t)syscall(SYS_gettid);
	t->max_depth = UINT32_MAX;
	struct xp_trace_thread *head = atomic_load_explicit(&registry, memory_order_relaxed);
	do
		t->next = head;
	while (!atomic_compare_exchange_weak_explicit(&registry, &head, t, memory_order_release,
						      memory_order_relaxed));
	self = t;
	return t;
}

static uint64_t kib_cap(uint32_t kib)
{
	return (uint64_t)kib * 1024 / sizeof(struct xp_trace_rec);
}

/* Buffers made by the control thread at `trace start`, for the threads
 * that will trace (the mmap, and its memory map entry, off their path).
 * Only their first pages are faulted in then, and the rest as the ring
 * fills, a little ahead of its writer (xp_trace_record_ahead): a
 * buffer's memory is the target's, charged to its memory cgroup, and
 * faulting every thread's whole ring in at the start (as before) made the
 * recording what killed an 8-thread program in a 300 MiB cgroup.  Huge
 * pages where the kernel gives them.  A slot is taken by exchanging it
 * with NULL, by a thread or by the control thread emptying the pool:
 * whoever gets it owns it. */
#define POOL 16
static struct xp_trace_buf *_Atomic pool[POOL];

/* Every thread's buffer, the pool's included, counts against the -B
 * budget: a buffer that would pass it is made smaller, down to MIN_CAP
 * records, and below that not at all (its thread's records are dropped
 * and counted in unbuffered).  Lock-free: threads make their own. */
#define MIN_CAP 4096u
static _Atomic uint64_t buf_bytes, unbuffered;

static struct xp_trace_buf *buf_map(uint64_t cap)
{
	size_t len = buf_len(cap);
	uint64_t budget = (uint64_t)__atomic_load_n(&cfg.budget_kib, __ATOMIC_RELAXED) * 1024;
	uint64_t used = atomic_fetch_add_explicit(&buf_bytes, len, memory_order_relaxed) + len;
	struct xp_trace_buf *b = NULL;
	uint32_t shared = 0;
	if (!budget || used <= budget) {
		/* A follower's ring, else a private one. */
		b = xp_trace_follow_map(len);
		shared = b ? XP_TRACE_BUF_SHARED : 0;
		if (!b && (b = map(len))) {
			int saved = errno;
			madvise(b, len, MADV_HUGEPAGE); /* best effort */
			errno = saved;
		}
	}
	if (!b) {
		atomic_fetch_sub_explicit(&buf_bytes, len, memory_order_relaxed);
		return NULL;
	}
	b->cap = cap;
	b->flags = shared;
	return b;
}

static void buf_unmap(struct xp_trace_buf *b)
{
	size_t len = buf_len(b->cap);
	unmap(b, len);
	atomic_fetch_sub_explicit(&buf_bytes, len, memory_order_relaxed);
}

uint64_t xp_trace_record_unbuffered(void)
{
	return atomic_load_explicit(&unbuffered, memory_order_relaxed);
}

static struct xp_trace_buf *buf_new(int32_t tid, uint32_t kib)
{
	uint64_t cap = kib_cap(kib);
	struct xp_trace_buf *b = NULL;
	for (int i = 0; i < POOL && !b; i++)
		if (atomic_load_explicit(&pool[i], memory_order_relaxed))
			b = atomic_exchange_explicit(&pool[i], NULL, memory_order_acquire);
	if (b && b->cap != cap) { /* left from another start: not ours to size */
		buf_unmap(b);
		b = NULL;
	}
	for (uint64_t c = cap; !b; c /= 2) {
		if ((b = buf_map(c)))
			cap = c;
		else if (c / 2 < MIN_CAP)
			break;
	}
	if (!b)
		return NULL;
	b->version = XP_TRACE_BUF_VERSION;
	b->tid = tid;
	b->cap = cap;
	/* So that a reader can name a thread that has ended by the time it
	 * looks (a reader of a live one asks /proc for its current name). */
	int saved = errno;
	if (prctl(PR_GET_NAME, b->comm, 0, 0, 0) != 0)
		b->comm[0] = '\0';
	b->comm[sizeof(b->comm) - 1] = '\0';
	errno = saved;
	/* Last: a follower maps a ring as soon as it is made (a spare, or
	 * this one), and takes it as its thread's once the magic is there. */
	__atomic_store_n(&b->magic, XP_TRACE_BUF_MAGIC, __ATOMIC_RELEASE);
	return b;
}

static int tid_selected(int32_t tid)
{
	uint32_t n = __atomic_load_n(&cfg.ntids, __ATOMIC_RELAXED);
	if (n == 0)
		return 1;
	for (uint32_t i = 0; i < n && i < XP_TRACE_MAX_TIDS; i++)
		if (__atomic_load_n(&cfg.tids[i], __ATOMIC_RELAXED) == tid)
			return 1;
	return 0;
}

/* The configuration or the generation changed since t last looked. */
/* Starts so far.  Each start connects to its follower anew, or stops
 * following (trace_commands.c): a follower's ring made before the last
 * start went to a recorder that is gone, and nobody would drain it. */
static _Atomic uint32_t start_count;

static void __attribute__((noinline, cold)) refresh(struct xp_trace_thread *t, uint64_t e)
{
	uint32_t g = atomic_load_explicit(&clear_gen, memory_order_acquire);
	uint32_t kib = __atomic_load_n(&cfg.buf_kib, __ATOMIC_RELAXED);
	uint32_t d = __atomic_load_n(&cfg.max_depth, __ATOMIC_RELAXED);
	t->selected = tid_selected(t->tid);
	t->max_depth = d ? d : UINT32_MAX;
	if (!t->req_open)
		t->depth_base = 0;
	struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_relaxed);
	if (t->gen != g) {
		/* Cleared: start the buffer again (frames still open keep
		 * their exits out of it, by generation), and only then say
		 * it holds the new generation. */
		t->head = 0;
		t->pos = 0;
		t->open = 0;
		t->unreported = 0;
		atomic_store_explicit(&t->overruns, 0, memory_order_relaxed);
		if (b) {
			atomic_store_explicit(&b->head, 0, memory_order_release);
			atomic_store_explicit(&b->tail, 0, memory_order_relaxed);
			atomic_store_explicit(&b->lost, 0, memory_order_relaxed);
		}
		if (b && b->cap != kib_cap(kib) && t->selected) {
			struct xp_trace_buf *nb = buf_new(t->tid, kib);
			if (nb) {
				struct xp_trace_buf *old =
					atomic_exchange_explicit(&t->retired, b, memory_order_acq_rel);
				if (old) /* control has not freed the last one: keep it */
					atomic_store_explicit(&t->retired, old, memory_order_release);
				atomic_store_explicit(&t->buf, nb, memory_order_release);
				b = nb;
			}
		}
		__atomic_store_n(&t->gen, g, __ATOMIC_RELEASE);
	}
	uint32_t starts = atomic_load_explicit(&start_count, memory_order_relaxed);
	int stale = b && (b->flags & XP_TRACE_BUF_SHARED) && t->ring_start != starts;
	if (stale && t->selected && !atomic_load_explicit(&t->retired, memory_order_acquire)) {
		/* A new ring (this start's follower's, if any), from its start;
		 * the old one is retired for the control thread to free (it
		 * may be faulting it in). */
		struct xp_trace_buf *nb = buf_new(t->tid, kib);
		if (nb) {
			atomic_store_explicit(&t->retired, b, memory_order_release);
			atomic_store_explicit(&t->buf, nb, memory_order_release);
			b = nb;
			t->head = 0;
			stale = 0;
		}
	}
	if (t->selected && !b)
		atomic_store_explicit(&t->buf, b = buf_new(t->tid, kib), memory_order_release);
	if (!stale) /* else tried again at the next refresh */
		t->ring_start = starts;
	if (b) {
		int over = __atomic_load_n(&cfg.overwrite, __ATOMIC_RELAXED);
		b->flags = (b->flags & ~XP_TRACE_BUF_OVERWRITE) | (over ? XP_TRACE_BUF_OVERWRITE : 0);
		t->cap = b->cap;
		t->pos = t->head % b->cap;
		t->limit = over ? UINT64_MAX
				: atomic_load_explicit(&b->tail, memory_order_acquire) + b->cap;
		/* Records went since the last LOST record (before a stop, say):
		 * the next record must say so first, so no record slips in
		 * ahead of the marker.  room_again writes it. */
		if (!over && t->unreported)
			t->limit = 0;
	}
	t->epoch = e;
}

static inline void emit(struct xp_trace_thread *t, struct xp_trace_buf *b, uint64_t time,
			enum xp_trace_kind kind, uintptr_t addr)
{
	uint64_t h = t->head, p = t->pos;
	b->rec[p].time = time << 2 | (uint64_t)kind;
	b->rec[p].addr = addr;
	t->pos = p + 1 == t->cap ? 0 : p + 1;
	t->head = h + 1;
	/* A request's records stay above the published head until its end
	 * keeps them: a reader never copies what may yet be dropped. */
	if (likely(!t->req_open))
		atomic_store_explicit(&b->head, h + 1, memory_order_release);
}

struct __attribute__((packed, may_alias)) unaligned_word {
	uint64_t v;
};

/* Records a payload of n bytes takes (its header included), 0 for none. */
static inline uint64_t payload_recs(size_t n)
{
	return n ? 1 + (n + XP_TRACE_ARG_DATA_BYTES - 1) / XP_TRACE_ARG_DATA_BYTES : 0;
}

/* trace args: the payload in t->argbuf after an entry or exit (trace.h). */
static __attribute__((noinline)) void emit_payload(struct xp_trace_thread *t,
						   struct xp_trace_buf *b, uint64_t now, size_t n)
{
	emit(t, b, now, XP_TRACE_LOST, XP_TRACE_LABEL | XP_TRACE_LABEL_ARGS | n);
	const uint8_t *p = t->argbuf;
	const uint64_t low7 = (UINT64_C(1) << 56) - 1;
	for (size_t off = 0; off < n; off += XP_TRACE_ARG_DATA_BYTES) {
		/* Two unaligned loads of 7 bytes each; past n, zeros. */
		size_t left = n - off;
		uint64_t lo = ((const struct unaligned_word *)(p + off))->v & low7;
		uint64_t hi = ((const struct unaligned_word *)(p + off + 7))->v & low7;
		if (left < 7)
			lo &= (UINT64_C(1) << (8 * left)) - 1;
		if (left < 14)
			hi = left <= 7 ? 0 : hi & ((UINT64_C(1) << (8 * (left - 7))) - 1);
		/* emit() shifts the time left by 2 and adds the kind: bytes 7-13
		 * land in bits 8-63, bits 2-7 stay 0. */
		emit(t, b, hi << 6, XP_TRACE_LOST, XP_TRACE_LABEL | XP_TRACE_LABEL_ARGDATA | lo);
	}
}

static inline void count_lost(struct xp_trace_thread *t, struct xp_trace_buf *b)
{
	if (!b && t->selected) /* the budget left it none: shared, so atomic */
		atomic_fetch_add_explicit(&unbuffered, 1, memory_order_relaxed);
	if (b) { /* single writer: no locked add needed */
		atomic_store_explicit(&b->lost,
				      atomic_load_explicit(&b->lost, memory_order_relaxed) + 1,
				      memory_order_relaxed);
		t->unreported++;
	}
}

/* No room below the limit last read: read the reader's tail again (a
 * draining reader moves it), and if records were dropped meanwhile and
 * there is room for it too, say so with a LOST record where they went.
 * need: the records the caller wants room for.  1 if there is room. */
static __attribute__((noinline, cold)) int room_again(struct xp_trace_thread *t,
						      struct xp_trace_buf *b, uint64_t need,
						      uint64_t now)
{
	if (!b || t->limit == UINT64_MAX)
		return 0;
	t->limit = atomic_load_explicit(&b->tail, memory_order_acquire) + t->cap;
	uint64_t extra = t->unreported ? 1 : 0;
	if (t->head + t->open + need + extra > t->limit)
		return 0;
	if (extra) {
		emit(t, b, now, XP_TRACE_LOST, t->unreported);
		t->unreported = 0;
	}
	return 1;
}

static void pop(struct xp_trace_thread *t, const struct frame *f, uint64_t now, int unwound,
		uintptr_t sp);
static void after_fork_child_stop(void);

/* A new call whose return slot is at or above the newest frame's (same
 * stack, not a tail call): longjmp (or an exception) left frames that are
 * still on the shadow stack.  The one whose slot this call just wrote
 * over is dead, and so is every frame above it: record their exits now,
 * innermost first, so that the new call is not shown as their child.
 * Only an exact match counts: a handler on a sigaltstack above the
 * thread's stack also gets here, with every frame live and none at its
 * slot.  Left frames with no match go when an older frame returns
 * (xp_trace_exit). */
static uint32_t __attribute__((noinline, cold)) forget_dead(struct xp_trace_thread *t, uint32_t d,
							    uintptr_t slot, uint64_t now)
{
	uint32_t i = d;
	while (i > 0 && t->stack[i - 1].slot < slot)
		i--;
	if (i == 0 || t->stack[i - 1].slot != slot)
		return d;
	while (d >= i)
		pop(t, &t->stack[--d], now, 1, 0);
	barrier();
	t->depth = d;
	return d;
}

static int request_current(struct xp_trace_thread *t, uint64_t e);

/* The calling thread, marked busy, while tracing; NULL when not tracing,
 * inside the hook already (a signal handler), or, unless CREATE, for a
 * thread that has recorded nothing yet.  The caller reads the time after
 * this (a signal handler that ran between an earlier read and busy would
 * have recorded later times before its record), and only if it records:
 * `rdtsc` is half of what a recorded call costs. */
static inline struct xp_trace_thread *begin(int create)
{
	uint64_t e = atomic_load_explicit(&epoch, memory_order_acquire);
	if (!(e & 1))
		return NULL;
	struct xp_trace_thread *t = self;
	/* --requests: a thread with no request open returns here, having
	 * read two globals and its own state (the bench's "closed" figure). */
	if (unlikely(__atomic_load_n(&cfg.requests, __ATOMIC_RELAXED)) && (!t || !t->req_open))
		return NULL;
	if (unlikely(!t) && (!create || !(t = thread_new())))
		return NULL;
	if (t->busy)
		return NULL;
	t->busy = 1;
	barrier();
	if (unlikely(t->epoch != e))
		refresh(t, e);
	if (unlikely(t->req_open) && !request_current(t, e)) {
		barrier();
		t->busy = 0;
		return NULL;
	}
	return t;
}

/* Where a new call's frame goes on t's shadow stack, d being its depth:
 * *flags gets F_TAIL if the call was jumped to by a function whose return
 * is hooked (a tail call), else frames that longjmp left above its slot
 * are closed first (forget_dead) and the depth returned is theirs. */
static inline uint32_t frame_place(struct xp_trace_thread *t, uint32_t d,
				   const uintptr_t *parent_slot, uint32_t *flags)
{
	/* Our trampoline already in the slot: the function that put it
	 * there jumped here (a tail call) and this one returns with it. */
	if (*parent_slot == (uintptr_t)xp_trace_exit_tramp)
		*flags |= F_TAIL;
	else if (d && unlikely(t->stack[d - 1].slot <= (uintptr_t)parent_slot))
		d = forget_dead(t, d, (uintptr_t)parent_slot, tsc());
	return d;
}

/* The frame at depth d, filled, becomes the newest, and its call's return
 * comes through the exit trampoline (a tail call's already does). */
static inline void frame_push(struct xp_trace_thread *t, uint32_t d, uintptr_t func,
			      uintptr_t *parent_slot, uint32_t flags)
{
	struct frame *f = &t->stack[d];
	f->slot = (uintptr_t)parent_slot;
	f->ret = *parent_slot;
	f->func = func;
	f->gen = t->gen;
	f->flags = flags;
	barrier();
	t->depth = d + 1;
	barrier();
	if (!(flags & F_TAIL))
		*parent_slot = (uintptr_t)xp_trace_exit_tramp;
}

/* A lazily bound library call that is not recorded (its thread has no
 * request open, or is not selected by -T): its return is still followed,
 * in a frame of its own that records nothing, so that the return puts the
 * stub back over what the loader resolved (pop(), F_LAZY).  Else the
 * function would stay bound past the stub, and unrecorded in every later
 * request, until a command of the control thread looked at lazy slots.
 * t: the calling thread, busy, or NULL to find it. */
static __attribute__((noinline, cold)) void lazy_follow(struct xp_trace_thread *t, uintptr_t func,
							 uintptr_t *parent_slot)
{
	int mine = !t;
	if (mine) {
		uint64_t e = atomic_load_explicit(&epoch, memory_order_acquire);
		if (!(e & 1))
			return;
		if (!(t = self) && !(t = thread_new()))
			return;
		if (t->busy)
			return;
		t->busy = 1;
		barrier();
		/* No refresh(): it would give the thread a ring, which a
		 * frame that records nothing does not need (its generation
		 * may be stale: pop() puts the stub back before it looks). */
	}
	uint32_t flags = F_LAZY;
	if (t->depth < t->nframes)
		frame_push(t, frame_place(t, t->depth, parent_slot, &flags), func, parent_slot, flags);
	if (mine) {
		barrier();
		t->busy = 0;
	}
}

/* d (a shadow stack depth) is below -D's last level: calls there are not
 * followed at all (no frame, no time read, their returns left alone), so
 * their own calls find the same depth and are not either. */
static inline int below_depth(const struct xp_trace_thread *t, uint32_t d)
{
	return (uint64_t)d >= (uint64_t)t->depth_base + t->max_depth;
}

/* An entry: a traced function's (its patch site's call) or a library call's
 * (trace_plt.c), func naming it in the records.  extra: frame flags (F_LAZY). */
static inline __attribute__((always_inline)) void enter(uintptr_t func, uintptr_t *parent_slot,
							uint32_t extra, const uintptr_t *regs)
{
	uint64_t now;
	struct xp_trace_thread *t = begin(1);
	if (!t) {
		if ((extra & F_LAZY) && __atomic_load_n(&cfg.requests, __ATOMIC_RELAXED) &&
		    !xp_trace_request_open)
			lazy_follow(NULL, func, parent_slot);
		return;
	}
	uint32_t d = t->depth;
	if (!t->selected) {
		if (extra & F_LAZY)
			lazy_follow(t, func, parent_slot);
		goto out;
	}
	if (unlikely(d == t->nframes)) {
		/* Not followed: its return stays as it is, and it is not
		 * recorded, so the stream stays balanced. */
		atomic_store_explicit(&t->overruns,
				      atomic_load_explicit(&t->overruns, memory_order_relaxed) + 1,
				      memory_order_relaxed);
		goto out;
	}
	uint32_t flags = extra;
	d = frame_place(t, d, parent_slot, &flags);
	if (unlikely(below_depth(t, d))) {
		if (extra & F_LAZY)
			lazy_follow(t, func, parent_slot);
		goto out;
	}
	now = tsc();
	struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_relaxed);
	const struct xp_trace_argspec *as = NULL;
	uint64_t args = 0, reserve = 0, need = 2;
	size_t n = 0;
	if (unlikely(xp_trace_args_on) && (as = xp_trace_args_find(func))) {
		n = xp_trace_args_capture(as, 0, regs, parent_slot + 1, t->argbuf);
		args = payload_recs(n);
		reserve = as->ret_recs;
		need += args + reserve;
	}
	/* Room for this entry and for the exits of every open frame,
	 * this one's included: a full buffer never leaves a call
	 * unclosed. */
	if (likely(b && t->head + t->open + need <= t->limit) ||
	    room_again(t, b, need, now)) {
		emit(t, b, now, XP_TRACE_ENTRY, func);
		if (unlikely(args))
			emit_payload(t, b, now, n);
		t->open += 1 + (uint32_t)reserve;
		flags |= F_REC;
		if (unlikely(reserve))
			flags |= F_RET | (uint32_t)reserve << F_RESERVE_SHIFT;
	} else {
		count_lost(t, b);
		flags |= F_LOST;
	}
	frame_push(t, d, func, parent_slot, flags);
out:
	barrier();
	t->busy = 0;
}

void xp_trace_enter(uintptr_t site_ret, uintptr_t *parent_slot)
{
	enter(site_ret - XP_TRACE_SITE_LEN, parent_slot, 0, (const uintptr_t *)parent_slot - 2);
}

void (*xp_trace_lazy_return)(uintptr_t func);

void xp_trace_enter_call(uintptr_t func, uintptr_t *parent_slot, enum xp_call_kind kind)
{
	/* The library-call hook pushed rdi just below the return address. */
	const uintptr_t *regs = (const uintptr_t *)parent_slot - 1;
	if (likely(kind == XP_CALL_HOOK)) {
		enter(func, parent_slot, 0, regs);
		return;
	}
	if (kind == XP_CALL_LAZY) {
		enter(func, parent_slot, F_LAZY, regs);
		return;
	}
	if (kind != XP_CALL_INSTANT)
		return;
	/* Returns twice (setjmp, vfork): its return address is left alone
	 * (a second return through the exit trampoline would find no frame;
	 * vfork's child returns first, on the parent's stack), and the call
	 * shows as a node of no length where it began. */
	struct xp_trace_thread *t = begin(1);
	if (!t)
		return;
	uint64_t now = tsc();
	if (t->selected && !below_depth(t, t->depth)) {
		struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_relaxed);
		if ((b && t->head + t->open + 2 <= t->limit) || room_again(t, b, 2, now)) {
			emit(t, b, now, XP_TRACE_ENTRY, func);
			emit(t, b, now, XP_TRACE_EXIT, func);
		} else {
			count_lost(t, b);
			count_lost(t, b);
		}
	}
	barrier();
	t->busy = 0;
}

/* An XPROBES_SITE hit while tracing: each site's thunk (trace_sitehits.c)
 * calls this with the site's record, which the tool reads to print
 * provider:name where the hit happened in the graph.  A thread that has
 * made no traced call yet has no buffer, and its hits are not shown. */
void xp_trace_site_hit(const void *rec)
{
	struct xp_trace_thread *t = begin(0);
	if (!t)
		return;
	uint64_t now = tsc();
	struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_relaxed);
	/* Under -D, a hit inside calls not followed (below_depth) shows in
	 * the deepest recorded call around it. */
	if (t->selected && (uint64_t)t->depth <= (uint64_t)t->depth_base + t->max_depth) {
		/* The same reserve as an entry's: every open call can close. */
		if ((b && t->head + t->open + 1 <= t->limit) || room_again(t, b, 1, now))
			emit(t, b, now, XP_TRACE_SITE, (uintptr_t)rec);
		else
			count_lost(t, b);
	}
	barrier();
	t->busy = 0;
}

/* A frame's exit: a return (sp: the stack pointer the return left, below
 * which the exit trampoline saved rax and xmm0), or (unwound) a frame
 * that longjmp or an exception left, found now, whose record says so. */
static void pop(struct xp_trace_thread *t, const struct frame *f, uint64_t now, int unwound,
		uintptr_t sp)
{
	if (f->flags & F_LAZY) /* the loader has resolved its slot by now */
		xp_trace_lazy_return(f->func);
	if (f->gen != t->gen)
		return; /* entered before a clear */
	struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_relaxed);
	if (f->flags & F_REC) {
		emit(t, b, now, XP_TRACE_EXIT, f->func | (unwound ? XP_TRACE_UNWOUND : 0));
		if ((f->flags & F_RET) && !unwound) {
			const struct xp_trace_argspec *as = xp_trace_args_find(f->func);
			size_t n = as ? xp_trace_args_capture(as, 1, (const uintptr_t *)sp - 1,
							      (const uintptr_t *)(sp - 48), t->argbuf) : 0;
			/* Never past the room kept at the entry (the spec may
			 * have changed since, when the entry was before a stop). */
			if (payload_recs(n) <= F_RESERVE(f) - 1)
				emit_payload(t, b, now, n);
		}
		t->open -= F_RESERVE(f);
	} else if (f->flags & F_LOST) {
		count_lost(t, b);
	}
}

static void __attribute__((noreturn, noinline)) lost_return(void)
{
	static const char msg[] = "xprobes trace: a return address is not on the shadow stack\n";
	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing more to say */
	}
	abort();
}

uintptr_t xp_trace_exit(uintptr_t sp)
{
	struct xp_trace_thread *t = self;
	uintptr_t slot = sp - sizeof(uintptr_t);
	t->busy = 1;
	barrier();
	uint64_t now = tsc();
	const struct frame *st = t->stack;
	uint32_t d = t->depth, i = d;
	if (likely(d && st[d - 1].slot == slot && st[d - 1].flags == F_REC && st[d - 1].gen == t->gen)) {
		/* The common case: the newest frame, recorded. */
		struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_relaxed);
		emit(t, b, now, XP_TRACE_EXIT, st[d - 1].func);
		t->open--;
		uintptr_t r = st[d - 1].ret;
		barrier();
		t->depth = d - 1;
		barrier();
		t->busy = 0;
		return r;
	}
	/* The frame this return belongs to: the newest one for this slot
	 * that is not a tail call.  Frames above it were left by longjmp
	 * (or an exception) and tail calls return with it: their exits are
	 * recorded now, innermost first.  An exact match, not a comparison
	 * of addresses: a handler on a sigaltstack has its frames above or
	 * below the thread's stack. */
	while (i > 0 && (st[i - 1].slot != slot || (st[i - 1].flags & F_TAIL)))
		i--;
	if (unlikely(i == 0))
		lost_return();
	i--;
	for (uint32_t j = d; j-- > i;) /* tail calls of st[i] (its slot) return with it */
		pop(t, &st[j], now, st[j].slot != slot, sp);
	uintptr_t ret = st[i].ret;
	barrier();
	t->depth = i;
	barrier();
	t->busy = 0;
	return ret;
}

/* ---- Request-scoped recording (trace start --requests) ---------------
 *
 * With cfg.requests, a thread records only between
 * xp_trace_request_begin and xp_trace_request_end, which a probe module
 * calls from its handlers on the thread serving a request (through
 * <xprobes/probe.h>, lent by trace_request.c).  Everything else returns
 * at the top of begin().
 *
 * The request's records go into the thread's ring after the published
 * head, which stays where it was: a draining reader copies [tail, head)
 * only, so it never sees a record that may yet be dropped, and the room
 * check (head + open <= tail + cap) still keeps every uncopied record.
 * Dropping puts the thread's own head (and position, and the loss count
 * and pending LOST marker) back where they were at the begin: O(1).
 * Keeping writes the label and publishes the new head: O(1) as well.
 * Either way the calls entered since the begin and still running are
 * closed (their exits recorded when keeping) and unmarked, so that their
 * returns through the trampoline later record nothing: O(open calls).
 *
 * In the ring a kept request is framed by label records (kind LOST with
 * XP_TRACE_LABEL set in addr, which no count of lost records reaches):
 * a header at the begin's time with the text's length, LABEL_TEXT_RECS
 * records of 7 bytes of text each (reserved at the begin, written at the
 * end: the text is known then), the request's records, and an end
 * record at the end's time.  A reader shows it as one call named by the
 * text (trace_uftrace.c). */
static _Atomic uint32_t req_cancel;

/* t is the calling thread's own state (self). */
static inline void set_req_open(struct xp_trace_thread *t, int open)
{
	t->req_open = open;
	xp_trace_request_open = (uint8_t)open;
}

#define LABEL_TEXT_RECS 7u
#define LABEL_RECS (1u + LABEL_TEXT_RECS)

static void put_label(struct xp_trace_thread *t, struct xp_trace_buf *b, uint64_t i,
		      uint64_t time, uint64_t addr)
{
	struct xp_trace_rec *r = &b->rec[i % t->cap];
	r->time = time << 2 | (uint64_t)XP_TRACE_LOST;
	r->addr = XP_TRACE_LABEL | addr;
}

/* Close t's open request (t busy), keeping it (with label) or not. */
static void request_close(struct xp_trace_thread *t, int keep, uint64_t now, const char *label)
{
	struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_relaxed);
	/* A clear since the begin started the ring again: nothing to keep,
	 * and the reserved room went with it. */
	int same = b && t->req_gen == t->gen;
	keep = keep && same;
	for (uint32_t i = t->depth; i-- > 0;) {
		struct frame *f = &t->stack[i];
		if ((f->flags & F_REC) && f->gen == t->gen) {
			if (keep)
				emit(t, b, now, XP_TRACE_EXIT, f->func);
			t->open -= F_RESERVE(f);
		}
		f->flags &= ~(F_REC | F_LOST | F_RET | 0xffu << F_RESERVE_SHIFT);
	}
	if (!same) {
		set_req_open(t, 0);
		return;
	}
	t->open--; /* the end record's room */
	if (keep) {
		size_t len = 0;
		while (label && len < LABEL_TEXT_RECS * 7 && label[len])
			len++;
		put_label(t, b, t->req_head, t->req_tsc, XP_TRACE_LABEL_BEGIN | len);
		for (uint32_t k = 0; k < LABEL_TEXT_RECS; k++) {
			uint64_t w = 0;
			for (uint32_t j = 0; j < 7 && k * 7 + j < len; j++)
				w |= (uint64_t)(unsigned char)label[k * 7 + j] << (8 * j);
			put_label(t, b, t->req_head + 1 + k, t->req_tsc, XP_TRACE_LABEL_TEXT | w);
		}
		emit(t, b, now, XP_TRACE_LOST, XP_TRACE_LABEL | XP_TRACE_LABEL_END);
		barrier();
		set_req_open(t, 0);
		atomic_store_explicit(&b->head, t->head, memory_order_release);
		return;
	}
	t->head = t->req_head;
	t->pos = t->head % t->cap;
	t->unreported = t->req_unreported;
	atomic_store_explicit(&b->lost, t->req_lost, memory_order_relaxed);
	barrier();
	set_req_open(t, 0);
}

/* t's open request still belongs to this tracing run and to modules
 * loaded: else it is dropped (a stop, start or clear since its begin, or
 * a module unloaded, whose end will never come). */
static int request_current(struct xp_trace_thread *t, uint64_t e)
{
	if (t->req_e == e && t->req_cancel == atomic_load_explicit(&req_cancel, memory_order_relaxed))
		return 1;
	request_close(t, 0, 0, NULL);
	return 0;
}

int xp_trace_request_begin(void)
{
	uint64_t e = atomic_load_explicit(&epoch, memory_order_acquire);
	if (!(e & 1) || !__atomic_load_n(&cfg.requests, __ATOMIC_RELAXED))
		return -1;
	struct xp_trace_thread *t = self;
	if ((!t && !(t = thread_new())) || t->busy)
		return -1;
	t->busy = 1;
	barrier();
	uint64_t now = tsc();
	if (t->epoch != e)
		refresh(t, e);
	if (t->req_open) /* a begin with no end: the earlier request is dropped */
		request_close(t, 0, now, NULL);
	struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_relaxed);
	int rc = -1;
	if (t->selected && b &&
	    (t->head + t->open + LABEL_RECS + 1 <= t->limit || room_again(t, b, LABEL_RECS + 1, now))) {
		t->req_head = t->head;
		t->req_unreported = t->unreported;
		t->req_lost = atomic_load_explicit(&b->lost, memory_order_relaxed);
		t->req_gen = t->gen;
		t->req_e = e;
		t->req_cancel = atomic_load_explicit(&req_cancel, memory_order_relaxed);
		t->req_tsc = now;
		t->depth_base = t->depth; /* -D counts from the request */
		t->head += LABEL_RECS;
		t->pos = t->head % t->cap;
		t->open++; /* room for the end record */
		barrier();
		set_req_open(t, 1);
		rc = 0;
	} else if (t->selected) {
		count_lost(t, b);
	}
	barrier();
	t->busy = 0;
	return rc;
}

int xp_trace_request_end(int keep, const char *label)
{
	struct xp_trace_thread *t = self;
	if (!t || !t->req_open || t->busy)
		return 0;
	t->busy = 1;
	barrier();
	uint64_t now = tsc();
	uint64_t e = atomic_load_explicit(&epoch, memory_order_acquire);
	if (!request_current(t, e)) {
		barrier();
		t->busy = 0;
		return 0;
	}
	keep = keep && t->req_gen == t->gen;
	request_close(t, keep, now, label);
	barrier();
	t->busy = 0;
	return keep ? 1 : 0;
}

void xp_trace_request_cancel_all(void)
{
	atomic_fetch_add_explicit(&req_cancel, 1, memory_order_relaxed);
}

/* ---- Exceptions ------------------------------------------------------
 *
 * The unwinder finds each frame's caller through its return address, and
 * a hooked frame's is the trampoline, which it cannot see through (its
 * return address is undefined in the CFI: the search would end there and
 * the program terminate).  So when an exception is raised, the thread's
 * hooked return addresses are put back and the unwinder sees the real
 * stack; once it is caught, the frames it unwound are closed (their exits
 * recorded) and the others hooked again.  The agent's library exports
 * interposers of _Unwind_RaiseException, _Unwind_Resume_or_Rethrow and
 * __cxa_begin_catch for this (lib/libxprobes.map), found before libgcc_s
 * and libstdc++ by programs linked with -lxprobes. */

static void unhook_all(void)
{
	struct xp_trace_thread *t = self;
	if (!t || t->busy)
		return;
	t->busy = 1;
	barrier();
	for (uint32_t i = t->depth; i-- > 0;) {
		struct frame *f = &t->stack[i];
		uintptr_t *slot = (uintptr_t *)f->slot;
		if (!(f->flags & F_TAIL) && *slot == (uintptr_t)xp_trace_exit_tramp) {
			*slot = f->ret;
			f->flags |= F_UNHOOKED;
		}
	}
	barrier();
	t->busy = 0;
}

/* Caught in the frame whose stack pointer is cfa: the frames below it are
 * gone. */
static void caught(uintptr_t cfa)
{
	struct xp_trace_thread *t = self;
	if (!t || t->busy)
		return;
	t->busy = 1;
	barrier();
	uint64_t now = tsc();
	uint32_t d = t->depth;
	while (d && t->stack[d - 1].slot < cfa)
		pop(t, &t->stack[--d], now, 1, 0);
	barrier();
	t->depth = d;
	for (uint32_t i = 0; i < d; i++) {
		struct frame *f = &t->stack[i];
		uintptr_t *slot = (uintptr_t *)f->slot;
		if (!(f->flags & F_UNHOOKED))
			continue;
		f->flags &= ~F_UNHOOKED;
		if (*slot == f->ret)
			*slot = (uintptr_t)xp_trace_exit_tramp;
	}
	barrier();
	t->busy = 0;
}

XP_TRACE_NOSSE_END

static void *next_symbol(void *_Atomic *cache, const char *name, const char *version)
{
	void *f = atomic_load_explicit(cache, memory_order_acquire);
	if (!f) {
		f = dlvsym(RTLD_NEXT, name, version);
		if (!f)
			f = dlsym(RTLD_NEXT, name);
		if (!f) {
			static const char msg[] = "xprobes trace: no unwinder to forward to\n";
			if (write(2, msg, sizeof(msg) - 1) < 0) {
				/* nothing more to say */
			}
			abort();
		}
		atomic_store_explicit(cache, f, memory_order_release);
	}
	return f;
}

__attribute__((visibility("default"))) _Unwind_Reason_Code
_Unwind_RaiseException(struct _Unwind_Exception *e)
{
	static void *_Atomic real;
	_Unwind_Reason_Code (*fn)(struct _Unwind_Exception *) =
		next_symbol(&real, "_Unwind_RaiseException", "GCC_3.0");
	unhook_all();
	return fn(e); /* returns only when nothing catches it */
}

__attribute__((visibility("default"))) _Unwind_Reason_Code
_Unwind_Resume_or_Rethrow(struct _Unwind_Exception *e)
{
	static void *_Atomic real;
	_Unwind_Reason_Code (*fn)(struct _Unwind_Exception *) =
		next_symbol(&real, "_Unwind_Resume_or_Rethrow", "GCC_3.3");
	unhook_all();
	return fn(e);
}

__attribute__((visibility("default"))) void *__cxa_begin_catch(void *e)
{
	static void *_Atomic real;
	void *(*fn)(void *) = next_symbol(&real, "__cxa_begin_catch", "CXXABI_1.3");
	caught((uintptr_t)__builtin_dwarf_cfa());
	return fn(e);
}

/* ---- The control thread's side (xp_agent.lock held) ---------------- */

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A (TSC, ns) pair taken together: the TSC halfway through the clock read. */
static void clock_pair(uint64_t *t, uint64_t *ns)
{
	uint64_t a = tsc();
	*ns = mono_ns();
	uint64_t b = tsc();
	*t = a + (b - a) / 2;
}

/* The pair taken at the last stop: while tracing is off every read of the
 * trace converts with the same two pairs, so two reads agree to the ns. */
static uint64_t stop_tsc, stop_ns;

void xp_trace_record_clock(uint64_t *s_tsc, uint64_t *s_ns, uint64_t *n_tsc, uint64_t *n_ns)
{
	*s_tsc = start_tsc;
	*s_ns = start_ns;
	if (!xp_trace_record_on() && stop_tsc > start_tsc) {
		*n_tsc = stop_tsc;
		*n_ns = stop_ns;
		return;
	}
	clock_pair(n_tsc, n_ns);
}

int xp_trace_record_on(void)
{
	return atomic_load_explicit(&epoch, memory_order_relaxed) & 1;
}

/* Following (trace_follow.c): the child goes on recording, as uftrace's
 * does.  Its forking thread keeps its shadow stack, and the calls it
 * inherited open are told to the follower (their exits come in the
 * child's ring); every ring it has is its parent's (shared), so each goes
 * and the thread gets a new one, made and sent before it records again. */
static void follow_fork_child(struct xp_trace_thread *me)
{
	for (int i = 0; i < POOL; i++) { /* the parent's spares */
		struct xp_trace_buf *b = atomic_exchange_explicit(&pool[i], NULL,
								  memory_order_relaxed);
		if (b)
			buf_unmap(b);
	}
	if (!me) {
		xp_trace_follow_forked(NULL, 0, 0);
		return;
	}
	uintptr_t addr[XP_FOLLOW_MAX_FRAMES];
	uint32_t n = 0, depth = 0;
	for (uint32_t i = 0; i < me->depth; i++) {
		const struct frame *f = &me->stack[i];
		if (!(f->flags & F_REC) || f->gen != me->gen)
			continue;
		if (n < XP_FOLLOW_MAX_FRAMES)
			addr[n++] = f->func;
		depth++;
	}
	me->tid = (int32_t)syscall(SYS_gettid);
	xp_trace_follow_forked(addr, n, depth);
	struct xp_trace_buf *old = atomic_exchange_explicit(&me->retired, NULL, memory_order_relaxed);
	if (old)
		buf_unmap(old);
	old = atomic_load_explicit(&me->buf, memory_order_relaxed);
	if (old)
		buf_unmap(old);
	struct xp_trace_buf *nb = buf_new(me->tid, cfg.buf_kib);
	atomic_store_explicit(&me->buf, nb, memory_order_relaxed);
	me->ring_start = atomic_load_explicit(&start_count, memory_order_relaxed);
	me->next = NULL;
	me->head = 0;
	me->pos = 0;
	me->unreported = 0;
	me->cap = nb ? nb->cap : 0;
	me->limit = nb ? nb->cap : 0;
	me->ahead_buf = NULL; /* the new ring may sit where the old one was */
	me->ahead = 0;
	/* A request open at the fork began in the parent's ring: the child
	 * ends it unkept (as after a clear), and its end record's room goes. */
	if (me->req_open) {
		me->req_gen = me->gen - 1;
		me->open -= me->open > 0;
	}
	if (nb && cfg.overwrite)
		nb->flags |= XP_TRACE_BUF_OVERWRITE;
	atomic_store_explicit(&me->overruns, 0, memory_order_relaxed);
}

/* In a fork()ed child the threads of the parent are gone but the one that
 * forked: it keeps its shadow stack (its frames still return through the
 * trampoline), stops recording, and its buffer starts empty; unless
 * following (above).  The agent's own fork handler calls this first, so
 * that no traced code (a handler of the program's, the agent's restart)
 * runs in the child before it; the handler registered here then finds it
 * done. */
static pid_t fork_handled;

void xp_trace_record_after_fork_child(void)
{
	pid_t pid = getpid();
	if (fork_handled == pid)
		return;
	fork_handled = pid;
	xp_trace_args_after_fork(); /* strings are read from this process now */
	struct xp_trace_thread *me0 = self == &making || self == &agent_thread ? NULL : self;
	if (xp_trace_following() && xp_trace_record_on()) {
		struct xp_trace_thread *t = atomic_load_explicit(&registry, memory_order_relaxed), *next;
		for (; t; t = next) {
			next = t->next;
			if (t == me0)
				continue;
			struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_relaxed);
			if (b)
				buf_unmap(b);
			unmap(t, t->map_len);
		}
		atomic_store_explicit(&registry, me0, memory_order_relaxed);
		follow_fork_child(me0);
		return;
	}
	xp_trace_follow_off(); /* the parent's connection is not the child's */
	after_fork_child_stop();
}

static void after_fork_child(void)
{
	xp_trace_record_after_fork_child();
}

static void after_fork_child_stop(void)
{
	uint64_t e = atomic_load_explicit(&epoch, memory_order_relaxed);
	atomic_store_explicit(&epoch, (e + 2) & ~(uint64_t)1, memory_order_relaxed);
	uint32_t g = atomic_fetch_add_explicit(&clear_gen, 1, memory_order_relaxed) + 1;
	struct xp_trace_thread *me = self == &making || self == &agent_thread ? NULL : self;
	struct xp_trace_thread *t = atomic_load_explicit(&registry, memory_order_relaxed), *next;
	for (; t; t = next) {
		next = t->next;
		if (t == me)
			continue;
		struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_relaxed);
		if (b)
			buf_unmap(b);
		unmap(t, t->map_len);
	}
	atomic_store_explicit(&registry, me, memory_order_relaxed);
	if (!me)
		return;
	me->next = NULL;
	me->tid = (int32_t)syscall(SYS_gettid);
	me->gen = g;
	me->head = 0;
	me->pos = 0;
	me->open = 0;
	me->unreported = 0;
	struct xp_trace_buf *b = atomic_load_explicit(&me->buf, memory_order_relaxed);
	if (b && (b->flags & XP_TRACE_BUF_SHARED)) { /* its parent's too: not to reset here */
		buf_unmap(b);
		atomic_store_explicit(&me->buf, NULL, memory_order_relaxed);
		b = NULL;
	}
	if (b) {
		b->tid = me->tid;
		atomic_store_explicit(&b->head, 0, memory_order_relaxed);
		atomic_store_explicit(&b->tail, 0, memory_order_relaxed);
		atomic_store_explicit(&b->lost, 0, memory_order_relaxed);
	}
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void register_fork(void)
{
	pthread_atfork(NULL, NULL, after_fork_child);
}

/* How far ahead of each writer, on a ring's first pass, the control
 * thread faults its pages in (MADV_POPULATE_WRITE, which does not write
 * the bytes: safe while the thread writes there), and how often it looks
 * (xp_trace_record_ahead's answer).  A first touch costs the writer a
 * fault, and on this VM far more than zeroing (the host backs the page
 * too); done here, on the control thread, the writer rarely meets one,
 * and the target's memory cgroup is charged a few MiB ahead of what the
 * ring holds, never the whole ring at once. */
#define AHEAD_BYTES ((size_t)8 << 20)
#define AHEAD_MS 2
/* With --requests, when no ring's head moved since the last look: a
 * ring of kept requests only, whose head stays put while requests are
 * dropped, and which fills at the pace of the rare requests kept, so a
 * look every AHEAD_IDLE_MS is soon enough.  At AHEAD_MS for ever, `mclat
 * --slow` with nothing slow kept the agent's thread waking 500 times a
 * second, ~1% of memcached's CPU.  Not without --requests: there a
 * writer that was quiet (a program told to go once tracing is on) may
 * start at full speed, ~600 MB/s, and its runway is kept from its first
 * records as before. */
#define AHEAD_IDLE_MS 20
/* While buffers wait in the pool (their first AHEAD_BYTES faulted in, a
 * runway of ~10 ms at the fastest a thread records), look this often for
 * a thread that took one; after POOL_TICKS looks, less often (threads
 * that never make a traced call must not keep the agent awake). */
#define POOL_MS 10
#define POOL_TICKS 200
#define POOL_IDLE_MS 100
static unsigned pool_ticks; /* control thread only; 0 at each start */

static void fault_ahead(void *p, size_t len)
{
	madvise(p, len < AHEAD_BYTES ? len : AHEAD_BYTES, MADV_POPULATE_WRITE);
}

int xp_trace_record_ahead(void)
{
	int more = 0, moving = 0;
	if (!xp_trace_record_on())
		return -1;
	for (struct xp_trace_thread *t = atomic_load_explicit(&registry, memory_order_acquire); t;
	     t = t->next) {
		struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_acquire);
		if (!b || t->exited)
			continue;
		size_t len = buf_len(b->cap);
		if (t->ahead_buf != b) {
			t->ahead_buf = b;
			t->ahead = 0;
			t->ahead_head = UINT64_MAX;
		}
		if (t->ahead >= len)
			continue;
		uint64_t head = atomic_load_explicit(&b->head, memory_order_acquire);
		moving |= head != t->ahead_head;
		t->ahead_head = head;
		size_t at = head >= b->cap ? len : sizeof(*b) + (size_t)head * sizeof(b->rec[0]);
		size_t want = page_round(at + AHEAD_BYTES); /* madvise takes whole pages */
		if (want > len)
			want = len;
		/* A buffer the thread replaced stays mapped until this thread
		 * frees it (xp_trace_record_sweep), so it is safe to touch. */
		if (want > t->ahead && madvise((char *)b + t->ahead, want - t->ahead,
					       MADV_POPULATE_WRITE) == 0)
			t->ahead = want;
		else if (want > t->ahead)
			t->ahead = len; /* not here (Linux < 5.14): the writer faults */
		more |= t->ahead < len;
	}
	if (more)
		return moving || !__atomic_load_n(&cfg.requests, __ATOMIC_RELAXED) ? AHEAD_MS
										: AHEAD_IDLE_MS;
	for (int i = 0; i < POOL; i++)
		if (atomic_load_explicit(&pool[i], memory_order_relaxed))
			return pool_ticks++ < POOL_TICKS ? POOL_MS : POOL_IDLE_MS;
	return -1;
}

/* Fill the pool with buffers of the configured size: one per
 * thread that may trace and has no buffer of that size, at most POOL.  A
 * thread that finds the pool empty maps its own. */
static void pool_fill(size_t want)
{
	uint64_t cap = kib_cap(cfg.buf_kib);
	for (int i = 0; i < POOL; i++) {
		struct xp_trace_buf *b = atomic_exchange_explicit(&pool[i], NULL,
								  memory_order_acquire);
		if (b && b->cap != cap) {
			buf_unmap(b);
			b = NULL;
		}
		/* Its first AHEAD_BYTES only, a follower's shared ring too:
		 * the rest is faulted in ahead of its writer. */
		if (!b && want && (b = buf_map(cap)))
			fault_ahead(b, buf_len(cap));
		if (b)
			want -= !!want;
		atomic_store_explicit(&pool[i], b, memory_order_release);
	}
}

/* Threads of the process that may trace (every thread selected, or every
 * thread, but the agent's) and have no buffer of the size configured. */
static size_t threads_needing_buffers(void)
{
	size_t n = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return 1;
	pid_t me = (pid_t)syscall(SYS_gettid);
	for (struct dirent *e; (e = readdir(d));) {
		pid_t tid = atoi(e->d_name);
		if (tid <= 0 || tid == me || !tid_selected(tid))
			continue;
		struct xp_trace_thread *t = atomic_load_explicit(&registry, memory_order_acquire);
		while (t && t->tid != tid)
			t = t->next;
		struct xp_trace_buf *b = t ? atomic_load_explicit(&t->buf, memory_order_acquire) : NULL;
		n += !b || b->cap != kib_cap(cfg.buf_kib);
	}
	closedir(d);
	return n;
}

int xp_trace_record_start(const struct xp_trace_config *c)
{
	if (c->ntids > XP_TRACE_MAX_TIDS)
		return -E2BIG;
	if (c->buf_kib == 0 || c->buf_kib > XP_TRACE_MAX_KIB || (c->requests && c->overwrite))
		return -EINVAL;
	if (xp_trace_record_on())
		return -EALREADY;
	pthread_once(&fork_once, register_fork);
	cfg.buf_kib = c->buf_kib;
	cfg.max_depth = c->max_depth;
	/* From a flight recorder to a ring with a reader's room (or back),
	 * what the buffers hold means something else: start them over. */
	if (cfg.overwrite != (uint32_t)!!c->overwrite || cfg.requests != (uint32_t)!!c->requests)
		atomic_fetch_add_explicit(&clear_gen, 1, memory_order_release);
	cfg.overwrite = !!c->overwrite;
	__atomic_store_n(&cfg.requests, (uint32_t)!!c->requests, __ATOMIC_RELAXED);
	__atomic_store_n(&xp_trace_requests_only, (uint8_t)!!c->requests, __ATOMIC_RELAXED);
	cfg.budget_kib = c->budget_kib;
	for (size_t i = 0; i < c->ntids; i++)
		__atomic_store_n(&cfg.tids[i], c->tids[i], __ATOMIC_RELAXED);
	__atomic_store_n(&cfg.ntids, (uint32_t)c->ntids, __ATOMIC_RELAXED);
	atomic_fetch_add_explicit(&start_count, 1, memory_order_relaxed);
	for (int i = 0; i < POOL; i++) { /* spares sent to an earlier follower */
		struct xp_trace_buf *b = atomic_exchange_explicit(&pool[i], NULL,
								  memory_order_acquire);
		if (b && (b->flags & XP_TRACE_BUF_SHARED))
			buf_unmap(b);
		else if (b)
			atomic_store_explicit(&pool[i], b, memory_order_release);
	}
	pool_fill(threads_needing_buffers());
	pool_ticks = 0;
	clock_pair(&start_tsc, &start_ns);
	uint64_t e = atomic_load_explicit(&epoch, memory_order_relaxed);
	atomic_store_explicit(&epoch, (e + 2) | 1, memory_order_release);
	return 0;
}

void xp_trace_record_stop(void)
{
	xp_trace_args_disarm(); /* exits of calls still running keep their items */
	if (xp_trace_record_on())
		clock_pair(&stop_tsc, &stop_ns);
	uint64_t e = atomic_load_explicit(&epoch, memory_order_relaxed);
	atomic_store_explicit(&epoch, (e + 2) & ~(uint64_t)1, memory_order_release);
}

/* Threads that no longer exist (their tid is gone from the process: they
 * cannot run again) get their buffers marked; buffers a thread replaced
 * are freed. */
static void registry_remove(struct xp_trace_thread *t);

/* A thread that has ended, whose every record a draining reader has
 * copied (tail = head, and something was), will write no more and has
 * nothing left to read: its buffer and state go, so a long recording of a
 * program that makes and ends threads does not keep every thread's ring.
 * A reader that has not drained it (trace cat) keeps it until a clear. */
static int drained_and_gone(struct xp_trace_thread *t)
{
	struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_acquire);
	if (!t->exited || !b || (b->flags & XP_TRACE_BUF_OVERWRITE))
		return 0;
	uint64_t tail = atomic_load_explicit(&b->tail, memory_order_acquire);
	return tail && tail == atomic_load_explicit(&b->head, memory_order_acquire);
}

void xp_trace_record_sweep(void)
{
	pid_t pid = getpid();
	struct xp_trace_thread *next;
	for (struct xp_trace_thread *t = atomic_load_explicit(&registry, memory_order_acquire); t;
	     t = next) {
		next = t->next;
		struct xp_trace_buf *old = atomic_exchange_explicit(&t->retired, NULL,
								    memory_order_acq_rel);
		if (old)
			buf_unmap(old);
		if (!t->exited && syscall(SYS_tgkill, pid, t->tid, 0) != 0 && errno == ESRCH) {
			t->exited = 1;
			struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_acquire);
			if (b)
				b->flags |= XP_TRACE_BUF_EXITED;
		}
		if (drained_and_gone(t)) {
			registry_remove(t);
			buf_unmap(atomic_load_explicit(&t->buf, memory_order_relaxed));
			unmap(t, t->map_len);
		}
	}
}

/* Unlink t (not necessarily the head, which new threads push onto). */
static void registry_remove(struct xp_trace_thread *t)
{
	struct xp_trace_thread *head = t;
	if (atomic_compare_exchange_strong_explicit(&registry, &head, t->next,
						    memory_order_acq_rel, memory_order_acquire))
		return;
	for (struct xp_trace_thread *p = head; p; p = p->next)
		if (p->next == t) {
			p->next = t->next;
			return;
		}
}

void xp_trace_record_clear(void)
{
	xp_trace_record_sweep();
	atomic_fetch_add_explicit(&clear_gen, 1, memory_order_release);
	atomic_fetch_add_explicit(&epoch, 2, memory_order_release);
	struct xp_trace_thread *t = atomic_load_explicit(&registry, memory_order_acquire), *next;
	for (; t; t = next) {
		next = t->next;
		if (!t->exited)
			continue;
		registry_remove(t);
		struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_relaxed);
		if (b)
			buf_unmap(b);
		unmap(t, t->map_len);
	}
}

/* The buffers that hold data of the current generation (a thread that
 * has not recorded since a clear, or is not selected, has nothing to
 * show), exited or not. */
void xp_trace_record_each(void (*fn)(const struct xp_trace_buf *b, uint64_t overruns, void *arg),
			  void *arg)
{
	uint32_t g = atomic_load_explicit(&clear_gen, memory_order_relaxed);
	for (struct xp_trace_thread *t = atomic_load_explicit(&registry, memory_order_acquire); t;
	     t = t->next) {
		struct xp_trace_buf *b = atomic_load_explicit(&t->buf, memory_order_acquire);
		if (b && __atomic_load_n(&t->gen, __ATOMIC_ACQUIRE) == g &&
		    (atomic_load_explicit(&b->head, memory_order_relaxed) ||
		     atomic_load_explicit(&b->lost, memory_order_relaxed)))
			fn(b, atomic_load_explicit(&t->overruns, memory_order_relaxed), arg);
	}
}
