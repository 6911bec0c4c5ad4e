/* SPDX-License-Identifier: MIT */
/* The function-graph tracer's benchmark program: fib(N),
 * recursive, timed inside the program around the one call, so that
 * process start, the tracer's setup and its output never count.
 *
 *     fib [N] [--wait] [--xray-record]
 *
 * N defaults to 30.  With --wait it prints "ready PID" and waits for a
 * line on stdin before computing: bench/trace_bench.py starts our
 * tracer in between.  Then it prints one line (and with --wait, stays
 * until stdin ends, so that the driver can ask the agent what it
 * recorded):
 *
 *     fib 30 = 832040 calls=2692537 ns=... cpu_ns=...
 *
 * ns is CLOCK_MONOTONIC around the call; cpu_ns is the thread's CPU time
 * over the same call, which leaves out time spent preempted (the
 * machine may be shared).  calls is the number of calls fib(N) makes,
 * computed apart (2 fib(N+1) - 1), so that the driver divides by the
 * true count whatever the compiler did.
 *
 * The same source is built five ways (bench/trace.mk): plain gcc and
 * clang, our traced build, gcc -pg for uftrace and clang XRay.  Nothing
 * here depends on any tracer but this: XRAY_OPTIONS="xray_mode=xray-fdr"
 * only installs FDR's handler, which reads the clock and returns because
 * nothing initialised FDR; it records only once the program calls
 * __xray_log_init_mode(), and writes its log only when the program asks.
 * So the XRay build (-DFIB_XRAY_LOG) given --xray-record does both
 * (outside the timed call), and the driver checks from the log's size
 * that nothing was dropped. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef FIB_XRAY_LOG
/* XRay's runtime API (its header, xray/xray_log_interface.h, is C++
 * only): the functions return enums, the values compared with are
 * theirs. */
int __xray_log_init_mode(const char *mode, const char *config);
int __xray_log_finalize(void);
int __xray_log_flushLog(void);
#define FIB_XRAY_LOG_INITIALIZED 2
#define FIB_XRAY_LOG_FINALIZED 4
#endif

/* One real call per fib call: no inlining, no clones, no
 * interprocedural shortcuts (gcc's noipa; clang has no clones of a
 * noinline function here). */
#ifdef __clang__
#define FIB_KEEP __attribute__((noinline))
#else
#define FIB_KEEP __attribute__((noipa))
#endif

FIB_KEEP long fib(int n)
{
	if (n < 2)
		return n;
	long r = fib(n - 1) + fib(n - 2);
	/* Opaque to the optimiser: without it gcc turns the second call
	 * into a loop with an accumulator, and fib(30) makes fewer calls. */
	__asm__ volatile("" : "+r"(r));
	return r;
}

static long long ns_of(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Calls fib(n) makes: c(n) = 1 + c(n-1) + c(n-2), c(0) = c(1) = 1,
 * which is 2 fib(n+1) - 1.  Iterative: never traced per step. */
static long fib_calls(int n)
{
	long a = 0, b = 1; /* fib(0), fib(1) */
	for (int i = 0; i < n; i++) {
		long t = a + b;
		a = b;
		b = t;
	}
	return 2 * b - 1;
}

int main(int argc, char **argv)
{
	int n = 30, wait = 0, xray = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--wait") == 0)
			wait = 1;
		else if (strcmp(argv[i], "--xray-record") == 0)
			xray = 1;
		else
			n = atoi(argv[i]);
	}
	if (n < 0 || n > 45) {
		fprintf(stderr, "usage: fib [N (0..45)] [--wait] [--xray-record]\n");
		return 2;
	}
#ifdef FIB_XRAY_LOG
	/* FDR reads XRAY_FDR_OPTIONS here; "" adds nothing to them. */
	if (xray && __xray_log_init_mode("xray-fdr", "") != FIB_XRAY_LOG_INITIALIZED) {
		fprintf(stderr, "fib: XRay FDR did not initialise (XRAY_OPTIONS?)\n");
		return 4;
	}
#else
	if (xray) {
		fprintf(stderr, "fib: not built with XRay\n");
		return 4;
	}
#endif
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (wait) {
		char line[64];
		printf("ready %d\n", getpid());
		if (!fgets(line, sizeof(line), stdin))
			return 3;
	}
	long long t0 = ns_of(CLOCK_MONOTONIC);
	long long c0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
	long r = fib(n);
	long long c1 = ns_of(CLOCK_THREAD_CPUTIME_ID);
	long long t1 = ns_of(CLOCK_MONOTONIC);
	printf("fib %d = %ld calls=%ld ns=%lld cpu_ns=%lld\n", n, r, fib_calls(n), t1 - t0,
	       c1 - c0);
#ifdef FIB_XRAY_LOG
	if (xray && __xray_log_finalize() == FIB_XRAY_LOG_FINALIZED)
		__xray_log_flushLog();
#endif
	if (wait) {
		char line[64];
		while (fgets(line, sizeof(line), stdin))
			;
	}
	return 0;
}
