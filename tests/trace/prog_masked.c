/* SPDX-License-Identifier: MIT */
/* A program in which a thread blocks every signal around a loop of
 * traced calls, then unblocks for another loop; a second thread takes a
 * signal whose handler, installed with a full mask, calls traced code.
 * `trace start` used to kill it with SIGTRAP (an int3 met with SIGTRAP
 * blocked).  Prints "ready PID"; "check" answers "rounds=N handled=M
 * bad=K"; "quit" (or end of input) ends it. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <xprobes/trace.h>

__attribute__((noinline)) int work(int i)
{
	return i * 3 + 1;
}

__attribute__((noinline)) int other(int i)
{
	return i ^ 0x55;
}

static volatile unsigned long rounds, handled, bad;
static volatile int stop;

static void on_usr1(int sig)
{
	(void)sig;
	if (work(2) != 7 || other(0) != 0x55)
		bad++;
	handled++;
}

static void *spin(void *arg)
{
	(void)arg;
	sigset_t all, old;
	sigfillset(&all);
	while (!stop) {
		pthread_sigmask(SIG_BLOCK, &all, &old);
		for (int i = 0; i < 200; i++)
			if (work(i) != i * 3 + 1)
				bad++;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		for (int i = 0; i < 200; i++)
			if (other(i) != (i ^ 0x55))
				bad++;
		rounds++;
	}
	return NULL;
}

static void *signaller(void *arg)
{
	pthread_t target = *(pthread_t *)arg;
	while (!stop)
		pthread_kill(target, SIGUSR1);
	return NULL;
}

XPROBES_NOTRACE int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigfillset(&sa.sa_mask); /* SIGTRAP blocked while the handler runs */
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);

	pthread_t t[2];
	pthread_create(&t[0], NULL, spin, NULL);
	pthread_create(&t[1], NULL, signaller, &t[0]);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof(line), stdin) && strcmp(line, "quit\n") != 0) {
		printf("rounds=%lu handled=%lu bad=%lu\n", rounds, handled, bad);
		fflush(stdout);
	}
	stop = 1;
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	return 0;
}
