/* SPDX-License-Identifier: MIT */
/* mctop: memcached's hottest keys, counted inside memcached.
 *
 *   xprobes PID load build/modules/mctop.so
 *   xprobes PID command mctop.so top [N] [json|raw] [by=CMD,...]
 *                                   busiest N keys (default 20, at most 2000)
 *   xprobes PID command mctop.so budget [BYTES]   memory limit (default 8 MiB)
 *   xprobes PID command mctop.so reset            forget every key
 *   xprobes PID command mctop.so latency [auto|N] which commands are timed:
 *                                   auto (default; see lat_auto) or one in N
 *
 * "raw" is what the mctop tool reads; its format is documented in
 * tools/mctop/mctop.h.
 *
 * Handlers on every command__* site memcached's dtrace build has (get is
 * per key of a multi-get, hits and misses), typed as memcached_dtrace.d
 * declares them, and on process__command__start/end for latency.  Keys
 * are read by keylen, never as C strings.
 *
 * Hot path: a handler appends the key (or, at a command's end, its
 * latency) to a feed of its worker thread's own (modules/mctop/feed.h):
 * one line of one page, no lock, no write shared between workers, never a
 * wait (a full feed drops and counts).  A drainer thread of the module
 * applies the feeds to one Space-Saving table (modules/mctop/spacesaving.h)
 * when a feed is half full (a worker wakes it) or every second; `top` and
 * `reset` drain first, so they see every
 * command whose reply has gone out.  Why not count in the handler:
 * docs/design.md, "Why a feed".
 *
 * Latency, per connection and thread (never a global "last key"): a
 * worker's in-flight slots remember, per connection, when its command
 * started; process__command__end writes the elapsed time into the
 * command's key records, held back unpublished until then (see count),
 * or, for keys published earlier, feeds it as a record of its own, and
 * the drainer, which knows the counters those keys went to, gives each
 * of them the time.  A key whose counter was taken by another key
 * meanwhile loses that sample (the counter's tenure changed).  A busy
 * worker thread times one command in 8, the others' keys going out at
 * once marked untimed (lat_auto; `latency` sets it).
 *
 * Memory is bounded by the budget: the table grows while it allows and
 * then evicts, a cold key first counting in the table's filter (a key
 * the filter takes has no counter, so no latency); feeds and reading are charged too (feed_counters,
 * per_counter_bytes, top_reserve_bytes), so the module's whole footprint
 * stays within it whatever the key count.
 *
 * Reading (top): the table is read counter by counter under each
 * counter's own seqlock while the drainer keeps writing (see
 * spacesaving.h for why not a table-wide seqlock or a copy published by
 * the writer: the first starves the reader under load, the second costs a
 * copy).  "bound", the table's smallest count, is the most any key not
 * listed can have.
 *
 * Reset: bumps a generation under the drain lock, after a last drain; the
 * drainer clears the table at its next pass, and readers skip a table of
 * an older generation meanwhile. */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <linux/futex.h>

#include <xprobes/probe.h>

#include "memcached_probes.h"
#include "mctop/feed.h"
#include "mctop/spacesaving.h"
#include "thread_slot.h"

/* What a command's handlers run, together in one page of code: memcached
 * makes a few system calls per request, after which a handler pays for
 * the first touch of every page and line it uses (perf puts its samples
 * there: docs/design.md, "Pages a request touches").  Their slow paths
 * are out of line, elsewhere. */
#define MCTOP_HOT __attribute__((section(".text.mctop_hot")))
__asm__(".pushsection .text.mctop_hot,\"ax\",@progbits\n\t.balign 4096\n\t.popsection");

#define MCTOP_CHUNK 1024   /* counters a table grows by */
#define MCTOP_THREADS 64
#define MCTOP_INFLIGHT 4   /* connections with a command in flight, per thread */
#define MCTOP_PENDING 24   /* keys of one command awaiting its latency */
#define MCTOP_MAX_TOP 2000 /* rows a top may ask for */
#define MCTOP_DEFAULT_BUDGET (8ul << 20) /* see docs/design.md: why 8 MiB */
#define MCTOP_FEED_MIN (256u << 10) /* a worker's feed: ~6,000 requests, or more: */
#define MCTOP_FEED_MAX (2048u << 10) /* see feed_size */
#define MCTOP_FIRST_KEY 0x80u  /* in a key record's cmd: the first key of a command */
#define MCTOP_HAS_LAT 0x40u    /* in a FEED_KEY's cmd: lat_ns is its command's latency */
#define MCTOP_LAT_SAMPLE 8     /* a busy thread times one command in 8 (lat_auto) */
#define MCTOP_LAT_BUSY 20000   /* commands a second that make a thread busy (lat_auto) */
#define MCTOP_LAT_RANDOM 0x80000000u /* in lat_mask: choose at random, not every Nth */
#define MCTOP_LAT_TSC 0x40000000u    /* in lat_mask: stamps are TSC ticks (lat_flags) */
#define MCTOP_LAT_NO_HOLD 0x20000000u /* in lat_mask: hold no keys back (hold_off) */
#define MCTOP_LAT_EVERY_MAX 1024 /* `latency N`: N at most */
#define MCTOP_TIMED 1        /* inflight.timed: its latency goes as a record of its own */
#define MCTOP_TIMED_HOLD 2   /* inflight.timed: its keys wait for its latency */
#define MCTOP_HOLD_MAX (32u << 10) /* bytes of keys held back, at most */
#define DRAIN_AHEAD 16         /* records the drainer looks ahead (prefetch) */
#define DRAIN_IDLE_MS 1000     /* the drainer's period when no feed wakes it */

/* A command (or a pipelined batch) in flight on one connection of this
 * thread, as its handlers see it: when it started and how many keys it
 * fed so far.  24 bytes: every command's handlers scan all of a thread's
 * slots, and memcached's work between two commands leaves none of them
 * in L1 (perf: with 288-byte slots the scan was a quarter of on_start). */
struct inflight {
	int connid; /* -1: free */
	unsigned n;
	unsigned published; /* of the n keys, published before the command ended */
	/* A command memcached fires no command__* probe for when it succeeds
	 * (see unprobed_command): its key (in the thread's dkey[] of this
	 * slot), counted when the command ends unless a probe fired for it
	 * meanwhile. */
	uint8_t dcmd;   /* enum ss_cmd, SS_NCMD: none */
	uint8_t dlen;
	uint8_t timed;  /* t0 holds its start; MCTOP_TIMED_HOLD: its keys wait for its latency */
	uint64_t t0;
};

/* The same command as the drainer sees it: the counters its keys went to,
 * awaiting its latency. */
struct pending {
	int connid; /* -1: free */
	unsigned n;
	uint32_t ci[MCTOP_PENDING], tenure[MCTOP_PENDING];
};

struct thread_table {
	/* The first two lines: what every command's handlers touch. */
	atomic_uintptr_t self;       /* its owner's thread_self(), once set up (my_table) */
	struct feed *_Atomic feed;   /* the worker's, published once allocated */
	/* Worker-private. */
	/* Keys written to the feed but not yet published (feed_published()
	 * to wpos) are all of connection unpub_conn's command in flight: its
	 * end writes its latency into them. */
	int unpub_conn;
	unsigned fl_next;           /* the slot a new connection takes when all are busy */
	/* A command is timed when lat_seq has none of lat_mask's low bits
	 * (0: all timed): lat_seq counts commands, or with MCTOP_LAT_RANDOM
	 * is a random number drawn per command.  lat_auto sets the mask. */
	atomic_uint lat_mask;
	unsigned lat_seq;
	struct inflight fl[MCTOP_INFLIGHT];
	/* Then what only some commands touch. */
	atomic_uint_least64_t key_drops; /* keys a full feed refused */
	uint64_t kicked;            /* 1 + the feed's tail_seen when it last woke the drainer */
	unsigned feed_epoch;        /* budget_epoch when a feed could not be had */
	char dkey[MCTOP_INFLIGHT][SS_KEY_MAX]; /* fl[i]'s deferred key */
	/* Drainer-private. */
	struct pending pd[MCTOP_INFLIGHT];
	unsigned pd_next;
	uint64_t drops_seen;        /* of key_drops, already in untracked */
	uint64_t rate_cmds, rate_ns; /* commands drained since rate_ns (lat_auto) */
} __attribute__((aligned(128))); /* no false sharing between writers */

_Static_assert(offsetof(struct thread_table, key_drops) <= 128,
	       "a command's handlers touch the first two lines of their thread's table only");

static struct thread_table threads[MCTOP_THREADS];

/* The one table every worker's keys are counted in: the drainer is its
 * only writer, so one table serves all workers without contention, and
 * its counters go to the keys of the whole process. */
static struct {
	struct ss_table *_Atomic ss; /* published once allocated */
	atomic_uint gen;            /* generation it was last cleared for */
	atomic_uint_least64_t hits; /* keys counted since that clear */
} tab;
static pthread_mutex_t tab_create = PTHREAD_MUTEX_INITIALIZER;
static atomic_uintptr_t owners[MCTOP_THREADS]; /* threads[i]'s writer (thread_slot.h) */
static atomic_uint generation;
static atomic_uint_least64_t untracked; /* hits no table could take */
/* Counters the table and the feeds may still take (see budget_set). */
static atomic_long budget_left;
static atomic_ulong budget_bytes = MCTOP_DEFAULT_BUDGET;
static atomic_int budget_ready;
static atomic_uint budget_epoch = 1; /* bumped by `budget BYTES` */

/* The drainer: one thread, and whoever else drains (top, reset), takes
 * drain_lock; nothing on a worker's path does. */
