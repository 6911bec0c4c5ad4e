/* SPDX-License-Identifier: MIT */
/* The tracer's recorder (lib/trace/trace_record.c), driven directly: arrays
 * stand in for machine stacks (one return address per slot, deeper calls
 * at lower addresses), xp_trace_enter is called as the entry hook would and
 * xp_trace_exit as the exit trampoline would, and the thread's buffer is
 * read back as the tool would. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "trace/trace.h"

#define TRAMP ((uintptr_t)xp_trace_exit_tramp)
#define FN(n) ((uintptr_t)0x400000 + 0x100 * (n)) /* a function's patch site */
#define RET(n) ((uintptr_t)0x7000 + (n))          /* a return address into a caller */

/* A fake stack: slot[i] is the return address of the call at depth
 * NSLOTS - 1 - i. */
#define NSLOTS 64
struct stack {
	uintptr_t slot[NSLOTS];
};

static uintptr_t *slot_at(struct stack *s, int depth)
{
	return &s->slot[NSLOTS - 1 - depth];
}

/* A call at depth: the caller's `call` writes the return address, then
 * the function's patch site enters the hook. */
static void call(struct stack *s, int depth, int fn)
{
	uintptr_t *p = slot_at(s, depth);
	*p = RET(depth);
	xp_trace_enter(FN(fn) + 5, p);
}

/* The function at depth returns: through the trampoline if its return
 * address was replaced.  Checks it comes back to its caller. */
static _Atomic int wrong_returns; /* checked by the main thread: cmocka
				    * cannot fail a test from another */
static void ret(struct stack *s, int depth)
{
	uintptr_t *p = slot_at(s, depth);
	uintptr_t to = *p == TRAMP ? xp_trace_exit((uintptr_t)(p + 1)) : *p;
	if (to != RET(depth))
		wrong_returns++;
}

/* Per thread: test_threads' workers look up their own buffers at once
 * (shared, one worker's NULL before its search could land in the other's
 * answer: a flake seen in CI). */
static __thread const struct xp_trace_buf *found;
static __thread uint64_t found_overruns;
static void find_mine(const struct xp_trace_buf *b, uint64_t overruns, void *arg)
{
	if (b->tid == *(pid_t *)arg) {
		found = b;
		found_overruns = overruns;
	}
}

/* A thread's buffer, NULL when it has nothing since the last clear. */
static const struct xp_trace_buf *buf_of(pid_t tid)
{
	found = NULL;
	xp_trace_record_each(find_mine, &tid);
	return found;
}

static const struct xp_trace_buf *my_buf(void)
{
	return buf_of(gettid());
}

/* Check the buffer holds exactly the records in want ('E'/'X' + fn; 'U':
 * an exit marked unwound, its call left by longjmp). */
struct want {
	char kind;
	int fn;
};
static void expect(const struct xp_trace_buf *b, const struct want *w, size_t n)
{
	assert_non_null(b);
	assert_int_equal(b->magic, XP_TRACE_BUF_MAGIC);
	assert_int_equal(atomic_load(&b->head), n);
	uint64_t last = 0;
	for (size_t i = 0; i < n; i++) {
		const struct xp_trace_rec *r = &b->rec[i];
		int kind = (int)(r->time & 3);
		assert_int_equal(kind, w[i].kind == 'E' ? XP_TRACE_ENTRY : XP_TRACE_EXIT);
		assert_int_equal(r->addr, FN(w[i].fn) | (w[i].kind == 'U' ? XP_TRACE_UNWOUND : 0));
		assert_true(r->time >> 2 >= last);
		last = r->time >> 2;
	}
}

static void start(uint32_t kib, uint32_t depth, int32_t *tids, size_t ntids)
{
	struct xp_trace_config c = { .buf_kib = kib, .max_depth = depth, .tids = tids, .ntids = ntids };
	assert_int_equal(xp_trace_record_start(&c), 0);
}

static int teardown(void **state)
{
	(void)state;
	assert_int_equal(wrong_returns, 0);
	xp_trace_record_stop();
	xp_trace_record_clear();
	return 0;
}

