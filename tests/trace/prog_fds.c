/* SPDX-License-Identifier: MIT */
/* A program that handles descriptors as daemons do, for the agent's
 * descriptors (test_trace_fds.py).  Prints "ready PID"; then lines:
 *   log PATH   closes descriptors 3-99 (not the agent's to keep), opens
 *              PATH for appending at the lowest number, writes "log\n",
 *              answers "log fd=N"
 *   fork       a child that drops to uid/gid 65534 (when root) looks at
 *              its descriptors: how many name a /proc/PID/mem file, and
 *              writes a new value into `secret` through every one it can
 *              (pwrite at secret's address, which is the parent's too);
 *              the parent answers "child mem=N wrote=W secret=0x..."
 *              after the child ends
 *   churn PATH a thread closes descriptors 3-15 and opens PATH (appending
 *              "x") at the lowest number, over and over, as a program's
 *              own descriptor handling racing the agent's would
 *   unchurn    stops it: "churned N" (rounds)
 *   call       "sum S" (traced functions run)
 *   quit       exits 0 (as does the end of input) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xprobes/trace.h>

static volatile uint64_t secret = 0x1122334455667788ull;

__attribute__((noinline)) long work(long x)
{
	return x * 2 + 1;
}

static char churn_path[4096];
static volatile int churning;
static unsigned long churned;

static void *churn(void *arg)
{
	(void)arg;
	while (churning) {
		for (int fd = 3; fd < 16; fd++)
			close(fd);
		/* The write may fail: the agent's other code (or libc's) may
		 * close what it opened at a number this thread took over
		 * meanwhile; closing descriptors one does not own is the
		 * program's risk.  What matters is what lands in the file. */
		int fd = open(churn_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		churned += fd >= 0 && write(fd, "x", 1) == 1;
	}
	return NULL;
}

static void child(int report)
{
	if (getuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
		_exit(2);
	int mem = 0, wrote = 0;
	uint64_t evil = 0x4141414141414141ull;
	for (int fd = 0; fd < 1024; fd++) {
		char link[64], to[4096];
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(link, to, sizeof(to) - 1);
		if (n <= 0 || fd == report)
			continue;
		to[n] = '\0';
		if (strncmp(to, "/proc/", 6) == 0 && n > 4 && strcmp(to + n - 4, "/mem") == 0)
			mem++;
		if (fd > 2 && pwrite(fd, &evil, sizeof(evil), (off_t)(uintptr_t)&secret) == sizeof(evil))
			wrote++;
	}
	dprintf(report, "%d %d\n", mem, wrote);
	_exit(0);
}

int main(void)
{
	char line[4096];
	pthread_t churner;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready %d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "log ", 4) == 0) {
			for (int fd = 3; fd < 100; fd++)
				close(fd);
			int fd = open(line + 4, O_WRONLY | O_APPEND | O_CREAT, 0644);
			if (fd < 0 || write(fd, "log\n", 4) != 4)
				return 1;
			printf("log fd=%d\n", fd);
		} else if (strcmp(line, "fork") == 0) {
			int p[2];
			if (pipe(p) != 0)
				return 1;
			pid_t pid = fork();
			if (pid == 0) {
				close(p[0]);
				child(p[1]);
			}
			close(p[1]);
			char got[64] = "";
			ssize_t n = read(p[0], got, sizeof(got) - 1);
			close(p[0]);
			int mem = -1, wrote = -1;
			if (n > 0)
				sscanf(got, "%d %d", &mem, &wrote);
			waitpid(pid, NULL, 0);
			printf("child mem=%d wrote=%d secret=0x%" PRIx64 "\n", mem, wrote, secret);
		} else if (strncmp(line, "churn ", 6) == 0) {
			snprintf(churn_path, sizeof(churn_path), "%s", line + 6);
			churning = 1;
			if (pthread_create(&churner, NULL, churn, NULL) != 0)
				return 1;
			printf("churning\n");
		} else if (strcmp(line, "unchurn") == 0) {
			churning = 0;
			pthread_join(churner, NULL);
			printf("churned %lu\n", churned);
		} else if (strcmp(line, "call") == 0) {
			printf("sum %ld\n", work(1) + work(2));
		} else if (strcmp(line, "quit") == 0) {
			break;
		}
	}
	return 0;
}
