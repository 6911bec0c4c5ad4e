/* SPDX-License-Identifier: MIT */
/* A program's whole life, for tests/trace/test_trace_follow.py: built with
 * the trace flags (lib/trace.mk) for xprobes, and with -pg by the test for
 * uftrace, then recorded by both.  argv[1] says what it does:
 *   fork     a child does child_work and exits; the parent waits
 *   vfork    vfork, then exec of this program as "leaf"
 *   spawn    posix_spawn of this program as "leaf", waited for
 *   daemon   daemon(), then the daemon does child_work
 *   exec     exec of this program as "leaf"
 *   texec    a thread execs this program as "leaf"
 *   leaf     an exec'd image: image_work
 *   dlopen   dlopen("./LIB") (argv[2], relative to the current directory),
 *            then calls its tracee_sum_squares
 * Every path calls its own functions, distinct by name, at known depths. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static const char *self;
static volatile int sink;

__attribute__((noinline)) static int leaf_a(int x)
{
	return sink += x;
}

__attribute__((noinline)) static int child_work(int x)
{
	return leaf_a(x) + leaf_a(x + 1);
}

__attribute__((noinline)) static int parent_work(int x)
{
	return leaf_a(x) * 2;
}

__attribute__((noinline)) static int image_work(int x)
{
	return leaf_a(x) - 1;
}

__attribute__((noinline)) static void run_image(void)
{
	execl(self, self, "leaf", (char *)NULL);
	perror("prog_life: exec");
	_exit(127);
}

__attribute__((noinline)) static int do_fork(void)
{
	pid_t p = fork();
	if (p < 0)
		return 1;
	if (p == 0) {
		child_work(1);
		exit(0);
	}
	parent_work(2);
	return waitpid(p, NULL, 0) == p ? 0 : 1;
}

__attribute__((noinline)) static int do_vfork(void)
{
	parent_work(3);
	pid_t p = vfork();
	if (p == 0) {
		execl(self, self, "leaf", (char *)NULL);
		_exit(127);
	}
	if (p < 0)
		return 1;
	waitpid(p, NULL, 0);
	parent_work(4);
	return 0;
}

__attribute__((noinline)) static int do_spawn(void)
{
	char *argv[] = { (char *)self, "leaf", NULL };
	pid_t p;
	parent_work(5);
	if (posix_spawn(&p, self, NULL, NULL, argv, environ) != 0)
		return 1;
	waitpid(p, NULL, 0);
	parent_work(6);
	return 0;
}

__attribute__((noinline)) static int do_daemon(void)
{
	if (daemon(1, 0) != 0)
		return 1;
	child_work(7);
	return 0;
}

static void *exec_thread(void *arg)
{
	(void)arg;
	parent_work(8);
	run_image();
	return NULL;
}

__attribute__((noinline)) static int do_texec(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, exec_thread, NULL) != 0)
		return 1;
	pthread_join(t, NULL); /* never returns: the exec ends this image */
	return 1;
}

__attribute__((noinline)) static int do_dlopen(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "prog_life: %s\n", dlerror());
		return 1;
	}
	int (*entry)(int) = (int (*)(int))dlsym(h, "tracee_sum_squares");
	if (!entry)
		return 1;
	entry(3);
	return 0;
}

int main(int argc, char **argv)
{
	self = "/proc/self/exe";
	if (argc < 2)
		return 2;
	const char *m = argv[1];
	if (!strcmp(m, "leaf"))
		return image_work(9) < -100;
	if (!strcmp(m, "fork"))
		return do_fork();
	if (!strcmp(m, "vfork"))
		return do_vfork();
	if (!strcmp(m, "spawn"))
		return do_spawn();
	if (!strcmp(m, "daemon"))
		return do_daemon();
	if (!strcmp(m, "exec")) {
		parent_work(10);
		run_image();
	}
	if (!strcmp(m, "texec"))
		return do_texec();
	if (!strcmp(m, "dlopen") && argc > 2)
		return do_dlopen(argv[2]);
	return 2;
}
