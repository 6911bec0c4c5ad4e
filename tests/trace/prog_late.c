/* SPDX-License-Identifier: MIT */
/* A traced program for tests/trace/test_trace_late.py: it dlopen()s the
 * traced library named by argv[1] only when told, so that the test can
 * load it while tracing is on.  Prints "ready PID"; then per stdin line:
 * "load" answers "loaded" ("load-masked": with every signal blocked
 * around the dlopen(), as some programs do), "call" calls into the
 * library and answers "sum=N", and "quit" (or end of input) ends it. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <xprobes/trace.h>

static int (*sum_squares)(int);

__attribute__((noinline)) int late_caller(int n)
{
	return sum_squares(n);
}

int main(int argc, char **argv)
{
	char line[64];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (argc > 1 && fgets(line, sizeof(line), stdin)) {
		int masked = strcmp(line, "load-masked\n") == 0;
		if (masked || strcmp(line, "load\n") == 0) {
			sigset_t all, old;
			sigfillset(&all);
			if (masked)
				pthread_sigmask(SIG_SETMASK, &all, &old);
			void *h = dlopen(argv[1], RTLD_NOW);
			if (masked)
				pthread_sigmask(SIG_SETMASK, &old, NULL);
			if (!h || !(*(void **)&sum_squares = dlsym(h, "tracee_sum_squares"))) {
				printf("cannot load %s: %s\n", argv[1], dlerror());
				return 1;
			}
			printf("loaded\n");
		} else if (strcmp(line, "call\n") == 0 && sum_squares) {
			printf("sum=%d\n", late_caller(4));
		} else {
			break;
		}
		fflush(stdout);
	}
	return 0;
}