static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint drain_kick; /* a futex: bumped to wake the drainer */
static atomic_uint_least64_t drain_passes, drain_kicks; /* for `budget` */
static long drain_idle_ms = DRAIN_IDLE_MS;
static int drain_stop;       /* under drain_lock */
static int drainer_error;    /* pthread_create's error, 0: running */
static pthread_t drainer;
static pid_t drainer_pid;    /* a forked child has no drainer to stop */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Latency is two stamps per command.  clock_gettime costs ~24 ns here and
 * rdtsc ~10, so where the TSC is usable (tsc_usable) stamps are TSC ticks,
 * converted to ns with a factor measured at load (ns = ticks * tsc_mult
 * >> 32); elsewhere they are clock_gettime's ns. */
static uint64_t tsc_mult;

/* A stamp, ticks with MCTOP_LAT_TSC in the thread's lat MASK: the worker
 * tells by the mask, on the line it reads anyway, not by tsc_mult, a line
 * of its own (perf: that load missed on a fifth of the timed commands'
 * starts).  Latencies travel the feed as ticks; the drainer converts. */
MCTOP_HOT static uint64_t stamp(unsigned mask)
{
#if defined(__x86_64__)
	if (mask & MCTOP_LAT_TSC)
		return __builtin_ia32_rdtsc();
#endif
	(void)mask;
	return now_ns();
}

/* A difference of two stamps in ns (the drainer's side). */
static uint64_t stamp_ns(uint64_t d)
{
	return tsc_mult ? (uint64_t)(((unsigned __int128)d * tsc_mult) >> 32) : d;
}

/* The TSC can stand in for the clock when it ticks at one rate whatever
 * the CPU's power state and on every CPU: the kernel keeps time with it
 * (clocksource "tsc"), or the CPU says so (constant_tsc and nonstop_tsc,
 * as under KVM, whose kvm-clock is itself built on that TSC). */
static int tsc_usable(void)
{
	char src[32] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
	if (f) {
		if (!fgets(src, sizeof(src), f))
			src[0] = '\0';
		fclose(f);
	}
	if (strcmp(src, "tsc\n") == 0)
		return 1;
	int constant = 0, nonstop = 0;
	char line[4096];
	f = fopen("/proc/cpuinfo", "re");
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5) != 0)
			continue;
		constant = strstr(line, " constant_tsc") != NULL;
		nonstop = strstr(line, " nonstop_tsc") != NULL;
		break;
	}
	if (f)
		fclose(f);
	return constant && nonstop;
}

__attribute__((constructor)) static void calibrate(void)
{
#if defined(__x86_64__)
	if (!tsc_usable())
		return;
	/* 5 ms against CLOCK_MONOTONIC: the factor to better than 0.1%. */
	uint64_t n0 = now_ns(), t0 = __builtin_ia32_rdtsc();
	struct timespec pause = { 0, 5000000 };
	nanosleep(&pause, NULL);
	uint64_t n1 = now_ns(), t1 = __builtin_ia32_rdtsc();
	if (t1 > t0 && n1 > n0)
		tsc_mult = (uint64_t)(((unsigned __int128)(n1 - n0) << 32) / (t1 - t0));
#endif
}

/* The calling thread's table (modules/thread_slot.h); a thread taking a
 * slot starts with no command in flight.  A thread that owns its home
 * slot (most do) finds it by the owner's id kept in the table's first
 * line, which the handler touches next anyway, instead of first loading
 * the line of owners[] (perf: my_table was a tenth of the handlers). */
static struct thread_table *my_table_slow(uintptr_t self);
static unsigned lat_flags(void);

MCTOP_HOT static struct thread_table *my_table(void)
{
	uintptr_t self = thread_self();
	struct thread_table *t = &threads[thread_slot_home(self, MCTOP_THREADS)];
	if (__builtin_expect(atomic_load_explicit(&t->self, memory_order_relaxed) == self, 1))
		return t;
	return my_table_slow(self);
}

/* A thread not in its home slot, or new: its slot, claimed if need be. */
__attribute__((noinline, cold)) static struct thread_table *my_table_slow(uintptr_t self)
{
	struct thread_table *t;
	int claimed;
	int i = thread_slot(owners, MCTOP_THREADS, &claimed);
	if (i < 0)
		return NULL;
	t = &threads[i];
	if (claimed) {
		for (unsigned k = 0; k < MCTOP_INFLIGHT; k++) {
			t->fl[k].connid = -1;
			t->fl[k].dcmd = SS_NCMD;
		}
		atomic_fetch_or_explicit(&t->lat_mask, lat_flags(), memory_order_relaxed);
		atomic_store_explicit(&t->self, self, memory_order_relaxed);
	}
	return t;
}

/* ---- The memory budget ----
 * Everything the module allocates is charged to it, counted in counters:
 * a counter's share of its table (ss_bytes_per_counter) and what reading
 * it costs (READ_BYTES_PER_COUNTER: its merged entry and the key copied),
 * and each worker's feed as the counters its bytes would make.  The rows
 * of a top are a fixed reserve. */
struct merged;
static size_t per_counter_bytes(void);
static size_t top_reserve_bytes(void);

/* Bytes of each worker's feed, set at load (feed_size_at_load). */
static uint32_t feed_size = MCTOP_FEED_MIN;

static long feed_counters(void)
{
	return (long)((feed_bytes(feed_size) + per_counter_bytes() - 1) / per_counter_bytes());
}

/* Counters the table and the feeds hold now. */
static long counters_taken(void)
{
	long n = 0;
	struct ss_table *ss = atomic_load_explicit(&tab.ss, memory_order_acquire);
	if (ss)
		n += (long)atomic_load_explicit(&ss->cap, memory_order_relaxed);
	for (unsigned i = 0; i < MCTOP_THREADS; i++)
		if (atomic_load_explicit(&threads[i].feed, memory_order_acquire))
			n += feed_counters();
	return n;
}

static void budget_set(unsigned long bytes)
{
	long total = 0;
	if (bytes > top_reserve_bytes())
		total = (long)((bytes - top_reserve_bytes()) / per_counter_bytes());
	long left = total - counters_taken();
	atomic_store(&budget_left, left > 0 ? left : 0);
	atomic_store(&budget_bytes, bytes);
	atomic_fetch_add(&budget_epoch, 1);
}

static void budget_init(void)
{
	if (!atomic_load_explicit(&budget_ready, memory_order_acquire)) {
		static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
		pthread_mutex_lock(&once);
		if (!atomic_load(&budget_ready)) {
			budget_set(atomic_load(&budget_bytes));
			atomic_store_explicit(&budget_ready, 1, memory_order_release);
		}
		pthread_mutex_unlock(&once);
	}
}

static struct ss_table *table_create(void)
{
	budget_init();
	return ss_create(MCTOP_CHUNK, SS_MAX_CHUNKS, &budget_left);
}

/* The table, made by the first worker to need it; NULL when the budget
 * or memory does not allow. */
static struct ss_table *the_table(void)
{
	struct ss_table *ss = atomic_load_explicit(&tab.ss, memory_order_acquire);
	if (ss)
		return ss;
	pthread_mutex_lock(&tab_create);
	if (!(ss = atomic_load(&tab.ss)) && (ss = table_create())) {
		atomic_store_explicit(&tab.gen, atomic_load(&generation), memory_order_relaxed);
		atomic_store_explicit(&tab.ss, ss, memory_order_release);
	}
	pthread_mutex_unlock(&tab_create);
	return ss;
}

/* Tests make the first N feed allocations fail (MCTOP_TEST_FAIL_FEEDS=N
 * in memcached's environment, read at load), and the rows of the first N
 * tops (MCTOP_TEST_FAIL_TOPS=N). */
static atomic_int feeds_to_fail, tops_to_fail;

/* Whether this allocation is one a test made fail (one of *left). */
static int fails_for_test(atomic_int *left)
{
	return atomic_load_explicit(left, memory_order_relaxed) > 0 &&
	       atomic_fetch_sub(left, 1) > 0;
}

static struct feed *feed_alloc(void)
{
	return fails_for_test(&feeds_to_fail) ? NULL : feed_create(feed_size);
}

/* The calling worker's feed, made on its first hit while the budget
 * allows it and the table (a feed whose keys had no table would count
 * nothing); NULL when it does not (tried again after `budget BYTES`). */
static struct feed *my_feed_make(struct thread_table *t);

MCTOP_HOT static struct feed *my_feed(struct thread_table *t)
{
	struct feed *fd = atomic_load_explicit(&t->feed, memory_order_relaxed);
	if (__builtin_expect(fd != NULL, 1))
		return fd;
	return my_feed_make(t);
}

__attribute__((noinline, cold)) static struct feed *my_feed_make(struct thread_table *t)
{
	struct feed *fd;
	budget_init(); /* first, so that setting it up is not taken for a new budget */
	unsigned epoch = atomic_load_explicit(&budget_epoch, memory_order_relaxed);
	if (t->feed_epoch == epoch)
		return NULL;
	long want = feed_counters();
	if (!the_table()) {
		t->feed_epoch = epoch; /* a budget set meanwhile makes it try again */
		return NULL;
	}
	if (atomic_fetch_sub(&budget_left, want) < want || !(fd = feed_alloc())) {
		atomic_fetch_add(&budget_left, want);
		t->feed_epoch = epoch;
		return NULL;
	}
	/* The drainer's side, set up before it can see the feed. */
	for (unsigned i = 0; i < MCTOP_INFLIGHT; i++)
		t->pd[i].connid = -1;
	atomic_store_explicit(&t->feed, fd, memory_order_release);
	return fd;
}

