/* SPDX-License-Identifier: MIT */
/* Library calls for the tracer's tests (test_trace_libcall.py), built with
 * the trace flags and, for uftrace, with -pg, each with default linking
 * (lazy binding), -fno-plt and -z now (full RELRO).  argv[1]:
 *   calls   malloc, free, read, qsort with a traced comparator, raise
 *           whose traced signal handler runs inside it,
 *           pthread_create of a traced start routine, pthread_join
 *   jumps   setjmp then longjmp out of a traced function, a fork whose
 *           child exits, then exit() from a traced function
 *   vforks  three vfork()s whose children exec /bin/true, each waited for
 *   exits   two threads in turn, each ending in pthread_exit from a traced
 *           function (the first call resolves the slot and never returns)
 *   loop    prints "ready PID", then until "quit" on stdin, N threads
 *           (argv[2]) call malloc, free, strlen and qsort flat out and
 *           check their results; prints "ok" or "bad" at the end
 *   dl LIB  prints "ready PID"; per stdin line: "load" dlopen()s LIB and
 *           answers "loaded", "call" calls its callee_len("library") and
 *           answers "len=N", "quit" ends it.
 *   lazythread  prints "ready PID"; at "go", a thread makes the program's
 *           first call of strtol (a lazy slot), then, once it is joined,
 *           the main thread calls strtol too; answers "done N"; "quit". */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static jmp_buf env;
static volatile int stop_loop, bad;
static void *volatile kept; /* so that the compiler keeps malloc and free */

__attribute__((noinline)) static int cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static volatile sig_atomic_t caught;

__attribute__((noinline)) static void handler(int sig)
{
	caught = sig;
}

__attribute__((noinline)) static void *start(void *arg)
{
	return malloc((size_t)arg);
}

__attribute__((noinline)) static void calls(void)
{
	int v[4] = { 3, 1, 2, 0 };
	char buf[4];
	kept = malloc(32);
	free(kept);
	qsort(v, 4, sizeof(*v), cmp);
	if (read(-1, buf, 1) != -1)
		abort();
	signal(SIGUSR1, handler);
	raise(SIGUSR1); /* the handler runs inside raise */
	if (caught != SIGUSR1)
		abort();
	pthread_t t;
	void *r;
	pthread_create(&t, NULL, start, (void *)16);
	pthread_join(t, &r);
	free(r);
}

__attribute__((noinline)) static void jump_out(void)
{
	longjmp(env, 1);
}

__attribute__((noinline)) static void child(void)
{
	_exit(0);
}

__attribute__((noinline)) static void finish(void)
{
	exit(0);
}

/* vfork returns twice on one stack: in the child first, which execs. */
__attribute__((noinline)) static int spawn(void)
{
	pid_t pid = vfork();
	if (pid == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	int status = 1;
	waitpid(pid, &status, 0);
	return status;
}

__attribute__((noinline)) static void jumps(void)
{
	if (setjmp(env) == 0)
		jump_out();
	pid_t pid = fork();
	if (pid == 0)
		child();
	waitpid(pid, NULL, 0);
	finish();
}

static void *spin(void *arg)
{
	(void)arg;
	while (!stop_loop) {
		int v[8] = { 5, 3, 7, 1, 0, 6, 2, 4 };
		char *p = malloc(64);
		if (!p) {
			bad = 1;
			continue;
		}
		strcpy(p, "library");
		if (strlen(p) != 7)
			bad = 1;
		free(p);
		qsort(v, 8, sizeof(*v), cmp);
		for (int i = 0; i < 8; i++)
			if (v[i] != i)
				bad = 1;
	}
	return NULL;
}

static int loop(int n)
{
	pthread_t t[16];
	if (n < 1 || n > 16)
		return 2;
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, spin, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof(line), stdin) && strncmp(line, "quit", 4))
		;
	stop_loop = 1;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("%s\n", bad ? "bad" : "ok");
	return bad;
}

static int dl(const char *lib)
{
	int (*len)(const char *) = NULL;
	char line[64];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin) && strncmp(line, "quit", 4)) {
		if (!strncmp(line, "load", 4)) {
			void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
			len = h ? (int (*)(const char *))dlsym(h, "callee_len") : NULL;
			printf("%s\n", len ? "loaded" : dlerror());
		} else if (!strncmp(line, "call", 4) && len) {
			printf("len=%d\n", len("library"));
		}
		fflush(stdout);
	}
	return 0;
}

__attribute__((noinline)) static void *first_strtol(void *arg)
{
	return (void *)strtol((const char *)arg, NULL, 10);
}

static int lazythread(void)
{
	char line[64];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin) && strncmp(line, "quit", 4)) {
		pthread_t t;
		void *v = NULL;
		if (strncmp(line, "go", 2) || pthread_create(&t, NULL, first_strtol, "7") ||
		    pthread_join(t, &v))
			continue;
		printf("done %ld\n", (long)v + strtol("8", NULL, 10));
		fflush(stdout);
	}
	return 0;
}

static int ended;

__attribute__((noinline)) static void *ends_thread(void *arg)
{
	kept = arg;
	pthread_exit(arg);
}

__attribute__((noinline)) static int exits(void)
{
	for (int i = 0; i < 2; i++) {
		pthread_t t;
		void *v = NULL;
		if (pthread_create(&t, NULL, ends_thread, &ended) || pthread_join(t, &v) ||
		    v != &ended)
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "calls";
	if (!strcmp(what, "calls"))
		calls();
	else if (!strcmp(what, "jumps"))
		jumps();
	else if (!strcmp(what, "exits"))
		return exits();
	else if (!strcmp(what, "vforks"))
		return spawn() | spawn() | spawn();
	else if (!strcmp(what, "loop"))
		return loop(argc > 2 ? atoi(argv[2]) : 2);
	else if (!strcmp(what, "dl") && argc > 2)
		return dl(argv[2]);
	else if (!strcmp(what, "lazythread"))
		return lazythread();
	return 0;
}