static void test_nesting(void **state)
{
	(void)state;
	struct stack s;
	start(64, 0, NULL, 0);
	call(&s, 0, 1);
	assert_int_equal(*slot_at(&s, 0), TRAMP);
	call(&s, 1, 2);
	call(&s, 2, 3);
	ret(&s, 2);
	call(&s, 2, 4);
	ret(&s, 2);
	ret(&s, 1);
	ret(&s, 0);
	static const struct want w[] = { { 'E', 1 }, { 'E', 2 }, { 'E', 3 }, { 'X', 3 },
					 { 'E', 4 }, { 'X', 4 }, { 'X', 2 }, { 'X', 1 } };
	expect(my_buf(), w, 8);
	assert_int_equal(atomic_load(&my_buf()->lost), 0);
	/* A second start is refused while on; the data stays. */
	struct xp_trace_config c = { .buf_kib = 64 };
	assert_int_equal(xp_trace_record_start(&c), -EALREADY);
	expect(my_buf(), w, 8);
}

/* trace args: an entry carries its argument words, an exit its return
 * value, each as a header and data records (trace.h); a full ring drops
 * the entry with its payload, and the exit's room was kept. */
static uint64_t arg_byte_word(const struct xp_trace_rec *r, int hi)
{
	return hi ? r->time >> 8 : r->addr & ((UINT64_C(1) << 56) - 1);
}

static void test_args_records(void **state)
{
	(void)state;
	uint8_t it[XP_TRACE_ARG_ITEMS];
	xp_trace_args_clear();
	assert_int_equal(xp_trace_args_parse("i1,i2,r", it), 0);
	assert_int_equal(xp_trace_args_set(FN(1), it), 0);
	start(64, 0, NULL, 0);
	xp_trace_args_arm();
	struct stack s;
	memset(&s, 0, sizeof(s));
	uintptr_t *p = slot_at(&s, 0);
	*p = RET(0);
	p[-2] = 40; /* rdi, as the hook pushed it */
	p[-3] = 2;  /* rsi */
	xp_trace_enter(FN(1) + 5, p);
	assert_int_equal(*p, TRAMP);
	call(&s, 1, 2); /* no spec: a plain entry */
	ret(&s, 1);
	*p = 42; /* rax, where the exit trampoline pushed it */
	assert_int_equal(xp_trace_exit((uintptr_t)(p + 1)), RET(0));
	const struct xp_trace_buf *b = my_buf();
	assert_non_null(b);
	assert_int_equal(atomic_load(&b->head), 9);
	const struct xp_trace_rec *r = b->rec;
	assert_int_equal(r[0].addr, FN(1));
	assert_int_equal(r[1].time & 3, XP_TRACE_LOST);
	assert_int_equal(r[1].addr, XP_TRACE_LABEL | XP_TRACE_LABEL_ARGS | 16);
	assert_int_equal(r[1].time >> 2, r[0].time >> 2);
	/* 40 in bytes 0-7, 2 in bytes 8-15: 7 bytes in addr, 7 in time. */
	assert_int_equal(r[2].addr >> 56, XP_TRACE_LABEL_ARGDATA >> 56 | 0x80);
	assert_int_equal(arg_byte_word(&r[2], 0), 40);
	assert_int_equal(arg_byte_word(&r[2], 1), (uint64_t)2 << 8);
	assert_int_equal(r[2].time & 0xff, XP_TRACE_LOST);
	assert_int_equal(arg_byte_word(&r[3], 0), 0);
	assert_int_equal(r[4].addr, FN(2));
	assert_int_equal(r[5].addr, FN(2));
	assert_int_equal(r[6].addr, FN(1));
	assert_int_equal(r[6].time & 3, XP_TRACE_EXIT);
	assert_int_equal(r[7].addr, XP_TRACE_LABEL | XP_TRACE_LABEL_ARGS | 8);
	assert_int_equal(arg_byte_word(&r[8], 0), 42);
	xp_trace_args_disarm();
	xp_trace_args_clear();
}

