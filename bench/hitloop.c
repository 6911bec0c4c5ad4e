/* SPDX-License-Identifier: MIT */
/* hitloop: the subject of `make bench` (driven by bench/run.py).
 *
 *   hitloop MODE ITERATIONS [THREADS] [--pin] [--wait-armed]
 *
 * MODE is the loop body besides a call to a noinline function:
 *   base   nothing else
 *   sdt    a <sys/sdt.h> STAP_PROBE2 (never armed here)
 *   site   XPROBES_SITE(hit, (unsigned long, unsigned), (i, slot))
 * Whether the site is detached, attached to a module or armed by bpftrace
 * is decided from outside, between our "ready" line and the driver's "go"
 * line on stdin.  Each of THREADS threads warms up, meets the others at a
 * barrier, then times its own loop with CLOCK_MONOTONIC.  We print
 * "result ns_per_iter=MEAN min=... max=... cpu_ns_per_iter=... hits=N"
 * (means over threads; min/max over threads; cpu = thread CPU time; N =
 * site executions, warm-up included, so the driver can check a counter)
 * and wait for EOF or a line on stdin before exiting, so the driver can
 * read a module's counters from a live process.
 *
 * --pin pins worker t to CPU (t + 1) % ncpu; the agent's control thread was
 * created before main and keeps the full mask, so it does not share a CPU
 * with a single worker.  --wait-armed waits (bounded) until something has
 * opened the site's gate, because bpftrace prints "Attaching" before it
 * has armed the probe.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/sdt.h>

#include <xprobes/site.h>

#define MAX_THREADS 16

/* The per-iteration work every variant shares.  The empty asm with a
 * memory clobber makes the call opaque: the compiler can neither delete
 * the loop nor assume the site's gate is unchanged across the call, so
 * the gate load stays inside the loop. */
__attribute__((noinline)) static void work(unsigned long i)
{
	__asm__ __volatile__("" : : "r"(i) : "memory");
}

/* One loop per mode, each its own noinline function so their code (and
 * alignment) does not depend on which mode runs. */
__attribute__((noinline)) static void loop_base(unsigned long n, unsigned slot)
{
	(void)slot;
	for (unsigned long i = 0; i < n; i++)
		work(i);
}

__attribute__((noinline)) static void loop_sdt(unsigned long n, unsigned slot)
{
	for (unsigned long i = 0; i < n; i++) {
		work(i);
		STAP_PROBE2(bench, sdt_hit, i, slot);
	}
}

__attribute__((noinline)) static void loop_site(unsigned long n, unsigned slot)
{
	for (unsigned long i = 0; i < n; i++) {
		work(i);
		XPROBES_SITE(hit, (unsigned long, unsigned), (i, slot));
	}
}

struct worker {
	pthread_t tid;
	unsigned slot;
	double ns_per_iter;
	double cpu_ns_per_iter;
};

static void (*loop)(unsigned long, unsigned);
static unsigned long iterations, warmup;
static int pin;
static pthread_barrier_t start_line;

static double now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void pin_to(unsigned cpu)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;

	if (ncpu < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu % (unsigned)ncpu, &set);
	/* Best effort: an unpinned run is still a valid (noisier) run. */
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *run_worker(void *arg)
{
	struct worker *w = arg;

	if (pin)
		pin_to(w->slot + 1);
	/* Warm-up: faults in code and data, lets the CPU clock settle, and
	 * makes urcu-bp register this thread outside the timed part. */
	loop(warmup, w->slot);
	pthread_barrier_wait(&start_line);
	/* The thread's CPU time too: on a busy machine it excludes the time
	 * this thread sat preempted, which the monotonic clock counts. */
	double c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	double t0 = now_ns(CLOCK_MONOTONIC);
	loop(iterations, w->slot);
	double t1 = now_ns(CLOCK_MONOTONIC);
	double c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	w->ns_per_iter = (t1 - t0) / (double)iterations;
	w->cpu_ns_per_iter = (c1 - c0) / (double)iterations;
	return NULL;
}

static int wait_armed(void)
{
	struct timespec tick = { 0, 1000000 }; /* 1 ms */

	/* Bounded at 30 s: bpftrace normally arms within a second. */
	for (int i = 0; i < 30000; i++) {
		if (XPROBES_SITE_ENABLED(hit))
			return 0;
		nanosleep(&tick, NULL);
	}
	return -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: hitloop base|sdt|site ITERATIONS [THREADS] [--pin] [--wait-armed]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *pos[3] = { NULL, NULL, "1" };
	int arm = 0, npos = 0;
	char line[64];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--pin") == 0)
			pin = 1;
		else if (strcmp(argv[i], "--wait-armed") == 0)
			arm = 1;
		else if (npos < 3)
			pos[npos++] = argv[i];
		else
			usage();
	}
	if (npos < 2)
		usage();
	const char *mode = pos[0];
	iterations = strtoul(pos[1], NULL, 10);
	unsigned nthreads = (unsigned)strtoul(pos[2], NULL, 10);
	if (iterations == 0 || nthreads == 0 || nthreads > MAX_THREADS)
		usage();
	if (strcmp(mode, "base") == 0)
		loop = loop_base;
	else if (strcmp(mode, "sdt") == 0)
		loop = loop_sdt;
	else if (strcmp(mode, "site") == 0)
		loop = loop_site;
	else
		usage();
	warmup = iterations / 10 ? iterations / 10 : 1;

	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin) || strncmp(line, "go", 2) != 0) {
		fprintf(stderr, "hitloop: expected 'go' on stdin\n");
		return 1;
	}
	if (arm && wait_armed() < 0) {
		fprintf(stderr, "hitloop: site 'hit' was not armed within 30 s\n");
		return 1;
	}

	struct worker w[MAX_THREADS];
	int err = pthread_barrier_init(&start_line, NULL, nthreads);
	if (err) {
		fprintf(stderr, "hitloop: pthread_barrier_init: %s\n", strerror(err));
		return 1;
	}
	for (unsigned t = 0; t < nthreads; t++) {
		w[t].slot = t;
		err = pthread_create(&w[t].tid, NULL, run_worker, &w[t]);
		if (err) {
			fprintf(stderr, "hitloop: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	double sum = 0, cpu = 0, lo = 0, hi = 0;
	for (unsigned t = 0; t < nthreads; t++) {
		pthread_join(w[t].tid, NULL);
		double v = w[t].ns_per_iter;
		sum += v;
		cpu += w[t].cpu_ns_per_iter;
		lo = (t == 0 || v < lo) ? v : lo;
		hi = (t == 0 || v > hi) ? v : hi;
	}
	printf("result ns_per_iter=%.4f min=%.4f max=%.4f cpu_ns_per_iter=%.4f hits=%lu\n",
	       sum / nthreads, lo, hi, cpu / nthreads,
	       loop == loop_site ? (warmup + iterations) * nthreads : 0UL);
	fflush(stdout);
	/* Stay alive until the driver has read what it wants from us: it
	 * then sends a line or closes our stdin. */
	char *done = fgets(line, sizeof(line), stdin);
	(void)done;
	return 0;
}
