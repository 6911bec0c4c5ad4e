/* SPDX-License-Identifier: MIT */
/* Concurrency test (TSan in `make tsan`): the agent's real control thread
 * serving two clients at once, over its socket, while application threads
 * hit an attached site: module commands on their own threads, disable and
 * enable (grace periods polled by the loop), and a final unload after
 * which no handler may run.  TSan checks every hand-over between the
 * control thread, the command threads and the application threads. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "control/control.h"
#include "base/base.h"

#include <xprobes/probe.h>
#include <xprobes/site.h>

#define APP_THREADS 2
#define ROUNDS 150

static atomic_long hits, after_unload;
static atomic_int unloaded, stop;

static void on_tick(long v)
{
	(void)v;
	atomic_fetch_add_explicit(&hits, 1, memory_order_relaxed);
	if (atomic_load(&unloaded))
		atomic_fetch_add(&after_unload, 1);
}

static void command(const char *args, xprobes_out_fn out)
{
	char buf[64];
	(void)args;
	snprintf(buf, sizeof(buf), "hits %ld\n", atomic_load(&hits));
	out(buf);
}

static const struct xprobes_probe_desc probes[] = {
	XPROBES_PROBE("loop_tick", on_tick, (long)),
};
static const struct xprobes_module_desc desc = {
	XPROBES_MODULE_ABI, sizeof(struct xprobes_module_desc), 0, command, 1, probes
};

static __attribute__((noinline)) void tick(long v)
{
	XPROBES_SITE(loop_tick, (long), (v));
}

static void *app(void *arg)
{
	(void)arg;
	for (long i = 0; !atomic_load(&stop); i++)
		tick(i);
	return NULL;
}

static void must(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "control_loop: %s (%s)\n", what, strerror(errno));
		exit(1);
	}
}

static int connect_agent(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	must(xp_socket_path(sa.sun_path, sizeof(sa.sun_path), geteuid(), getpid()) == 0, "path");
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	must(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect");
	return fd;
}

/* One command; returns the reply's status, text in *text (malloc'd). */
static int call(int fd, const char *line, char **text)
{
	size_t len;
	must(xp_send_frame(fd, line, strlen(line)) == 0, "send");
	must(xp_recv_frame(fd, text, &len, XP_MAX_REPLY) == 0 && len >= 1, "receive");
	return (*text)[0];
}

static void expect(int fd, const char *line, const char *start)
{
	char *text;
	int status = call(fd, line, &text);
	if (status != XP_OK || strncmp(text + 1, start, strlen(start)) != 0) {
		fprintf(stderr, "control_loop: '%s' -> %d '%s', wanted '%s'\n", line, status,
			text + 1, start);
		exit(1);
	}
	free(text);
}

/* A second session, busy throughout. */
static void *observer(void *arg)
{
	(void)arg;
	int fd = connect_agent();
	while (!atomic_load(&stop)) {
		expect(fd, "version", "xprobes agent ");
		expect(fd, "modules", "");
	}
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	(void)argc;
	alarm(120);
	/* The agent starts from its constructor: run again with a private run
	 * directory in the environment it reads. */
	const char *dir = getenv("XPROBES_RUNDIR");
	if (!dir || !strstr(dir, "/xp-loop-")) {
		char tmpl[] = "/tmp/xp-loop-XXXXXX";
		must(mkdtemp(tmpl) != NULL, "mkdtemp");
		setenv("XPROBES_RUNDIR", tmpl, 1);
		unsetenv("XPROBES_AGENT");
		execv("/proc/self/exe", argv);
		must(0, "re-exec");
	}

	struct textbuf out;
	tb_init(&out, 1 << 16);
	pthread_mutex_lock(&xp_agent.lock);
	xp_rescan(NULL);
	must(xp_module_register("/loop/m.so", NULL, &desc, &out) == 0, "register");
	pthread_mutex_unlock(&xp_agent.lock);
	tb_free(&out);
	must(xp_quiesce_init() == 0 && xp_control_start() == 0, "the agent runs");

	pthread_t apps[APP_THREADS], obs;
	for (int i = 0; i < APP_THREADS; i++)
		pthread_create(&apps[i], NULL, app, NULL);
	pthread_create(&obs, NULL, observer, NULL);

	int fd = connect_agent();
	for (int r = 0; r < ROUNDS; r++) {
		expect(fd, "command m.so", "hits ");
		expect(fd, "disable m.so", "disabled m.so");
		expect(fd, "enable m.so", "enabled m.so");
	}
	expect(fd, "unload m.so", "unloaded m.so");
	atomic_store(&unloaded, 1);
	long at_unload = atomic_load(&hits);
	for (int i = 0; i < 1000000; i++)
		tick(i);
	atomic_store(&stop, 1);
	for (int i = 0; i < APP_THREADS; i++)
		pthread_join(apps[i], NULL);
	pthread_join(obs, NULL);
	close(fd);

	printf("control_loop: %d rounds, %ld hits, handlers after unload: %ld\n", ROUNDS, at_unload,
	       atomic_load(&after_unload));
	xp_control_cleanup();
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return atomic_load(&after_unload) == 0 && at_unload > 0 ? 0 : 1;
}