/* The connection's command in flight on this worker, or NULL. */
MCTOP_HOT static struct inflight *inflight_of(struct thread_table *t, int connid)
{
	for (unsigned i = 0; i < MCTOP_INFLIGHT; i++)
		if (t->fl[i].connid == connid)
			return &t->fl[i];
	return NULL;
}

/* Tests publish every key at once (MCTOP_TEST_NO_HOLD in memcached's
 * environment, read at load), so that every latency takes the way of a
 * key published before its command ended: a record of its own. */
static int hold_off;

/* The bits every lat_mask carries besides its sample, for the worker to
 * read with it (set when a thread takes its table, and with every mask
 * stored since): both are fixed at load. */
static unsigned lat_flags(void)
{
	return (tsc_mult ? MCTOP_LAT_TSC : 0) | (hold_off ? MCTOP_LAT_NO_HOLD : 0);
}

/* Publish the keys still held back for their command's latency: that
 * command's end will send its latency as a record of its own (the drainer
 * keeps the keys' counters for it). */
MCTOP_HOT static void publish_held(struct thread_table *t, struct feed *fd)
{
	if (!fd || feed_published(fd) == fd->wpos)
		return;
	struct inflight *f = inflight_of(t, t->unpub_conn);
	if (f)
		f->published = f->n;
	feed_publish(fd);
}

/* Wake the drainer, from a worker's handler: bump the futex word, and a
 * FUTEX_WAKE system call, which never blocks. */
