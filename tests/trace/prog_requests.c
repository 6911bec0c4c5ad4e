/* SPDX-License-Identifier: MIT */
/* A traced program serving "requests" between two XProbes sites, for
 * tests/trace/test_trace_requests.py (with tests/fixtures/mod_requests.c).
 * It prints "ready PID", then per line:
 *   req ID SLOW   idle(); serve(ID, SLOW, work): reqtest_start, work(ID),
 *                 reqtest_end; idle(); prints "done" (work makes a
 *                 library call: strtol)
 *   open ID       reqtest_start and work(ID), no end (left open); "done"
 *   thread ID     a thread that does what open does, then ends; "done"
 *                 once it has been joined
 *   late ID SLOW  a library call (strtoul) made for the first time
 *                 outside any request, then a request that makes it:
 *                 serve(ID, SLOW, late_work); "done"
 *   quit */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xprobes/site.h>

#include "keep.h"

static volatile int sink;
static char one[] = "1";

/* A library call (through the PLT), made inside requests only: its lazy
 * binding is resolved by a recorded call, whose return hooks its slot
 * again.  lib_two's is first made outside a request (late). */
static inline __attribute__((always_inline)) int lib_one(void)
{
	return (int)strtol(one, NULL, 10);
}

/* Another library call, first made outside a request (late). */
static char two[] = "2";
static inline __attribute__((always_inline)) int lib_two(void)
{
	return (int)strtoul(two, NULL, 10);
}

KEEP static int req_leaf(int x)
{
	return x * 3 + 1;
}

KEEP static int req_work(int id)
{
	int s = lib_one();
	for (int i = 0; i < 3; i++)
		s += req_leaf(id + i);
	return s;
}

KEEP static int req_idle(int x)
{
	return req_leaf(x) + 1;
}

KEEP static int req_serve(int id, int slow, int (*work)(int))
{
	XPROBES_SITE(reqtest_start, (int), (id));
	int r = work(id);
	XPROBES_SITE(reqtest_end, (int, int), (id, slow));
	return r;
}

KEEP static int late_work(int id)
{
	return lib_two() + id;
}

KEEP static int req_open(int id)
{
	XPROBES_SITE(reqtest_start, (int), (id));
	return req_work(id);
}

static void *thread_main(void *arg)
{
	sink = req_open((int)(long)arg);
	return NULL;
}

int main(void)
{
	char line[64];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		int id = 0, slow = 0;
		if (sscanf(line, "req %d %d", &id, &slow) == 2) {
			sink = req_idle(1);
			sink = req_serve(id, slow, req_work);
			sink = req_idle(2);
		} else if (sscanf(line, "late %d %d", &id, &slow) == 2) {
			sink = lib_two();
			sink = req_serve(id, slow, late_work);
		} else if (sscanf(line, "open %d", &id) == 1) {
			sink = req_open(id);
		} else if (sscanf(line, "thread %d", &id) == 1) {
			pthread_t t;
			if (pthread_create(&t, NULL, thread_main, (void *)(long)id) == 0)
				pthread_join(t, NULL);
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		} else {
			continue;
		}
		printf("done\n");
		fflush(stdout);
	}
	return 0;
}
