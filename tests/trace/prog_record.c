/* SPDX-License-Identifier: MIT */
/* A traced program for tests/trace/test_trace_record.py: the recorder on
 * real calls.  It prints "ready PID", then "fn NAME 0xADDR" for each
 * function the test looks for and "fns end"; then runs one scenario per
 * line on stdin and answers one line:
 *
 *   calls    calls_top() { calls_a() { calls_leaf() x2 }  calls_b() { calls_leaf() } }
 *   floats   float, double, long double, a struct in xmm0:xmm1 and a
 *            variadic call of doubles: results printed exactly (%a)
 *   signal   sig_outer() raises SIGUSR1, whose handler on_usr1() calls sig_leaf()
 *   altsig   the same with the handler on a sigaltstack
 *   longjmp  jmp_top() { jmp_down() x4, longjmp to jmp_top; jmp_after() }
 *   thread   a thread runs calls_top() and ends; answers its tid
 *   fork     fork() in fork_parent(); the child returns from it (through
 *            the trampoline), runs calls_top() and jmp_top() and exits
 *            with 0 if they computed right; answers the status
 *   storm N  calls_top() over and over under SIGALRM every 20 us, whose
 *            handler on_prof() calls calls_leaf(), until N signals came:
 *            "storm bad=0 hits=N"
 *   spin     two threads call calls_top() flat out ...
 *   spin stop  ... until this: "spun bad=0 calls=both"
 *   thread exit  a thread calls pthread_exit() 4 traced frames down
 *   tid      the main thread's tid
 *   fib N    fib(N), answered with CPU ns per call
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "keep.h"

static volatile int sink;

KEEP static int calls_leaf(int x)
{
	return x + 1;
}

KEEP static int calls_a(int x)
{
	return calls_leaf(x) + calls_leaf(x + 1);
}

KEEP static int calls_b(int x)
{
	return calls_leaf(x) * 2;
}

KEEP static int calls_top(void)
{
	return calls_a(1) + calls_b(2); /* (2 + 3) + 3 * 2 = 11 */
}

/* ---- floats: every value passes through vector registers ---- */
KEEP static float f_mul(float a, float b)
{
	return a * b;
}

KEEP static double d_mix(double a, float b, double c, double d, double e, double f, double g,
			 double h, double i)
{
	return a / 3 + b - c * d + e - f + g * h - i;
}

KEEP static long double ld_mul(long double a, int n)
{
	return a * n / 7;
}

struct pair {
	double x, y; /* returned in xmm0:xmm1 */
};

KEEP static struct pair p_make(double x)
{
	struct pair p = { x / 3, x * 5 };
	return p;
}

KEEP static double v_sum(int n, ...)
{
	va_list ap;
	double s = 0;
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		s += va_arg(ap, double) / (i + 1);
	va_end(ap);
	return s;
}

static void floats(void)
{
	struct pair p = p_make(1.1);
	printf("floats %a %a %La %a %a %a\n", (double)f_mul(1.1f, 3.3f),
	       d_mix(1.1, 2.2f, 3.3, 4.4, 5.5, 6.6, 7.7, 8.8, 9.9), ld_mul(1.1L, 3), p.x, p.y,
	       v_sum(9, 1.1, 2.2, 3.3, 4.4, 5.5, 6.6, 7.7, 8.8, 9.9));
}

/* ---- signals ---- */
static volatile int hits;

KEEP static int sig_leaf(int x)
{
	return x * 3;
}

KEEP static void on_usr1(int sig)
{
	hits += sig_leaf(sig) > 0;
}

KEEP static int sig_outer(void)
{
	raise(SIGUSR1);
	return hits;
}

static void signals(int alt)
{
	static char altstack[1 << 16];
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	if (alt) {
		stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack) };
		sigaltstack(&ss, NULL);
		sa.sa_flags = SA_ONSTACK;
	}
	sigaction(SIGUSR1, &sa, NULL);
	int before = hits;
	printf("%s hits=%d\n", alt ? "altsig" : "signal", sig_outer() - before);
}

/* ---- longjmp ---- */
static __thread jmp_buf jb; /* the spinning threads run it too */

KEEP static void jmp_down(int n)
{
	if (n < 0) /* never: keeps gcc from calling this an infinite recursion */
		return;
	if (n == 0)
		longjmp(jb, 1);
	jmp_down(n - 1);
	sink++; /* not a tail call */
}

KEEP static int jmp_after(void)
{
	return 7;
}

KEEP static int jmp_top(void)
{
	if (!setjmp(jb))
		jmp_down(3);
	return jmp_after();
}

/* ---- threads and fork ---- */
static void *thread_main(void *arg)
{
	*(pid_t *)arg = gettid();
	sink += calls_top();
	return NULL;
}

#define FORK_CHILD (-1000)

KEEP static int fork_parent(void)
{
	pid_t pid = fork();
	if (pid == 0)
		return FORK_CHILD;
	int status = -1;
	waitpid(pid, &status, 0);
	return status;
}

/* ---- a signal storm: SIGALRM every 20 us, whose handler calls traced
 * code, while the thread calls traced code flat out: signals land
 * anywhere, inside the entry hook and the exit trampoline included. */