static void test_bad_config(void **state)
{
	(void)state;
	int32_t tids[XP_TRACE_MAX_TIDS + 1] = { 0 };
	struct xp_trace_config c = { .buf_kib = 0 };
	assert_int_equal(xp_trace_record_start(&c), -EINVAL);
	c = (struct xp_trace_config){ .buf_kib = 64, .tids = tids, .ntids = XP_TRACE_MAX_TIDS + 1 };
	assert_int_equal(xp_trace_record_start(&c), -E2BIG);
	assert_false(xp_trace_record_on());
}

static void test_depth_limit(void **state)
{
	(void)state;
	struct stack s;
	start(64, 2, NULL, 0);
	for (int d = 0; d < 5; d++)
		call(&s, d, d + 1);
	/* Deeper calls are not followed at all: their returns are left as
	 * they are (no time read, no frame), the recorded ones hooked. */
	assert_int_equal(*slot_at(&s, 1), TRAMP);
	assert_int_equal(*slot_at(&s, 2), RET(2));
	assert_int_equal(*slot_at(&s, 4), RET(4));
	call(&s, 5, 9);
	ret(&s, 5);
	for (int d = 4; d >= 0; d--)
		ret(&s, d);
	static const struct want w[] = { { 'E', 1 }, { 'E', 2 }, { 'X', 2 }, { 'X', 1 } };
	expect(my_buf(), w, 4);
	/* And the next call at depth 1 is recorded again. */
	call(&s, 0, 7);
	ret(&s, 0);
	assert_int_equal(atomic_load(&my_buf()->head), 6);
}

/* With --requests, -D counts from the depth the request began at: here
 * inside a call followed by an earlier request (dropped), still running. */
static void test_depth_counts_from_the_request(void **state)
{
	(void)state;
	struct stack s;
	struct xp_trace_config c = { .buf_kib = 64, .max_depth = 1, .requests = 1 };
	assert_int_equal(xp_trace_record_start(&c), 0);
	assert_int_equal(xp_trace_request_begin(), 0);
	call(&s, 0, 1);
	assert_int_equal(xp_trace_request_end(0, NULL), 0);
	assert_int_equal(xp_trace_request_begin(), 0);
	call(&s, 1, 2); /* the request's depth 0: followed */
	call(&s, 2, 3); /* its depth 1: not */
	assert_int_equal(*slot_at(&s, 1), TRAMP);
	assert_int_equal(*slot_at(&s, 2), RET(2));
	ret(&s, 2);
	ret(&s, 1);
	assert_int_equal(xp_trace_request_end(1, "r"), 1);
	ret(&s, 0);
}

/* Recursion deeper than the shadow stack, on a thread of its own so that
 * its shadow stack is made with 8 frames. */
struct deep {
	struct stack s;
	uintptr_t slot7, slot8; /* as they were at the deepest */
	pid_t tid;
};

static void *deep_thread(void *arg)
{
	struct deep *t = arg;
	t->tid = gettid();
	for (int d = 0; d < 20; d++)
		call(&t->s, d, d);
	t->slot7 = *slot_at(&t->s, 7);
	t->slot8 = *slot_at(&t->s, 8);
	for (int d = 19; d >= 0; d--)
		ret(&t->s, d);
	return NULL;
}

static void test_shadow_overflow(void **state)
{
	(void)state;
	static struct deep t;
	uint32_t saved = xp_trace_shadow_frames;
	xp_trace_shadow_frames = 8;
	start(64, 0, NULL, 0);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, deep_thread, &t), 0);
	pthread_join(th, NULL);
	xp_trace_shadow_frames = saved;
	/* The calls past the 8th kept their own return addresses. */
	assert_int_equal(t.slot7, TRAMP);
	assert_int_equal(t.slot8, RET(8));
	struct want w[16];
	for (int i = 0; i < 8; i++) {
		w[i] = (struct want){ 'E', i };
		w[15 - i] = (struct want){ 'X', i };
	}
	expect(buf_of(t.tid), w, 16);
	assert_int_equal(found_overruns, 12);
}