__attribute__((noinline, cold)) static void drainer_kick(void)
{
	atomic_fetch_add_explicit(&drain_kick, 1, memory_order_release);
	syscall(SYS_futex, (uint32_t *)&drain_kick, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* The drainer sleeps until its feeds fill, not on a short timer: a worker
 * whose feed is half full wakes it, once per time the drainer gave that
 * feed back (so a drainer slow to run is not woken again and again).  See
 * drain_loop for why long batches. */
MCTOP_HOT static void wake_drainer_if_due(struct thread_table *t, struct feed *fd)
{
	if (!feed_over(fd, fd->size / 2) || t->kicked == fd->tail_seen + 1)
		return;
	t->kicked = fd->tail_seen + 1;
	atomic_fetch_add_explicit(&drain_kicks, 1, memory_order_relaxed);
	drainer_kick();
}

/* One command of KEY on connection CONNID: fed to the drainer, which
 * counts it in the table.  A key of a timed command in flight is held
 * back (written, not published) until the command ends, which writes its
 * latency into the key's record: the drainer then applies both at once
 * (a separate latency record cost it ~40 ns a request, side by side).
 * The keys held are one connection's: another's key publishes them, and
 * so do more than MCTOP_HOLD_MAX bytes of them (a multi-get of thousands
 * of keys), so that the drainer can take them while the command runs. */
MCTOP_HOT static void count(int connid, const char *key, int keylen, unsigned cmd, int64_t size)
{
	struct thread_table *t = my_table();
	struct feed *fd = t ? my_feed(t) : NULL;
	if (!fd || keylen <= 0) {
		atomic_fetch_add_explicit(&untracked, 1, memory_order_relaxed);
		return;
	}
	if (keylen > SS_KEY_MAX)
		keylen = SS_KEY_MAX;
	struct inflight *f = inflight_of(t, connid);
	if (f && f->dcmd != SS_NCMD && f->dlen == (unsigned)keylen &&
	    memcmp(t->dkey[f - t->fl], key, (size_t)keylen) == 0)
		f->dcmd = SS_NCMD; /* memcached did report it (a miss) */
	/* The first key of a command tells the drainer to forget keys of the
	 * connection whose latency never came (a feed that was full then).
	 * The keys of a command not timed go at once, marked so that the
	 * drainer expects no latency for them. */
	unsigned first = f && f->n == 0 ? MCTOP_FIRST_KEY : 0;
	int hold = f && f->timed == MCTOP_TIMED_HOLD;
	if (!hold || t->unpub_conn != connid || fd->wpos - feed_published(fd) >= MCTOP_HOLD_MAX)
		publish_held(t, fd);
	int32_t value = size > INT32_MAX ? INT32_MAX : (int32_t)size;
	/* A key of a command not timed (lat_auto) needs neither its
	 * connection (no latency will look for it) nor a latency: a short
	 * record, with the connection's bit of the key's clients beside its
	 * kind.  Eight bytes less of the feed per request, a quarter of it
	 * with memcached's short keys: fewer lines written and read, and
	 * passes a quarter rarer, each of which costs memcached its caches
	 * (see drain_loop). */
	if (!(f && !f->timed ? feed_write_short(fd, cmd | first,
						ss_client_index(connid), value, key,
						(unsigned)keylen)
			     : feed_write(fd, FEED_KEY, cmd | first, connid, value, 0, key,
					  (unsigned)keylen))) {
		atomic_store_explicit(&t->key_drops,
				      atomic_load_explicit(&t->key_drops, memory_order_relaxed) + 1,
				      memory_order_relaxed);
		return;
	}
	wake_drainer_if_due(t, fd);
	if (!hold) {
		feed_publish(fd);
		if (f)
			f->published = ++f->n;
		return;
	}
	t->unpub_conn = connid;
	f->n++;
}

/* memcached 1.6.18 fires no command__* probe for a meta get that hits
 * ("mg KEY ...": only misses fire command__get) nor for a text touch.
 * Such a command is recognised from the request at its start, and counted
 * when it ends unless a probe fired for its key meanwhile.  Returns the
 * command and sets *key, *len; SS_NCMD for any other request. */
MCTOP_HOT static unsigned unprobed_command(const char *req, int size, const char **key,
					   unsigned *len)
{
	unsigned cmd;
	int skip;
	if (size > 3 && memcmp(req, "mg ", 3) == 0)
		cmd = SS_GET_HIT, skip = 3;
	else if (size > 6 && memcmp(req, "touch ", 6) == 0)
		cmd = SS_TOUCH, skip = 6;
	else
		return SS_NCMD;
	int n = 0;
	/* memcached has cut the line at its end ('\0') before the probe fires. */
	while (skip + n < size && n <= SS_KEY_MAX && req[skip + n] != ' ' &&
	       req[skip + n] != '\r' && req[skip + n] != '\n' && req[skip + n] != '\0')
		n++;
	if (n == 0 || n > SS_KEY_MAX || skip + n == size)
		return SS_NCMD; /* no key, too long, or the line is not whole */
	*key = req + skip;
	*len = (unsigned)n;
	return cmd;
}

/* Count a deferred command of f's connection (it succeeded unprobed). */
MCTOP_HOT static void settle(struct thread_table *t, struct inflight *f)
{
	if (f->dcmd == SS_NCMD)
		return;
	unsigned cmd = f->dcmd;
	f->dcmd = SS_NCMD;
	count(f->connid, t->dkey[f - t->fl], (int)f->dlen, cmd, -1);
}

/* What a lat_mask times: one command in this many. */
MCTOP_HOT static unsigned lat_one_in(unsigned mask)
{
	return (mask & (MCTOP_LAT_EVERY_MAX - 1)) + 1;
}

/* The thread's next command number, or with MCTOP_LAT_RANDOM in MASK a
 * random one (xorshift32, its top bits): every Nth command of a thread
 * would time the same connections over and over when they take turns,
 * and a key only they use would show no latency at all. */
MCTOP_HOT static unsigned next_lat_seq(struct thread_table *t, unsigned mask)
{
	if (!(mask & MCTOP_LAT_RANDOM))
		return t->lat_seq++;
	unsigned x = t->lat_seq ? t->lat_seq : 0x9e3779b9u;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	t->lat_seq = x;
	return x >> 22;
}

/* process__command__start: the read buffer of CONNID is about to be
 * parsed.  Under pipelining it fires per command while one end fires for
 * the batch, so a connection whose keys still wait keeps its first start:
 * each key of a batch gets the batch's latency, which is what its client
 * waited for the reply. */
MCTOP_HOT static void on_start(int connid, const void *request, int size)
{
	struct thread_table *t = my_table();
	if (!t)
		return;
	struct inflight *f = NULL, *free_slot = NULL;
	for (unsigned i = 0; i < MCTOP_INFLIGHT; i++) {
		if (t->fl[i].connid == connid)
			f = &t->fl[i];
		else if (!free_slot && (t->fl[i].connid < 0 ||
					(t->fl[i].n == 0 && t->fl[i].dcmd == SS_NCMD)))
			free_slot = &t->fl[i];
	}
	if (f) {
		settle(t, f); /* the previous command of a batch */
	} else {
		f = free_slot ? free_slot : &t->fl[t->fl_next++ % MCTOP_INFLIGHT];
		if (f->connid >= 0 && f->connid == t->unpub_conn) /* its held keys go now */
			publish_held(t, atomic_load_explicit(&t->feed, memory_order_relaxed));
		f->connid = connid;
		f->dcmd = SS_NCMD;
		f->n = 0;
		f->published = 0;
	}
	if (!f->n) {
		/* Timed: all commands, or one in lat_one_in(lat_mask). */
		unsigned mask = atomic_load_explicit(&t->lat_mask, memory_order_relaxed);
		f->timed = 0;
		if ((next_lat_seq(t, mask) & (lat_one_in(mask) - 1)) == 0) {
			f->timed = mask & MCTOP_LAT_NO_HOLD ? MCTOP_TIMED : MCTOP_TIMED_HOLD;
			f->t0 = stamp(mask);
		}
	}
	const char *key;
	unsigned len;
	if (request && (f->dcmd = unprobed_command(request, size, &key, &len)) != SS_NCMD) {
		memcpy(t->dkey[f - t->fl], key, len);
		f->dlen = (uint8_t)len;
	}
}

/* process__command__end: the reply goes out; every key of the command
 * (batch) gets the time since its start, through the feed. */
MCTOP_HOT static void on_end(int connid, const void *response, int size)
{
	(void)response, (void)size;
	struct thread_table *t = my_table();
	if (!t)
		return;
	struct inflight *f = inflight_of(t, connid);
	if (f)
		settle(t, f); /* may count a key, and make the feed */
	struct feed *fd = atomic_load_explicit(&t->feed, memory_order_relaxed);
	if (!f || !f->n || !f->timed) {
		/* No keys of this command, or not timed (its keys went at
		 * once): none of the connection's may wait. */
		if (t->unpub_conn == connid)
			publish_held(t, fd);
		if (f)
			f->n = 0, f->published = 0;
		return;
	}
	if (fd) {
		/* In ticks or ns, as f->t0 (the TSC bit never changes). */
		uint64_t lat = stamp(atomic_load_explicit(&t->lat_mask, memory_order_relaxed)) - f->t0;
		if (t->unpub_conn == connid && feed_published(fd) != fd->wpos && lat <= UINT32_MAX) {
			uint64_t pos = feed_published(fd);
			struct feed_rec *r;
			while ((r = feed_unpublished(fd, &pos)))
				if (feed_kind(r) == FEED_KEY) {
					r->cmd |= MCTOP_HAS_LAT;
					r->lat_ns = (uint32_t)lat;
				}
			feed_publish(fd);
		} else {
			/* Its keys went out already, or the latency does not fit
			 * lat_ns: all of them take the latency record. */
			publish_held(t, fd);
			f->published = f->n;
		}
		if (f->published)
			feed_put(fd, FEED_LATENCY, 0, connid, (int32_t)(uint32_t)(lat >> 32),
				 (uint32_t)lat, NULL, 0);
	}
	f->n = 0;
	f->published = 0;
}

/* memcached's size is the item's nbytes, the value plus its "\r\n"; -1 on
 * a miss or a failed store. */
static int64_t value_size(int size)
{
	return size >= 2 ? size - 2 : -1;
}

#define SIZED_HANDLER(name, cmd)                                                          \
	MCTOP_HOT static void on_##name(int connid, const char *key, int keylen, int size, \
			      int64_t casid)                                              \
	{                                                                                 \
		(void)casid;                                                              \
		count(connid, key, keylen, cmd, value_size(size));                        \
	}
SIZED_HANDLER(set, SS_SET)
SIZED_HANDLER(add, SS_ADD)
SIZED_HANDLER(replace, SS_REPLACE)
SIZED_HANDLER(append, SS_APPEND)
SIZED_HANDLER(prepend, SS_PREPEND)
SIZED_HANDLER(cas, SS_CAS)
SIZED_HANDLER(touch, SS_TOUCH)

MCTOP_HOT static void on_get(int connid, const char *key, int keylen, int size, int64_t casid)
{
	(void)casid;
	count(connid, key, keylen, size >= 0 ? SS_GET_HIT : SS_GET_MISS, value_size(size));
}

MCTOP_HOT static void on_incr(int connid, const char *key, int keylen, int64_t val)
{
	(void)val;
	count(connid, key, keylen, SS_INCR, -1);
}

MCTOP_HOT static void on_decr(int connid, const char *key, int keylen, int64_t val)
{
	(void)val;
	count(connid, key, keylen, SS_DECR, -1);
}

MCTOP_HOT static void on_delete(int connid, const char *key, int keylen)
{
	count(connid, key, keylen, SS_DELETE, -1);
}

/* ---- The drainer: feeds into the table ----
 * Everything here runs under drain_lock, by the drainer thread or by a
 * command (top, reset) draining before it reads. */

/* The drainer's record of CONNID's command on thread T.  FIRST: its first
 * key, so keys still waiting from before are forgotten. */
static struct pending *pending_of(struct thread_table *t, int connid, int first)
{
	struct pending *p = NULL, *free_slot = NULL;
	for (unsigned i = 0; i < MCTOP_INFLIGHT; i++) {
		if (t->pd[i].connid == connid)
			p = &t->pd[i];
		else if (!free_slot && (t->pd[i].connid < 0 || t->pd[i].n == 0))
			free_slot = &t->pd[i];
	}
	if (!p) {
		p = free_slot ? free_slot : &t->pd[t->pd_next++ % MCTOP_INFLIGHT];
		p->connid = connid;
		p->n = 0;
	}
	if (first)
		p->n = 0;
	return p;
}

/* A command's first key: keys of CONNID still waiting for a latency that
 * never came (a full feed refused it) wait no more. */
static void forget_pending(struct thread_table *t, int connid)
{
	for (unsigned i = 0; i < MCTOP_INFLIGHT; i++)
		if (t->pd[i].connid == connid)
			t->pd[i].n = 0;
}

/* Apply what thread T's feed holds.  Returns the commands applied (their
 * first keys). */
static uint64_t drain_thread(struct thread_table *t)
{
	struct feed *fd = atomic_load_explicit(&t->feed, memory_order_acquire);
	if (!fd)
		return 0;
	uint64_t drops = atomic_load_explicit(&t->key_drops, memory_order_relaxed);
	if (drops != t->drops_seen) {
		atomic_fetch_add_explicit(&untracked, drops - t->drops_seen, memory_order_relaxed);
		t->drops_seen = drops;
	}
	uint64_t pos = feed_tail(fd), head = feed_head(fd);
	if (pos == head)
		return 0;
	struct ss_table *ss = atomic_load_explicit(&tab.ss, memory_order_relaxed); /* made before any feed */
	uint64_t hits = atomic_load_explicit(&tab.hits, memory_order_relaxed), cmds = 0;
	/* A window of the next records, hashed as they enter it, so that a
	 * key's index slot is fetched DRAIN_AHEAD records before its update
	 * and its counter half as far ahead (ss_prefetch_*): the updates'
	 * cache misses overlap instead of following one another. */
	const struct feed_rec *ahead[DRAIN_AHEAD];
	uint64_t hash[DRAIN_AHEAD];
	unsigned in = 0, out = 0;
	for (;;) {
		while (in - out < DRAIN_AHEAD) {
			const struct feed_rec *r = feed_next(fd, &pos, head);
			if (!r)
				break;
			/* The worker wrote these lines milliseconds ago: gone
			 * from this core's caches (perf: a tenth of the time
			 * was hashing's first read of the key). */
			__builtin_prefetch(fd->buf + ((pos + 512) & (fd->size - 1)));
			ahead[in % DRAIN_AHEAD] = r;
			if (feed_kind(r) != FEED_LATENCY) { /* a key, short or long */
				hash[in % DRAIN_AHEAD] = ss_hash(feed_key(r), r->keylen);
				ss_prefetch_slot(ss, hash[in % DRAIN_AHEAD]);
			}
			in++;
		}
		if (in == out)
			break;
		if (in - out > DRAIN_AHEAD / 2) {
			unsigned mid = (out + DRAIN_AHEAD / 2) % DRAIN_AHEAD;
			if (feed_kind(ahead[mid]) != FEED_LATENCY)
				ss_prefetch_counter(ss, hash[mid],
						    ahead[mid]->cmd & MCTOP_HAS_LAT
							    ? stamp_ns(ahead[mid]->lat_ns) : 0);
		}
		const struct feed_rec *r = ahead[out % DRAIN_AHEAD];
		uint64_t h = hash[out % DRAIN_AHEAD];
		out++;
		if (feed_kind(r) != FEED_LATENCY) { /* a key, short or long */
			hits++;
			cmds += (r->cmd & MCTOP_FIRST_KEY) != 0;
			if (feed_kind(r) == FEED_KEY_SHORT) {
				/* Not timed: no latency to wait for.  Its connection
				 * is not in the record, so unlike a long first key
				 * it does not forget the connection's keys whose
				 * latency never came (a full feed): the next timed
				 * command's first key does (pending_of, or
				 * forget_pending when it carries its latency),
				 * before any latency of that connection. */
				struct ss_event e = { r->cmd & ~MCTOP_FIRST_KEY, r->value, 0,
						      1ull << feed_aux(r), 0, 0 };
				ss_add_hashed(ss, feed_key(r), r->keylen, h, &e);
				continue;
			}
			unsigned cmd = r->cmd & ~(MCTOP_FIRST_KEY | MCTOP_HAS_LAT);
			int has_lat = (r->cmd & MCTOP_HAS_LAT) != 0;
			/* now_ns 0: a key new to the table was first seen now,
			 * by the drainer's clock (a pass behind at most). */
			struct ss_event e = { cmd, r->value, 0, ss_client_bit(r->connid), has_lat,
					      has_lat ? stamp_ns(r->lat_ns) : 0 };
			/* A key the filter took (SS_UNTRACKED) has no counter for
			 * its latency: below the bound, it is in no row. */
			uint32_t ci = ss_add_hashed(ss, feed_key(r), r->keylen, h, &e);
			if (has_lat) { /* no latency to wait for */
				if (r->cmd & MCTOP_FIRST_KEY)
					forget_pending(t, r->connid);
				continue;
			}
			struct pending *p = pending_of(t, r->connid, r->cmd & MCTOP_FIRST_KEY);
			if (ci != SS_UNTRACKED && p->n < MCTOP_PENDING) {
				p->ci[p->n] = ci;
				p->tenure[p->n++] = ss_tenure(ss, ci);
			}
		} else {
			uint64_t lat = stamp_ns((uint64_t)(uint32_t)r->value << 32 | r->lat_ns);
			for (unsigned i = 0; i < MCTOP_INFLIGHT; i++) {
				struct pending *p = &t->pd[i];
				if (p->connid != r->connid)
					continue;
				for (unsigned k = 0; k < p->n; k++)
					ss_latency(ss, p->ci[k], p->tenure[k], lat);
				p->n = 0;
			}
		}
	}
	atomic_store_explicit(&tab.hits, hits, memory_order_relaxed);
	feed_consume(fd, pos);
	return cmds;
}

/* Which commands a worker times (`latency`): 0, automatically (lat_auto);
 * N, one in N (a power of two) whatever the load.  Under drain_lock. */
static unsigned lat_every;
static uint64_t lat_busy = MCTOP_LAT_BUSY; /* commands/s; tests lower it */

/* Two time stamps are ~20 ns of a command (rdtsc is ~10 ns on this VM,
 * perf: half of on_start's and on_end's time), a third of what the
 * handlers cost memcached per request.  So a worker thread that did more
 * than MCTOP_LAT_BUSY commands (with keys) a second since the last look,
 * 100 ms or more ago, times one command in MCTOP_LAT_SAMPLE, chosen at
 * random: a key's mean latency and histogram are then those of a random
 * sample, which for a key hot enough to matter is hundreds of commands a
 * second.  Below that rate every command is timed: the cost is nothing
 * there.  CMDS were just drained from T at NOW. */
static void lat_auto(struct thread_table *t, uint64_t cmds, uint64_t now)
{
	if (lat_every) /* `latency N` set the masks */
		return;
	t->rate_cmds += cmds;
	if (now - t->rate_ns < 100000000u)
		return;
	/* A thread with no commands since the last look keeps its mode (it
	 * times nothing meanwhile); its next look sees its rate since this
	 * one.  In 128 bits: the first look spans the time since boot. */
	if (t->rate_cmds) {
		unsigned mask = (unsigned __int128)t->rate_cmds * 1000000000u >
					(unsigned __int128)lat_busy * (now - t->rate_ns)
			? (MCTOP_LAT_SAMPLE - 1) | MCTOP_LAT_RANDOM : 0;
		/* Stored only when it changes: the worker reads this line on
		 * every command. */
		mask |= lat_flags();
		if (atomic_load_explicit(&t->lat_mask, memory_order_relaxed) != mask)
			atomic_store_explicit(&t->lat_mask, mask, memory_order_relaxed);
	}
	t->rate_cmds = 0;
	t->rate_ns = now;
}

/* Drain every feed. */
static void drain_all(void)
{
	struct ss_table *ss = atomic_load_explicit(&tab.ss, memory_order_acquire);
	unsigned gen = atomic_load_explicit(&generation, memory_order_relaxed);
	if (ss && atomic_load_explicit(&tab.gen, memory_order_relaxed) != gen) { /* a reset */
		ss_clear(ss);
		for (unsigned i = 0; i < MCTOP_THREADS; i++)
			for (unsigned k = 0; k < MCTOP_INFLIGHT; k++)
				threads[i].pd[k].n = 0;
		atomic_store_explicit(&tab.hits, 0, memory_order_relaxed);
		atomic_store_explicit(&tab.gen, gen, memory_order_release);
	}
	uint64_t now = now_ns();
	for (unsigned i = 0; i < MCTOP_THREADS; i++)
		lat_auto(&threads[i], drain_thread(&threads[i]), now);
}

/* The drainer thread: drains every feed, then sleeps until a worker's
 * feed is half full (wake_drainer_if_due) or DRAIN_IDLE_MS pass.  Long
 * batches are cheap batches: each pass starts with the table's pages gone
 * from the TLB and its lines from the caches (memcached ran in between),
 * and the more records a pass applies, the more of them find their
 * counter's page walked and its lines fetched by a record before them.
 * Drainer CPU per memcached request, memcached -t 1 under mcload Zipf(0.99)
 * over 1M keys (docs/design.md): 141-147 ns with a pass every 8 ms, 78-80
 * ns every 32 ms.  And a pass takes memcached's lines out of the core's
 * caches: with the timer at 1 s instead of 100 ms (so that at saturation
 * passes come every ~220 ms, at half of -t 1's 2 MiB feed, instead of
 * every 100 ms) the module cost memcached ~40 ns a request less, of which
 * the drainer's own time only 3-4.  Readers lose nothing by it: `top` and
 * `reset` drain first.  A timer alone could not wait that long: a burst
 * fills a 256 KiB feed in ~13 ms, and bigger feeds are charged to the
 * budget. */
static void *drain_loop(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&drain_lock);
	while (!drain_stop) {
		/* Read before draining: a kick during the pass makes the wait
		 * below return at once, so no feed waits for the timer after
		 * it asked for a pass. */
		unsigned seen = atomic_load_explicit(&drain_kick, memory_order_acquire);
		drain_all();
		atomic_fetch_add_explicit(&drain_passes, 1, memory_order_relaxed);
		pthread_mutex_unlock(&drain_lock);
		struct timespec idle = { drain_idle_ms / 1000, drain_idle_ms % 1000 * 1000000 };
		syscall(SYS_futex, (uint32_t *)&drain_kick, FUTEX_WAIT_PRIVATE, seen, &idle, NULL, 0);
		pthread_mutex_lock(&drain_lock);
	}
	pthread_mutex_unlock(&drain_lock);
	return NULL;
}

