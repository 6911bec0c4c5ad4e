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
 *                         thread answers stdin as above
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

static void *answer(void *arg)
{
	char line[64];
	long hits = 0;
	(void)arg;
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
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	if (strcmp(mode, "spin") == 0)
		churn();
	pthread_t t;
	if (pthread_create(&t, NULL, answer, NULL) != 0)
		return 1;
	if (strcmp(mode, "exitmain") == 0)
		pthread_exit(NULL);
	churn();
}