/* longjmp from depth 3 back into the function at depth 0. */
static void test_longjmp(void **state)
{
	(void)state;
	struct stack s;
	start(64, 0, NULL, 0);
	for (int d = 0; d < 4; d++)
		call(&s, d, d + 1);
	/* The function at depth 0 calls again: its call writes over the
	 * slot of the left frame at depth 1, so it and those above it are
	 * closed, as left, before the new call. */
	call(&s, 1, 8);
	ret(&s, 1);
	ret(&s, 0);
	static const struct want w[] = {
		{ 'E', 1 }, { 'E', 2 }, { 'E', 3 }, { 'E', 4 }, { 'U', 4 }, { 'U', 3 },
		{ 'U', 2 }, { 'E', 8 }, { 'X', 8 }, { 'X', 1 },
	};
	expect(my_buf(), w, 10);
	/* Left frames whose slots nobody wrote over close when an older
	 * frame returns: longjmp from depth 2 to 0 and return at once. */
	xp_trace_record_clear();
	for (int d = 0; d < 3; d++)
		call(&s, d, d + 1);
	ret(&s, 0);
	static const struct want w2[] = { { 'E', 1 }, { 'E', 2 }, { 'E', 3 },
					  { 'U', 3 }, { 'U', 2 }, { 'X', 1 } };
	expect(my_buf(), w2, 6);
	const struct xp_trace_buf *b = my_buf();
	/* All closed at the same time, innermost first. */
	assert_int_equal(b->rec[3].time >> 2, b->rec[5].time >> 2);
}

/* A signal handler on a sigaltstack above the thread's stack: its calls
 * nest in the interrupted one, and nothing is taken for left by longjmp. */
static void test_altstack(void **state)
{
	(void)state;
	static struct {
		struct stack main, alt; /* alt above */
	} m;
	start(64, 0, NULL, 0);
	call(&m.main, 0, 1);
	call(&m.main, 1, 2);
	call(&m.alt, 0, 3);
	call(&m.alt, 1, 4);
	ret(&m.alt, 1);
	ret(&m.alt, 0);
	call(&m.main, 2, 5);
	ret(&m.main, 2);
	ret(&m.main, 1);
	ret(&m.main, 0);
	static const struct want w[] = { { 'E', 1 }, { 'E', 2 }, { 'E', 3 }, { 'E', 4 },
					 { 'X', 4 }, { 'X', 3 }, { 'E', 5 }, { 'X', 5 },
					 { 'X', 2 }, { 'X', 1 } };
	expect(my_buf(), w, 10);
}

static void test_tail_call(void **state)
{
	(void)state;
	struct stack s;
	start(64, 0, NULL, 0);
	call(&s, 0, 1);
	call(&s, 1, 2);
	/* Function 2 jumps to 3, which jumps to 4: same slot. */
	xp_trace_enter(FN(3) + 5, slot_at(&s, 1));
	xp_trace_enter(FN(4) + 5, slot_at(&s, 1));
	call(&s, 2, 5);
	ret(&s, 2);
	ret(&s, 1);
	ret(&s, 0);
	static const struct want w[] = { { 'E', 1 }, { 'E', 2 }, { 'E', 3 }, { 'E', 4 },
					 { 'E', 5 }, { 'X', 5 }, { 'X', 4 }, { 'X', 3 },
					 { 'X', 2 }, { 'X', 1 } };
	expect(my_buf(), w, 10);
}

/* 1 KiB: 64 records.  Flat calls fill it; nested calls keep room for
 * the exits of every open call. */
