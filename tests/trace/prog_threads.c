/* SPDX-License-Identifier: MIT */
/* A traced program of many threads for tests/trace/test_trace_cgroup.py:
 * argv[1] threads (default 8) each call work() in bursts of 100 with a
 * millisecond's pause between, until "quit" on stdin (or end of input);
 * it prints "ready PID" once every thread runs, and at quit "calls N bad
 * M" (M: results that were not the known value) before it exits. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keep.h"

#define MAX_THREADS 64

static atomic_int stop, started;
static atomic_long calls, bad;

KEEP int work(int x)
{
	return x * 3 + 1;
}

static void *worker(void *arg)
{
	(void)arg;
	atomic_fetch_add(&started, 1);
	while (!atomic_load(&stop)) {
		for (int i = 0; i < 100; i++)
			if (work(i) != i * 3 + 1)
				atomic_fetch_add(&bad, 1);
		atomic_fetch_add(&calls, 100);
		usleep(1000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 8;
	pthread_t th[MAX_THREADS];
	if (n < 1 || n > MAX_THREADS)
		return 2;
	for (int i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, worker, NULL) != 0)
			return 1;
	while (atomic_load(&started) < n)
		usleep(1000);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof(line), stdin) && strncmp(line, "quit", 4) != 0)
		;
	atomic_store(&stop, 1);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	printf("calls %ld bad %ld\n", atomic_load(&calls), atomic_load(&bad));
	return 0;
}
