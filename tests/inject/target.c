/* SPDX-License-Identifier: MIT */
/* An injection target: sites compiled in, no libxprobes linked.  Worker
 * threads hit a site in a loop (if asked) while the main thread blocks in
 * read(): "hit" fires the main site once and answers "hit N". */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xprobes/site.h>

struct conn {
	int fd;
	long served;
};

static atomic_long spins;

static void *spinner(void *arg)
{
	(void)arg;
	for (;;) {
		long n = atomic_fetch_add_explicit(&spins, 1, memory_order_relaxed);
		XPROBES_SITE(inject_spin, (long), (n));
	}
	return NULL;
}

int main(int argc, char **argv)
{
	char line[64];
	struct conn c = { 7, 0 };
	int threads = argc > 1 ? atoi(argv[1]) : 0;

	for (int i = 0; i < threads; i++) {
		pthread_t t;
		pthread_create(&t, NULL, spinner, NULL);
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		c.served++;
		XPROBES_SITE(inject_conn_release, (const struct conn *), (&c));
		printf("hit %ld\n", c.served);
		fflush(stdout);
	}
	return 0;
}