/* The feeds' size, at load: a quarter of the default budget shared by
 * memcached's worker threads (named mc-worker), a power of two from
 * 256 KiB to 2 MiB.  Bigger feeds let the drainer wait longer (it wakes
 * at half a feed), and longer passes are cheaper: with 1 MiB instead of
 * 256 KiB the drainer cost 59 ns a request instead of 84, with 2 MiB
 * 46 instead of 59 (bench/mctop_variants.py, memcached -t 1 at
 * saturation).  But feeds are charged to the budget, so with many
 * workers they stay at 256 KiB (-t 8 and up at the default 8 MiB): 16
 * workers with 512 KiB feeds left a quarter of the commands uncounted.
 * Workers not found (another memcached's thread names): 256 KiB. */
static uint32_t feed_size_at_load(void)
{
	unsigned workers = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[64], comm[32] = "";
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%.20s/comm", e->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && strcmp(comm, "mc-worker\n") == 0)
			workers++;
		fclose(f);
	}
	if (d)
		closedir(d);
	uint32_t size = MCTOP_FEED_MIN;
	while (workers && size < MCTOP_FEED_MAX &&
	       (uint64_t)size * 2 * workers <= MCTOP_DEFAULT_BUDGET / 4)
		size *= 2;
	return size;
}

/* At load: the drainer, with every asynchronous signal blocked so that
 * memcached's signals keep going to memcached's threads.  The synchronous
 * ones stay open, as in the agent's threads (lib/base/thread.c): a fault must
 * reach memcached's handler, and SIGTRAP is how the function tracer
 * switches safely (lib/trace/trace_patch.c refuses while a thread blocks it).
 * Without the drainer (pthread_create failed) feeds are drained by top
 * and reset only, and a feed that fills in between drops (counted
 * untracked); `budget` says so. */