static void test_full_buffer(void **state)
{
	(void)state;
	struct stack s;
	start(1, 0, NULL, 0);
	for (int i = 0; i < 100; i++) {
		call(&s, 0, i);
		ret(&s, 0);
	}
	const struct xp_trace_buf *b = my_buf();
	assert_int_equal(b->cap, 64);
	assert_int_equal(atomic_load(&b->head), 64);
	assert_int_equal(atomic_load(&b->lost), 2 * 68);
	for (int i = 0; i < 64; i++)
		assert_int_equal(b->rec[i].addr, FN(i / 2));

	xp_trace_record_clear();
	for (int d = 0; d < 40; d++)
		call(&s, d, d);
	for (int d = 39; d >= 0; d--)
		ret(&s, d);
	b = my_buf();
	struct want w[64];
	for (int i = 0; i < 32; i++) {
		w[i] = (struct want){ 'E', i };
		w[63 - i] = (struct want){ 'X', i };
	}
	expect(b, w, 64);
	assert_int_equal(atomic_load(&b->lost), 16);
}

/* Records dropped before a stop are marked where they went, first thing
 * after the start that follows, even when a reader has made room
 * meanwhile: no record may come before the LOST record. */
static void test_lost_marker_first_after_restart(void **state)
{
	(void)state;
	struct stack s;
	start(1, 0, NULL, 0);
	for (int i = 0; i < 40; i++) {
		call(&s, 0, i);
		ret(&s, 0);
	}
	struct xp_trace_buf *b = (struct xp_trace_buf *)my_buf();
	assert_int_equal(atomic_load(&b->head), 64);
	assert_int_equal(atomic_load(&b->lost), 16);
	xp_trace_record_stop();
	atomic_store(&b->tail, 64); /* a draining reader copied all of it */
	start(1, 0, NULL, 0);
	call(&s, 0, 77);
	ret(&s, 0);
	assert_int_equal(atomic_load(&b->head), 67);
	assert_int_equal(b->rec[64 % 64].time & 3, XP_TRACE_LOST);
	assert_int_equal(b->rec[64 % 64].addr, 16);
	assert_int_equal(b->rec[65 % 64].time & 3, XP_TRACE_ENTRY);
	assert_int_equal(b->rec[65 % 64].addr, FN(77));
	assert_int_equal(b->rec[66 % 64].time & 3, XP_TRACE_EXIT);
}

static void test_clear_and_stop(void **state)
{
	(void)state;
	struct stack s;
	start(64, 0, NULL, 0);
	call(&s, 0, 1);
	call(&s, 1, 2);
	xp_trace_record_clear();
	assert_null(my_buf()); /* nothing since the clear */
	call(&s, 2, 3);
	ret(&s, 2);
	/* Stopped: no more entries, but open frames still return right and
	 * their exits are recorded (those entered before the clear are not:
	 * their entries went with it). */
	xp_trace_record_stop();
	call(&s, 2, 4);
	assert_int_equal(*slot_at(&s, 2), RET(2));
	ret(&s, 2);
	ret(&s, 1);
	ret(&s, 0);
	static const struct want w[] = { { 'E', 3 }, { 'X', 3 } };
	expect(my_buf(), w, 2);
	/* Started again, the data is kept. */
	start(64, 0, NULL, 0);
	call(&s, 0, 5);
	ret(&s, 0);
	assert_int_equal(atomic_load(&my_buf()->head), 4);
}

static void test_thread_selection(void **state)
{
	(void)state;
	struct stack s;
	int32_t other = getpid() + 100000;
	start(64, 0, &other, 1);
	call(&s, 0, 1);
	assert_int_equal(*slot_at(&s, 0), RET(0));
	ret(&s, 0);
	assert_null(my_buf());
	xp_trace_record_stop();
	int32_t me = gettid();
	start(64, 0, &me, 1);
	call(&s, 0, 1);
	ret(&s, 0);
	static const struct want w[] = { { 'E', 1 }, { 'X', 1 } };
	expect(my_buf(), w, 2);
}

/* Threads record into buffers of their own; a thread that ended keeps
 * its buffer, marked, until a clear. */
struct worker {
	int base;
	struct stack s;
	const struct xp_trace_buf *buf;
	pid_t tid;
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	w->tid = gettid();
	for (int i = 0; i < 1000; i++) {
		call(&w->s, 0, w->base);
		call(&w->s, 1, w->base + 1);
		ret(&w->s, 1);
		ret(&w->s, 0);
	}
	w->buf = my_buf();
	return NULL;
}

