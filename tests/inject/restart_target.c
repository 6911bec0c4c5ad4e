/* SPDX-License-Identifier: MIT */
/* An injection target whose main thread is borrowed inside a system call
 * that the kernel restarts through restart_syscall (a condition variable
 * wait with a deadline: FUTEX_WAIT_BITSET, -ERESTART_RESTARTBLOCK), with
 * a non-default rounding mode (MXCSR and the x87 control word, which the
 * injection must give back).  A second thread answers stdin: "wake"
 * wakes the main thread, which prints "woke rc=RC round=upward|changed";
 * "hit" answers "hit N". */
#include <errno.h>
#include <fenv.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int woken;

static void *answer(void *arg)
{
	char line[64];
	long hits = 0;
	(void)arg;
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "wake", 4) == 0) {
			pthread_mutex_lock(&lock);
			woken = 1;
			pthread_cond_signal(&cond);
			pthread_mutex_unlock(&lock);
			continue; /* the main thread answers */
		}
		printf("hit %ld\n", ++hits);
		fflush(stdout);
	}
	_exit(0);
}

int main(void)
{
	pthread_t t;
	struct timespec deadline;
	int rc = 0;

	fesetround(FE_UPWARD);
	if (pthread_create(&t, NULL, answer, NULL) != 0)
		return 1;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 3600;
	pthread_mutex_lock(&lock);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (!woken && rc == 0)
		rc = pthread_cond_timedwait(&cond, &lock, &deadline);
	pthread_mutex_unlock(&lock);
	/* Both control registers: the x87 one (fegetround) and MXCSR's
	 * rounding bits (13-14; 2 = upward). */
	int upward = fegetround() == FE_UPWARD && (__builtin_ia32_stmxcsr() >> 13 & 3) == 2;
	printf("woke rc=%d round=%s\n", rc, upward ? "upward" : "changed");
	fflush(stdout);
	pthread_join(t, NULL);
	return 0;
}
