/* SPDX-License-Identifier: MIT */
/* Injection targets whose threads are not where the simple case has them.
 * No libxprobes linked.  Prints "ready PID" first.
 *
 *   busy_target malloc    the main thread allocates and frees without end
 *                         (holding malloc's arena lock much of the time);
 *                         a second thread answers stdin: "hit" -> fires a
 *                         site, "hit N"; "progress" -> waits until the main
 *                         thread has made 1000 more rounds, "progress ok"
 *   busy_target spin      only the main thread, allocating without end
 *   busy_target exitmain  the main thread calls pthread_exit(); the second
 *                         thread says "ready PID" once it is gone (before,
 *                         an injection could start while it still ran and
 *                         lose the thread it had picked), then answers
 *                         stdin as above
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xprobes/site.h>

static atomic_long rounds;

/* Sizes above the thread cache's largest (1032 bytes), so every call
 * takes the arena lock. */
static void churn(void)
{
	for (;;) {
		void *p[16];
		for (int i = 0; i < 16; i++)
			p[i] = malloc((size_t)(2048 + 1024 * i));
		for (int i = 0; i < 16; i++)
			free(p[i]);
		atomic_fetch_add_explicit(&rounds, 1, memory_order_relaxed);
	}
}

/* Whether the main thread has exited: its state in /proc (Z, or X). */
static int main_thread_gone(void)
{
	char path[64], line[512];
	int gone = 0;
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)getpid());
	FILE *f = fopen(path, "r");
	if (!f)
		return 1;
	if (fgets(line, sizeof(line), f)) {
		const char *p = strrchr(line, ')');
		gone = p && (p[2] == 'Z' || p[2] == 'X');
	}
	fclose(f);
	return gone;
}

static void *answer(void *arg)
{
	char line[64];
	long hits = 0;
	if (arg) { /* exitmain: ready only once the main thread is gone, so
		    * that an injection never starts while it is still there */
		while (!main_thread_gone())
			sched_yield();
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
	}
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "progress", 8) == 0) {
			long target = atomic_load(&rounds) + 1000;
			while (atomic_load(&rounds) < target)
				sched_yield();
			printf("progress ok\n");
		} else {
			hits++;
			XPROBES_SITE(busy_hit, (long), (hits));
			printf("hit %ld\n", hits);
		}
		fflush(stdout);
	}
	exit(0);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "malloc";
	int exitmain = strcmp(mode, "exitmain") == 0;
	if (!exitmain) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
	}
	if (strcmp(mode, "spin") == 0)
		churn();
	pthread_t t;
	if (pthread_create(&t, NULL, answer, exitmain ? "exitmain" : NULL) != 0)
		return 1;
	if (exitmain)
		pthread_exit(NULL);
	churn();
}