__attribute__((constructor)) static void drainer_start(void)
{
	feed_size = feed_size_at_load();
	/* Tests make the timer wait ~forever, so that only kicks drain. */
	const char *idle = getenv("MCTOP_TEST_DRAIN_MS");
	if (idle && atol(idle) > 0)
		drain_idle_ms = atol(idle);
	hold_off = getenv("MCTOP_TEST_NO_HOLD") != NULL;
	/* Tests make a thread busy at a rate any load reaches. */
	const char *busy = getenv("MCTOP_TEST_LAT_BUSY");
	if (busy && atol(busy) > 0)
		lat_busy = (uint64_t)atol(busy);
	const char *fail = getenv("MCTOP_TEST_FAIL_FEEDS");
	if (fail)
		atomic_store(&feeds_to_fail, atoi(fail));
	if ((fail = getenv("MCTOP_TEST_FAIL_TOPS")))
		atomic_store(&tops_to_fail, atoi(fail));
	/* Tests make pthread_create fail here, in memcached's environment. */
	if (getenv("MCTOP_TEST_NO_DRAINER")) {
		drainer_error = EAGAIN;
		return;
	}
	sigset_t all, old;
	sigfillset(&all);
	static const int synchronous[] = { SIGTRAP, SIGSEGV, SIGBUS, SIGILL, SIGFPE };
	for (unsigned i = 0; i < sizeof(synchronous) / sizeof(synchronous[0]); i++)
		sigdelset(&all, synchronous[i]);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	drainer_error = pthread_create(&drainer, NULL, drain_loop, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	drainer_pid = getpid();
	if (!drainer_error)
		pthread_setname_np(drainer, "mctop-drain");
}

/* ---- Reading: copy the table ----
 *
 * Pass 1 copies counters by key into compact entries (counts and the key,
 * copied to an arena), and the busiest N are picked (a heap, not a sort
 * of all); pass 2 reads again only those N counters and takes the rest
 * (bytes, latency, per-command counts, histogram).  Ranked by calls, pass
 * 1 reads only the counters of the busiest buckets, with the drainer kept
 * out, so both passes see one table (see top).  Ranked by=, pass 1 reads
 * every counter while the drainer writes, so the two passes can differ by
 * the commands of the moment in between; a key evicted and taken again
 * during pass 1 can be met twice (it keeps its larger copy), and a row
 * whose counter holds another key by pass 2 gets the bound.  A `top 200`
 * of a full 8 MiB table read every counter and cost memcached 2.0 ms of
 * CPU (5.5 ms when pass 2 also read every counter, all were sorted and the
 * memory was allocated afresh). */

struct merged {
	uint64_t hash, count, err, rank;
	uint32_t ci;     /* the counter of its (larger) copy, for pass 2 */
	uint32_t keyoff; /* in the arena */
	uint32_t row;    /* + 1 in the answer, 0: not asked for */
	uint16_t keylen;
	uint8_t copied;  /* pass 1 met it already */
};

/* A row's numbers. */
struct acc {
	uint64_t count, err;   /* pass 2's own, so calls - err = the commands below */
	int found;             /* pass 2 met its key */
	uint64_t bytes, first_ns, clients, lat_sum, lat_n;
	int64_t objsize;
	uint64_t ncmd[SS_NCMD], hist[SS_HIST];
};

/* What one counter costs a reader at most, kept between tops: its merged
 * entry, four index slots (a power of two at least twice the counters),
 * its key in the arena, its line in the duplicate check and its place in
 * the order. */
#define READ_BYTES_PER_COUNTER                                                     \
	(sizeof(struct merged) + 4 * sizeof(uint32_t) + SS_KEY_MAX +               \
	 sizeof(struct seen) + sizeof(struct merged *))

/* Pass 1's record of one table's counters, to undo a duplicate. */
struct seen {
	struct merged *e;
	uint64_t count, err, rank;
};

static size_t per_counter_bytes(void)
{
	return ss_bytes_per_counter() + READ_BYTES_PER_COUNTER;
}

/* A top's fixed share: per row it may ask for, the row and the counter
 * it is read from (rd.list); one counter's copy. */
static size_t top_reserve_bytes(void)
{
	return MCTOP_MAX_TOP * (sizeof(struct acc) + sizeof(struct merged *) + sizeof(uint32_t)) +
	       sizeof(struct ss_snap);
}

struct merge {
	struct merged *e;
	uint32_t *index; /* entry + 1, open addressing */
	uint32_t n, cap, mask;
	uint32_t tracked; /* keys in the table */
	char *arena;
	size_t arena_len, arena_cap;
	uint64_t total;
	uint64_t bound; /* the table's smallest count: the most an unlisted key can have */
	unsigned by_mask; /* bits of enum ss_cmd to rank by; 0: calls */
};

/* The commands of by= summed, from a snapshot's counts or a row's. */
static uint64_t by_sum(unsigned mask, const uint32_t *n32, const uint64_t *n64)
{
	uint64_t r = 0;
	for (unsigned k = 0; k < SS_NCMD; k++)
		if (mask & (1u << k))
			r += n32 ? n32[k] : n64[k];
	return r;
}

static uint64_t rank_of(const struct merge *m, const struct ss_snap *s)
{
	return m->by_mask ? by_sum(m->by_mask, s->ncmd, NULL) : s->count;
}

static uint64_t rank_of_acc(const struct merge *m, const struct acc *a)
{
	return m->by_mask ? by_sum(m->by_mask, NULL, a->ncmd) : a->count;
}

/* The entry of the key in s (made if new; NULL when out of room). */
static struct merged *merge_find(struct merge *m, const struct ss_snap *s, int create)
{
	uint64_t h = ss_hash(s->key, s->keylen);
	for (uint32_t i = (uint32_t)h & m->mask;; i = (i + 1) & m->mask) {
		if (m->index[i] == 0) {
			if (!create || m->n == m->cap)
				return NULL;
			if (m->arena_len + s->keylen > m->arena_cap) {
				size_t want = m->arena_cap ? 2 * m->arena_cap : 65536;
				char *a = realloc(m->arena, want);
				if (!a)
					return NULL;
				m->arena = a;
				m->arena_cap = want;
			}
			struct merged *e = &m->e[m->n++];
			memset(e, 0, sizeof(*e));
			e->hash = h;
			e->keylen = (uint16_t)s->keylen;
			e->keyoff = (uint32_t)m->arena_len;
			memcpy(m->arena + m->arena_len, s->key, s->keylen);
			m->arena_len += s->keylen;
			m->index[i] = m->n;
			return e;
		}
		struct merged *e = &m->e[m->index[i] - 1];
		if (e->hash == h && e->keylen == s->keylen &&
		    memcmp(m->arena + e->keyoff, s->key, s->keylen) == 0)
			return e;
	}
}

/* Pass 1, over counters list[0..n), or every counter 0..n when LIST is
 * NULL.  A key copied twice (evicted and taken again while we read) keeps
 * its larger copy, so it is counted once. */
static void merge_table(struct merge *m, const struct ss_table *ss, const uint32_t *list,
			uint32_t n, struct seen *seen, struct ss_snap *snap)
{
	uint32_t got = 0;
	uint64_t min = UINT64_MAX;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = list ? list[k] : k;
		if (!ss_read(ss, i, snap, 0))
			continue;
		if (snap->count < min)
			min = snap->count;
		struct merged *e = merge_find(m, snap, 1);
		if (!e)
			continue; /* more keys than when we sized the merge: next look */
		uint64_t rank = rank_of(m, snap);
		if (e->copied) {
			uint32_t prev = 0;
			while (seen[prev].e != e)
				prev++;
			if (seen[prev].count >= snap->count)
				continue;
			e->count -= seen[prev].count;
			e->err -= seen[prev].err;
			e->rank -= seen[prev].rank;
			seen[prev].e = NULL;
		}
		e->copied = 1;
		e->ci = i;
		e->count += snap->count;
		e->err += snap->err;
		e->rank += rank;
		seen[got++] = (struct seen){ e, snap->count, snap->err, rank };
	}
	if (!list)
		m->bound = got < n ? 0 : min; /* a free counter: an untracked key was never seen */
}

/* Pass 2: the rows' numbers, counts again included, so that each row's
 * calls, error and per-command counts come from the same copy of its
 * counter (calls - err is then exactly their sum).  Only the rows'
 * counters are read again: a counter that holds another key by now (its
 * key was evicted between the passes) leaves the row not found. */
static void sum_rows(struct merge *m, const struct ss_table *ss, struct merged **order,
		     unsigned long want, struct acc *rows, struct ss_snap *snap)
{
	for (unsigned long r = 0; r < want; r++) {
		const struct merged *e = order[r];
		if (!ss_read(ss, e->ci, snap, 1) || snap->keylen != e->keylen ||
		    memcmp(snap->key, m->arena + e->keyoff, e->keylen) != 0)
			continue;
		struct acc *a = &rows[e->row - 1];
		a->found = 1;
		a->count = snap->count;
		a->err = snap->err;
		a->bytes = snap->bytes;
		a->first_ns = snap->first_ns;
		a->clients = snap->clients;
		a->lat_sum = snap->lat_sum;
		a->lat_n = snap->lat_n;
		a->objsize = snap->objsize;
		for (unsigned k = 0; k < SS_NCMD; k++)
			a->ncmd[k] = snap->ncmd[k];
		for (unsigned k = 0; k < SS_HIST; k++)
			a->hist[k] = snap->hist[k];
	}
}

static int busiest_first(const void *a, const void *b)
{
	const struct merged *x = *(struct merged *const *)a, *y = *(struct merged *const *)b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? 1 : -1;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return x->keyoff < y->keyoff ? -1 : x->keyoff > y->keyoff;
}

static int busier(const struct merged *x, const struct merged *y)
{
	return busiest_first(&x, &y) < 0;
}

/* Heap of the WANT busiest seen so far, the least busy of them on top. */
static void sift_down(struct merged **h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, least = i;
		if (l < n && busier(h[least], h[l]))
			least = l;
		if (l + 1 < n && busier(h[least], h[l + 1]))
			least = l + 1;
		if (least == i)
			return;
		struct merged *t = h[i];
		h[i] = h[least];
		h[least] = t;
		i = least;
	}
}

/* The WANT busiest of order[0..n) to its front, busiest first.  A heap
 * of WANT, not a sort of all n: sorting every tracked key to show 200 was
 * a tenth of a `top` (perf). */
static void select_busiest(struct merged **order, size_t n, size_t want)
{
	if (want > n)
		want = n;
	if (!want)
		return;
	for (size_t i = want / 2; i-- > 0;)
		sift_down(order, want, i);
	for (size_t i = want; i < n; i++) {
		if (busier(order[i], order[0])) {
			struct merged *t = order[0];
			order[0] = order[i];
			order[i] = t;
			sift_down(order, want, 0);
		}
	}
	qsort(order, want, sizeof(*order), busiest_first);
}

/* KEY escaped: raw (\xNN for bytes outside 0x21..0x7e and backslash: no
 * whitespace), JSON (\u00NN outside printable ASCII) or text (\xNN outside
 * printable ASCII). */
enum style { RAW, JSON, TEXT };
static void escape(char *out, const char *key, unsigned len, enum style st)
{
	for (unsigned i = 0; i < len; i++) {
		unsigned char c = (unsigned char)key[i];
		if (st == RAW) {
			if (c > 0x20 && c < 0x7f && c != '\\')
				*out++ = (char)c;
			else
				out += sprintf(out, "\\x%02x", c);
		} else if (c == '"' || c == '\\') {
			out += sprintf(out, "\\%c", c);
		} else if (c >= 0x20 && c < 0x7f) {
			*out++ = (char)c;
		} else {
			out += sprintf(out, st == JSON ? "\\u%04x" : "\\x%02x", c);
		}
	}
	*out = '\0';
}

/* Distinct connections from a 64-bit bitmap, by linear counting:
 * -64 ln(1 - bits/64), tabulated (no libm in the target's name space). */
