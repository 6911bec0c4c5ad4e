/* SPDX-License-Identifier: MIT */
/* mcload: drive memcached with a chosen load and report what it saw.
 * See docs/man/mcload.1. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcload.h"
#include "../common/common.h"

extern volatile sig_atomic_t mcload_stop;

static void on_signal(int sig)
{
	(void)sig;
	mcload_stop = 1;   /* stop sending, drain, report */
}

struct shared {
	struct run run;
	pthread_barrier_t connected, started;
	_Atomic int failed;
};

struct thread_arg {
	struct shared *sh;
	struct worker w;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	struct shared *sh = a->sh;
	if (worker_connect(&a->w) < 0)
		atomic_store(&sh->failed, 1);
	/* Every connection is up before the clock starts, on every thread. */
	if (pthread_barrier_wait(&sh->connected) == PTHREAD_BARRIER_SERIAL_THREAD) {
		sh->run.t0 = now_ns();
		double s = sh->run.cfg->seconds;
		sh->run.t_end = s > 0 ? sh->run.t0 + (uint64_t)(s * 1e9) : UINT64_MAX;
	}
	pthread_barrier_wait(&sh->started);
	if (!atomic_load(&sh->failed))
		worker_run(&a->w);
	return NULL;
}

int main(int argc, char **argv)
{
	static struct config cfg;
	cli_std_streams("mcload");
	opts_parse(&cfg, argc, argv);

	static struct shared sh;
	sh.run.cfg = &cfg;
	char *value = malloc(cfg.vmax + 1u);
	if (!value) {
		fputs("mcload: out of memory\n", stderr);
		return 1;
	}
	for (unsigned i = 0; i < cfg.vmax; i++)
		value[i] = (char)('a' + i % 26);
	sh.run.value = value;
	if (cfg.truth_path) {
		/* Refused now, not after the whole run. */
		FILE *probe = fopen(cfg.truth_path, "a");
		if (!probe) {
			fprintf(stderr, "mcload: --truth %s: cannot write it: %s\n", cfg.truth_path,
				strerror(errno));
			return 2; /* a bad argument, as opts.c's */
		}
		fclose(probe);
		sh.run.truth.gets = calloc(cfg.keys, sizeof *sh.run.truth.gets);
		sh.run.truth.sets = calloc(cfg.keys, sizeof *sh.run.truth.sets);
		if (!sh.run.truth.gets || !sh.run.truth.sets) {
			fprintf(stderr, "mcload: no memory for --truth over %llu keys\n",
				(unsigned long long)cfg.keys);
			return 1;
		}
	}

	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	pthread_barrier_init(&sh.connected, NULL, cfg.threads);
	pthread_barrier_init(&sh.started, NULL, cfg.threads);
	struct thread_arg *ta = calloc(cfg.threads, sizeof *ta);
	pthread_t *tid = calloc(cfg.threads, sizeof *tid);
	if (!ta || !tid) {
		fputs("mcload: out of memory\n", stderr);
		return 1;
	}
	for (unsigned i = 0; i < cfg.threads; i++) {
		ta[i].sh = &sh;
		ta[i].w.run = &sh.run;
		ta[i].w.index = i;
		ta[i].w.first_conn = i;
		if (pthread_create(&tid[i], NULL, thread_main, &ta[i]) != 0) {
			fputs("mcload: cannot start a thread\n", stderr);
			return 1;
		}
	}
	struct counters total = { 0 };
	static struct hist lat;
	uint64_t t_last = 0;
	int failed = 0;
	for (unsigned i = 0; i < cfg.threads; i++) {
		pthread_join(tid[i], NULL);
		struct worker *w = &ta[i].w;
		if (w->err[0]) {
			if (!failed)
				fprintf(stderr, "mcload: %s\n", w->err);
			failed = 1;
		}
		const uint64_t *from = (const uint64_t *)&w->c;
		uint64_t *into = (uint64_t *)&total;
		for (size_t k = 0; k < sizeof total / sizeof(uint64_t); k++)
			into[k] += from[k];
		hist_merge(&lat, &w->lat);
		if (w->t_last > t_last)
			t_last = w->t_last;
	}
	int rc = 1;
	if (!failed) {
		double elapsed = t_last > sh.run.t0 ? (double)(t_last - sh.run.t0) / 1e9 : 0.0;
		report_print(&cfg, &total, &lat, elapsed);
		fflush(stdout);   /* before --truth, which may be /dev/stdout */
		/* Lost connections or unanswered requests: the figures are suspect. */
		rc = total.conn_errors || total.unanswered;
		if (cfg.truth_path && truth_write(&cfg, &sh.run.truth) < 0)
			rc = 1;
	}
	free(sh.run.truth.gets);
	free(sh.run.truth.sets);
	free(value);
	free(ta);
	free(tid);
	return rc;
}