static volatile int prof_hits;

KEEP static void on_prof(int sig)
{
	(void)sig;
	prof_hits += calls_leaf(0);
}

static long storm(int signals)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_prof;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 20 }, { 0, 20 } };
	setitimer(ITIMER_REAL, &it, NULL);
	long bad = 0, tops = 0;
	prof_hits = 0;
	/* Some calls must get through too: on a loaded machine the handler
	 * alone can fill a 20 us period. */
	while (prof_hits < signals || tops < 1000) {
		bad += calls_top() != 11;
		tops++;
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	return bad;
}

/* ---- threads calling traced code flat out until told to stop ---- */
static volatile int spinning;
static pthread_t spinners[2];
static long spin_bad[2], spin_calls[2];

static void *spin_main(void *arg)
{
	long i = (long)arg;
	while (__atomic_load_n(&spinning, __ATOMIC_RELAXED)) {
		spin_bad[i] += calls_top() != 11;
		spin_calls[i]++;
	}
	return NULL;
}

/* ---- pthread_exit from inside traced frames ---- */
KEEP static void exit_down(int n)
{
	if (n < 0) /* never: as in jmp_down */
		return;
	if (n == 0)
		pthread_exit(NULL);
	exit_down(n - 1);
	sink++;
}

static void *exit_main(void *arg)
{
	*(pid_t *)arg = gettid();
	exit_down(3);
	return NULL;
}

/* Run fn on a thread to its end; its tid. */
static pid_t run_thread(void *(*fn)(void *))
{
	pthread_t th;
	pid_t tid = 0;
	pthread_create(&th, NULL, fn, &tid);
	pthread_join(th, NULL);
	return tid;
}

KEEP static long fib(int n)
{
	if (n < 2)
		return n;
	long r = fib(n - 1) + fib(n - 2);
	__asm__ volatile("" : "+r"(r));
	return r;
}

/* CPU time, not wall time: on a shared machine the thread is preempted. */
static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

#define FN(f) printf("fn %s %p\n", #f, (void *)f)

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready %d\n", getpid());
	FN(calls_leaf), FN(calls_a), FN(calls_b), FN(calls_top);
	FN(f_mul), FN(d_mix), FN(ld_mul), FN(p_make), FN(v_sum);
	FN(sig_leaf), FN(on_usr1), FN(sig_outer);
	FN(jmp_down), FN(jmp_after), FN(jmp_top), FN(fork_parent), FN(fib);
	FN(on_prof), FN(exit_down);
	printf("fns end\n");
	char line[256];
	while (fgets(line, sizeof(line), stdin)) {
		int n;
		if (strcmp(line, "calls\n") == 0) {
			printf("calls %d\n", calls_top());
		} else if (strcmp(line, "floats\n") == 0) {
			floats();
		} else if (strcmp(line, "signal\n") == 0) {
			signals(0);
		} else if (strcmp(line, "altsig\n") == 0) {
			signals(1);
		} else if (strcmp(line, "longjmp\n") == 0) {
			printf("longjmp %d\n", jmp_top());
		} else if (strcmp(line, "thread\n") == 0) {
			printf("thread %d\n", run_thread(thread_main));
		} else if (strcmp(line, "fork\n") == 0) {
			int r = fork_parent();
			/* The child, back from a frame hooked before the fork. */
			if (r == FORK_CHILD)
				_exit(calls_top() == 11 && jmp_top() == 7 ? 0 : 1);
			printf("fork %d\n", r);
		} else if (sscanf(line, "storm %d", &n) == 1) {
			long bad = storm(n);
			printf("storm bad=%ld hits=%d\n", bad, prof_hits >= n ? n : prof_hits);
		} else if (strcmp(line, "spin\n") == 0) {
			spinning = 1;
			for (long i = 0; i < 2; i++)
				pthread_create(&spinners[i], NULL, spin_main, (void *)i);
			printf("spinning\n");
		} else if (strcmp(line, "spin stop\n") == 0) {
			spinning = 0;
			for (int i = 0; i < 2; i++)
				pthread_join(spinners[i], NULL);
			printf("spun bad=%ld calls=%s\n", spin_bad[0] + spin_bad[1],
			       spin_calls[0] && spin_calls[1] ? "both" : "not both");
		} else if (strcmp(line, "thread exit\n") == 0) {
			printf("thread exit %d\n", run_thread(exit_main));
		} else if (strcmp(line, "tid\n") == 0) {
			printf("tid %d\n", gettid());
		} else if (sscanf(line, "fib %d", &n) == 1) {
			double calls = 0, a = 1, b = 1;
			for (int i = 1; i < n; i++) {
				double c = a + b + 1;
				a = b;
				b = c;
			}
			calls = n < 2 ? 1 : b;
			double t0 = now_ns();
			long r = fib(n);
			double t1 = now_ns();
			printf("fib %ld %.2f\n", r, (t1 - t0) / calls);
		} else if (strcmp(line, "quit\n") == 0) {
			break;
		} else {
			printf("unknown %s", line);
		}
	}
	return 0;
}