static uint64_t clients_estimate(uint64_t bits)
{
	static const uint16_t estimate[64] = {
		0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 15, 16, 17, 18, 20, 21, 23, 24, 25,
		27, 28, 30, 32, 33, 35, 37, 39, 40, 42, 44, 46, 48, 51, 53, 55, 58, 60, 63, 65,
		68, 71, 74, 78, 81, 85, 89, 93, 97, 102, 107, 113, 119, 126, 133, 142, 151, 163,
		177, 196, 222, 266,
	};
	unsigned set = (unsigned)__builtin_popcountll(bits);
	return set == 64 ? 320 : estimate[set]; /* all set: "hundreds" */
}

static const char *const cmd_names[SS_NCMD] = {
	"get_hits", "get_misses", "sets", "adds", "replaces", "appends", "prepends", "cas",
	"touches", "incrs", "decrs", "deletes",
};

struct table_info {
	unsigned threads;
	uint64_t counters;
	unsigned lat_every; /* the sparsest timing of a worker thread: one command in N */
};

static void print_rows(struct merge *m, struct merged **order, unsigned long want,
		       const struct acc *rows, enum style st, const struct table_info *ti,
		       int (*out)(const char *))
{
	char line[6 * SS_KEY_MAX + 1024], key[6 * SS_KEY_MAX + 1];
	unsigned long long untr = atomic_load(&untracked);
	unsigned long long used = (unsigned long long)counters_taken() * per_counter_bytes();
	if (st == RAW)
		snprintf(line, sizeof(line),
			 "mctop 1 now_ns=%llu total=%llu tracked=%u untracked=%llu threads=%u "
			 "counters=%llu bytes=%llu budget=%lu bound=%llu lat_every=%u\n",
			 (unsigned long long)now_ns(), (unsigned long long)m->total, m->tracked, untr,
			 ti->threads, (unsigned long long)ti->counters, used,
			 atomic_load(&budget_bytes), (unsigned long long)m->bound, ti->lat_every);
	else if (st == JSON)
		snprintf(line, sizeof(line),
			 "{\"total\":%llu,\"tracked\":%u,\"untracked\":%llu,\"bound\":%llu,"
			 "\"threads\":%u,\"bytes\":%llu,\"budget\":%lu,\"lat_every\":%u,\"keys\":[",
			 (unsigned long long)m->total, m->tracked, untr, (unsigned long long)m->bound,
			 ti->threads, used, atomic_load(&budget_bytes), ti->lat_every);
	else
		snprintf(line, sizeof(line),
			 "total %llu tracked %u untracked %llu bound %llu\n%12s %10s %8s %12s %9s  KEY\n",
			 (unsigned long long)m->total, m->tracked, untr, (unsigned long long)m->bound,
			 "CALLS", "ERR", "OBJSIZE", "TOTAL", "LAT(us)");
	out(line);
	for (unsigned long i = 0; i < want; i++) {
		const struct merged *e = order[i];
		const struct acc *a = &rows[e->row - 1];
		uint64_t calls = m->by_mask ? e->rank : e->count;
		escape(key, m->arena + e->keyoff, e->keylen, st);
		int n;
		if (st == RAW) {
			n = snprintf(line, sizeof(line), "%s\t%llu\t%llu\t%lld\t%llu\t%llu\t%llu\t%llu\t%llu",
				     key, (unsigned long long)calls, (unsigned long long)e->err,
				     (long long)a->objsize, (unsigned long long)a->bytes,
				     (unsigned long long)a->lat_sum, (unsigned long long)a->lat_n,
				     (unsigned long long)a->first_ns,
				     (unsigned long long)clients_estimate(a->clients));
			for (unsigned k = 0; k < SS_NCMD; k++)
				n += snprintf(line + n, sizeof(line) - (size_t)n, "\t%llu",
					      (unsigned long long)a->ncmd[k]);
			for (unsigned k = 0; k < SS_HIST; k++)
				n += snprintf(line + n, sizeof(line) - (size_t)n, "%c%llu",
					      k ? ',' : '\t', (unsigned long long)a->hist[k]);
			snprintf(line + n, sizeof(line) - (size_t)n, "\n");
		} else if (st == JSON) {
			n = snprintf(line, sizeof(line),
				     "%s{\"key\":\"%s\",\"calls\":%llu,\"err\":%llu,\"objsize\":%lld,"
				     "\"total\":%llu,\"lat_us\":%.3f,\"gets\":%llu",
				     i ? "," : "", key, (unsigned long long)calls,
				     (unsigned long long)e->err, (long long)a->objsize,
				     (unsigned long long)a->bytes,
				     a->lat_n ? (double)a->lat_sum / (double)a->lat_n / 1000.0 : -1.0,
				     (unsigned long long)(a->ncmd[SS_GET_HIT] + a->ncmd[SS_GET_MISS]));
			for (unsigned k = 0; k < SS_NCMD; k++)
				n += snprintf(line + n, sizeof(line) - (size_t)n, ",\"%s\":%llu",
					      cmd_names[k], (unsigned long long)a->ncmd[k]);
			snprintf(line + n, sizeof(line) - (size_t)n, "}");
		} else {
			snprintf(line, sizeof(line), "%12llu %10llu %8lld %12llu %9.1f  %s\n",
				 (unsigned long long)calls, (unsigned long long)e->err,
				 (long long)a->objsize, (unsigned long long)a->bytes,
				 a->lat_n ? (double)a->lat_sum / (double)a->lat_n / 1000.0 : 0.0, key);
		}
		if (out(line) < 0)
			return;
	}
	out(st == JSON ? "]}\n" : st == RAW ? "end\n" : "");
}

/* A top's working memory per counter, kept from one top to the next (a
 * module runs one command at a time): allocating and faulting in some
 * 600 KiB afresh every second was a third of a `top` on this VM (perf).
 * The budget charges it all along (READ_BYTES_PER_COUNTER); freed at
 * unload. */
static struct {
	struct merged *e;
	struct seen *seen;
	struct merged **order;
	uint32_t *index;
	uint32_t *list; /* the counters to read, when not all: at most a row each */
	char *arena;
	size_t ecap, seencap, ordercap, indexcap, listcap, arenacap;
	struct ss_snap snap;
} rd;

/* *p holds at least WANT items of SIZE bytes (*cap of them); -1 when out
 * of memory, *p as it was. */
static int grow(void *p, size_t *cap, size_t want, size_t size)
{
	if (want <= *cap)
		return 0;
	void *n = realloc(*(void **)p, want * size);
	if (!n)
		return -1;
	*(void **)p = n;
	*cap = want;
	return 0;
}

/* top's drain_lock, if *locked still holds it, let go. */
static void drain_unlock(int *locked)
{
	if (*locked)
		pthread_mutex_unlock(&drain_lock);
	*locked = 0;
}

/* The table read, drain_lock held if LOCKED (and let go here). */
static void top_read(unsigned long want, enum style st, unsigned by_mask,
		     int (*out)(const char *), int locked)
{
	struct merge m = { .by_mask = by_mask };
	struct table_info ti = { .lat_every = 1 };
	unsigned gen = atomic_load(&generation);
	struct ss_table *ss = atomic_load_explicit(&tab.ss, memory_order_acquire);
	uint32_t cap = ss ? atomic_load_explicit(&ss->cap, memory_order_acquire) : 0;
	for (unsigned i = 0; i < MCTOP_THREADS; i++)
		if (atomic_load_explicit(&threads[i].feed, memory_order_acquire)) {
			unsigned every = lat_one_in(atomic_load_explicit(&threads[i].lat_mask,
									 memory_order_relaxed));
			ti.threads++;
			if (every > ti.lat_every)
				ti.lat_every = every;
		}
	ti.counters = cap;
	if (ss && atomic_load_explicit(&tab.gen, memory_order_acquire) != gen)
		ss = NULL; /* not cleared since a reset yet */
	m.cap = ss ? cap : 0;
	uint32_t slots = 2;
	while (slots < 2 * (m.cap ? m.cap : 1))
		slots <<= 1;
	m.mask = slots - 1;
	size_t n = m.cap ? m.cap : 1;
	if (grow(&rd.e, &rd.ecap, n, sizeof(*rd.e)) ||
	    grow(&rd.seen, &rd.seencap, n, sizeof(*rd.seen)) ||
	    grow(&rd.order, &rd.ordercap, n, sizeof(*rd.order)) ||
	    grow(&rd.index, &rd.indexcap, slots, sizeof(*rd.index)) ||
	    grow(&rd.list, &rd.listcap, want ? want : 1, sizeof(*rd.list))) {
		drain_unlock(&locked);
		out("mctop: out of memory\n");
		return;
	}
	memset(rd.index, 0, slots * sizeof(*rd.index));
	m.e = rd.e;
	m.index = rd.index;
	m.arena = rd.arena;
	m.arena_cap = rd.arenacap;
	struct merged **order = rd.order;
	if (ss) {
		m.total = atomic_load_explicit(&tab.hits, memory_order_relaxed);
		if (by_mask) {
			merge_table(&m, ss, NULL, cap, rd.seen, &rd.snap);
			m.tracked = m.n;
		} else {
			uint32_t busiest = ss_busiest(ss, (uint32_t)want, rd.list);
			merge_table(&m, ss, rd.list, busiest, rd.seen, &rd.snap);
			m.bound = ss_bound(ss);
			m.tracked = ss->used;
		}
	}
	rd.arena = m.arena; /* merge_find may have moved it */
	rd.arenacap = m.arena_cap;
	for (uint32_t i = 0; i < m.n; i++)
		order[i] = &m.e[i];
	if (want > m.n)
		want = m.n;
	select_busiest(order, m.n, want);
	/* The rows are not kept: up to 2,000 of them, ~860 KB that the
	 * agent's copy of the answer can then reuse. */
	struct acc *rows = fails_for_test(&tops_to_fail) ? NULL : calloc(want ? want : 1, sizeof(*rows));
	if (!rows) {
		drain_unlock(&locked);
		out("mctop: out of memory\n");
		return;
	}
	for (unsigned long i = 0; i < want; i++) {
		order[i]->row = (uint32_t)i + 1;
		rows[i].objsize = -1;
	}
	if (ss)
		sum_rows(&m, ss, order, want, rows, &rd.snap);
	drain_unlock(&locked); /* the rest is our own copies */
	/* A row whose key was evicted between the passes can have had at most
	 * the table's smallest count; then the rows in the order of these
	 * counts. */
	for (unsigned long r = 0; r < want; r++) {
		struct merged *e = order[r];
		struct acc *a = &rows[e->row - 1];
		if (ss && !a->found) {
			a->count += m.bound;
			a->err += m.bound;
		}
		e->count = a->count;
		e->err = a->err;
		e->rank = rank_of_acc(&m, a);
	}
	qsort(order, want, sizeof(*order), busiest_first);
	print_rows(&m, order, want, rows, st, &ti, out);
	free(rows);
}