static size_t nbufs;
static void count_buf(const struct xp_trace_buf *b, uint64_t overruns, void *arg)
{
	(void)overruns;
	const struct worker *w = arg;
	if (b == w[0].buf || b == w[1].buf) {
		nbufs++;
		assert_true(b->flags & XP_TRACE_BUF_EXITED);
	}
}

static void test_threads(void **state)
{
	(void)state;
	static struct worker w[2] = { { .base = 10 }, { .base = 20 } };
	start(256, 0, NULL, 0);
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, worker, &w[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++) {
		const struct xp_trace_buf *b = w[i].buf;
		assert_non_null(b);
		assert_int_equal(b->tid, w[i].tid);
		assert_int_equal(atomic_load(&b->head), 4000);
		for (int j = 0; j < 4000; j++)
			assert_int_equal(b->rec[j].addr, FN(w[i].base + (j % 4 == 1 || j % 4 == 2)));
	}
	/* pthread_join returns when the kernel clears the thread's tid,
	 * a moment before the thread is gone from the process. */
	for (int i = 0; i < 2; i++)
		while (syscall(SYS_tgkill, getpid(), w[i].tid, 0) == 0)
			sched_yield();
	xp_trace_record_sweep();
	nbufs = 0;
	xp_trace_record_each(count_buf, w);
	assert_int_equal(nbufs, 2);
	xp_trace_record_clear();
	nbufs = 0;
	xp_trace_record_each(count_buf, w);
	assert_int_equal(nbufs, 0);
}

/* Buffers are faulted in at start (by the thread that starts, for the
 * threads that exist), not by the writer page after page: a page fault
 * costs microseconds on a VM, more than a thousand calls. */
static pthread_barrier_t started;

static void *faulted_thread(void *arg)
{
	struct stack *s = arg;
	pthread_barrier_wait(&started);
	call(s, 0, 1);
	ret(s, 0);
	return (void *)my_buf();
}

static void test_buffers_faulted_in_at_start(void **state)
{
	(void)state;
	void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int can = madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
	munmap(probe, 4096);
	if (!can)
		skip(); /* Linux < 5.14 */
	static struct stack s;
	pthread_t th;
	pthread_barrier_init(&started, NULL, 2);
	assert_int_equal(pthread_create(&th, NULL, faulted_thread, &s), 0);
	start(256, 0, NULL, 0);
	pthread_barrier_wait(&started);
	const struct xp_trace_buf *b;
	pthread_join(th, (void **)&b);
	pthread_barrier_destroy(&started);
	assert_non_null(b);
	size_t len = sizeof(*b) + b->cap * sizeof(b->rec[0]), pages = (len + 4095) / 4096, n = 0;
	unsigned char vec[pages];
	assert_int_equal(mincore((void *)b, len, vec), 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	assert_int_equal(n, pages);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_nesting, teardown),
		cmocka_unit_test_teardown(test_bad_config, teardown),
		cmocka_unit_test_teardown(test_args_records, teardown),
		cmocka_unit_test_teardown(test_depth_limit, teardown),
		cmocka_unit_test_teardown(test_depth_counts_from_the_request, teardown),
		cmocka_unit_test_teardown(test_shadow_overflow, teardown),
		cmocka_unit_test_teardown(test_longjmp, teardown),
		cmocka_unit_test_teardown(test_altstack, teardown),
		cmocka_unit_test_teardown(test_tail_call, teardown),
		cmocka_unit_test_teardown(test_lost_marker_first_after_restart, teardown),
		cmocka_unit_test_teardown(test_full_buffer, teardown),
		cmocka_unit_test_teardown(test_clear_and_stop, teardown),
		cmocka_unit_test_teardown(test_thread_selection, teardown),
		cmocka_unit_test_teardown(test_threads, teardown),
		cmocka_unit_test_teardown(test_buffers_faulted_in_at_start, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