/* Ranked by calls (no by=), the rows come from the stream summary's
 * busiest buckets (ss_busiest), read with the drainer kept out by
 * drain_lock: a `top 200` then reads 200 counters, not the whole table
 * (2.0 ms of memcached's CPU for a full 8 MiB table, paid once a second
 * by a watching mctop; more for a bigger budget).  The drainer waits
 * only while those are copied, not while the rows are sorted and
 * written out, and memcached's workers never wait: their feeds take
 * what comes.  Ranked by some commands' counts, which the buckets do not
 * order, every counter is read, without the lock (see above). */
static void top(unsigned long want, enum style st, unsigned by_mask, int (*out)(const char *))
{
	pthread_mutex_lock(&drain_lock);
	drain_all();
	if (by_mask)
		pthread_mutex_unlock(&drain_lock);
	top_read(want, st, by_mask, out, !by_mask);
}

/* "get,set,...": bits of enum ss_cmd (get: hits and misses); 0 if bad. */
static unsigned parse_cmds(const char *list)
{
	static const struct { const char *name; unsigned bits; } names[] = {
		{ "get", 1u << SS_GET_HIT | 1u << SS_GET_MISS }, { "set", 1u << SS_SET },
		{ "add", 1u << SS_ADD }, { "replace", 1u << SS_REPLACE },
		{ "append", 1u << SS_APPEND }, { "prepend", 1u << SS_PREPEND },
		{ "cas", 1u << SS_CAS }, { "touch", 1u << SS_TOUCH }, { "incr", 1u << SS_INCR },
		{ "decr", 1u << SS_DECR }, { "delete", 1u << SS_DELETE },
	};
	unsigned mask = 0;
	while (*list) {
		size_t len = strcspn(list, ",");
		unsigned found = 0;
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strlen(names[i].name) == len && strncmp(names[i].name, list, len) == 0)
				found = names[i].bits;
		if (!found)
			return 0;
		mask |= found;
		list += len + (list[len] == ',');
	}
	return mask;
}

/* The smallest budget that counts anything: the reserve for reading, and
 * one worker's feed and first chunk of counters.  (Each further worker
 * needs a feed and a chunk more; without them its keys are omitted.) */
static size_t min_budget_bytes(void)
{
	return top_reserve_bytes() + (MCTOP_CHUNK + (size_t)feed_counters()) * per_counter_bytes();
}

static void command(const char *args, int (*out)(const char *))
{
	char word[16] = "", arg[64];
	int n = 0, used;

	if (sscanf(args, "%15s%n", word, &n) != 1)
		goto usage;
	const char *p = args + n;
	if (strcmp(word, "top") == 0) {
		unsigned long want = 20;
		enum style st = TEXT;
		unsigned by = 0;
		while (sscanf(p, "%63s%n", arg, &used) == 1) {
			p += used;
			if (strcmp(arg, "json") == 0) {
				st = JSON;
			} else if (strcmp(arg, "raw") == 0) {
				st = RAW;
			} else if (strncmp(arg, "by=", 3) == 0) {
				if (!(by = parse_cmds(arg + 3))) {
					out("mctop: by=: commands are get,set,add,replace,append,prepend,"
					    "cas,touch,incr,decr,delete\n");
					return;
				}
			} else if (arg[0] >= '0' && arg[0] <= '9') {
				char *end;
				want = strtoul(arg, &end, 10);
				if (*end || want > MCTOP_MAX_TOP) {
					out("mctop: top: N is 0 to 2000\n");
					return;
				}
			} else {
				goto usage;
			}
		}
		top(want, st, by, out);
		return;
	}
	if (strcmp(word, "reset") == 0) {
		/* Drained first, so what came before the reset goes with it. */
		pthread_mutex_lock(&drain_lock);
		drain_all();
		atomic_fetch_add(&generation, 1);
		atomic_store(&untracked, 0);
		pthread_mutex_unlock(&drain_lock);
		out("reset\n");
		return;
	}
	if (strcmp(word, "budget") == 0) {
		if (sscanf(p, "%63s%n", arg, &used) == 1) {
			char *end;
			unsigned long long b = strtoull(arg, &end, 10);
			if (*end || arg[0] == '-' || b < min_budget_bytes() || b > (1ull << 40)) {
				snprintf(arg, sizeof(arg), "mctop: budget: %zu bytes to 1 TiB\n",
					 min_budget_bytes());
				out(arg);
				return;
			}
			/* Under the drain lock: the table grows only under it,
			 * so it is never between taking counters and showing
			 * them. */
			pthread_mutex_lock(&drain_lock);
			budget_set((unsigned long)b);
			atomic_store(&budget_ready, 1);
			pthread_mutex_unlock(&drain_lock);
		}
		char line[400];
		int n = snprintf(line, sizeof(line),
				 "budget %lu\ncounters %ld taken, %ld more allowed; %zu bytes each, "
				 "%zu reserved for reading, %zu per worker thread's feed\n",
				 atomic_load(&budget_bytes), counters_taken(),
				 atomic_load(&budget_left), per_counter_bytes(), top_reserve_bytes(),
				 (size_t)feed_counters() * per_counter_bytes());
		if (drainer_error)
			snprintf(line + n, sizeof(line) - (size_t)n,
				 "drainer: not running (%s): feeds are drained by top and reset only\n",
				 strerror(drainer_error));
		else
			snprintf(line + n, sizeof(line) - (size_t)n,
				 "drainer: %llu passes, %llu asked for by a half-full feed\n",
				 (unsigned long long)atomic_load(&drain_passes),
				 (unsigned long long)atomic_load(&drain_kicks));
		out(line);
		return;
	}
	if (strcmp(word, "latency") == 0) {
		long set = -1; /* 0: auto, N: every Nth, -1: only asked */
		if (sscanf(p, "%63s%n", arg, &used) == 1) {
			char *end;
			unsigned long every = strtoul(arg, &end, 10);
			if (strcmp(arg, "auto") == 0) {
				set = 0;
			} else if (*end || arg[0] < '1' || arg[0] > '9' || every > MCTOP_LAT_EVERY_MAX ||
				   (every & (every - 1))) {
				snprintf(arg, sizeof(arg),
					 "mctop: latency: auto, or N: 1, 2, 4 ... %u\n",
					 MCTOP_LAT_EVERY_MAX);
				out(arg);
				return;
			} else {
				set = (long)every;
			}
		}
		pthread_mutex_lock(&drain_lock);
		if (set >= 0) {
			lat_every = (unsigned)set;
			/* At once; auto starts with every command timed. */
			uint64_t now = now_ns();
			for (unsigned i = 0; i < MCTOP_THREADS; i++) {
				atomic_store(&threads[i].lat_mask,
					     (set ? (unsigned)set - 1 : 0) | lat_flags());
				threads[i].rate_cmds = 0;
				threads[i].rate_ns = now;
			}
		}
		unsigned every = lat_every, sampling = 0;
		for (unsigned i = 0; i < MCTOP_THREADS; i++)
			if (lat_one_in(atomic_load(&threads[i].lat_mask)) > 1 &&
			    atomic_load_explicit(&threads[i].feed, memory_order_acquire))
				sampling++;
		pthread_mutex_unlock(&drain_lock);
		char line[200];
		if (every)
			snprintf(line, sizeof(line), "latency every %u\n", every);
		else
			snprintf(line, sizeof(line),
				 "latency auto: every command timed, one in %u at random on a "
				 "thread doing over %u commands/s\nthreads timing one in %u: %u\n",
				 MCTOP_LAT_SAMPLE, (unsigned)lat_busy, MCTOP_LAT_SAMPLE, sampling);
		out(line);
		return;
	}
usage:
	out("usage: command mctop.so top [N] [json|raw] [by=CMD,...] | reset | budget [BYTES] | "
	    "latency [auto|N]\n");
}

/* Unload: the agent runs no handler or command any more; stop the
 * drainer, then free the feeds and the table. */
__attribute__((destructor)) static void free_tables(void)
{
	if (!drainer_error && getpid() == drainer_pid) {
		pthread_mutex_lock(&drain_lock);
		drain_stop = 1;
		pthread_mutex_unlock(&drain_lock);
		drainer_kick();
		pthread_join(drainer, NULL);
	}
	ss_destroy(atomic_load(&tab.ss));
	for (unsigned i = 0; i < MCTOP_THREADS; i++)
		feed_destroy(atomic_load(&threads[i].feed));
	free(rd.e);
	free(rd.seen);
	free(rd.order);
	free(rd.index);
	free(rd.list);
	free(rd.arena);
}

XPROBES_MODULE(command, 0, MEMCACHED_KEY_PROBES(on_), MEMCACHED_BATCH_PROBES(on_));
