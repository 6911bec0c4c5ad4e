/* SPDX-License-Identifier: MIT */
/* A test driver for tools/trace_uftrace.c (tests/trace/test_uftrace_format.py).
 *
 *   uft_write write DIR PID EXE [MAPS_FILE]   commands on stdin, one a line:
 *       object PATH BASE        an object of the session (before the first event)
 *       dlopen PATH BASE        an object loaded later (uft_object)
 *       site ADDR NAME          what the site-name callback answers for ADDR
 *       thread TID [NAME]       uft_thread
 *       E|X|S|L TID NS ADDR     an event (entry, exit, site, lost: ADDR the count)
 *   Consecutive events of one thread go to uft_append together; a blank
 *   line flushes too (to split a thread's stream over several appends).
 *   Prints "skipped N" at the end.
 *
 *   uft_write read DIR graph|chrome|folded|stat   uft_load, then that view;
 *       first a line "threads TID=NAME ..." (names as the reader found them).
 *
 * Numbers may be decimal or 0x-hex.  Exit status 1 with the writer's or
 * reader's message on stderr. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../tools/xprobes/xprobes.h"

struct site {
	unsigned long long addr;
	char *name;
};

static struct site sites[256];
static size_t nsites;

static const char *site_name(void *ctx, uint64_t addr)
{
	(void)ctx;
	for (size_t i = 0; i < nsites; i++)
		if (sites[i].addr == addr)
			return sites[i].name;
	return NULL;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *text = NULL;
	size_t len = 0;
	if (!f)
		return NULL;
	FILE *o = open_memstream(&text, &len);
	int c;
	while ((c = fgetc(f)) != EOF)
		fputc(c, o);
	fclose(o);
	fclose(f);
	return text;
}

static int die(const char *what)
{
	fprintf(stderr, "uft_write: %s\n", what);
	return 1;
}

static int do_write(int argc, char **argv)
{
	if (argc < 5)
		return die("usage: write DIR PID EXE [MAPS_FILE]");
	struct uft_object objs[64];
	size_t nobjs = 0;
	struct uft_session s = { .pid = atoi(argv[3]), .exe = argv[4], .cmdline = argv[4],
				 .site_name = site_name, .overwrite = 1 };
	struct timespec mono, real;
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &real);
	s.real_ns = (uint64_t)real.tv_sec * 1000000000u + (uint64_t)real.tv_nsec;
	/* The events' times are the test's, likely earlier: uft_close moves
	 * task.txt's back to the first. */
	s.mono_ns = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;
	char *maps = argc > 5 ? slurp(argv[5]) : NULL;
	s.maps = maps;
	struct uft_writer *w = NULL;
	struct tf_event batch[4096];
	size_t nb = 0;
	int btid = 0, rc = 0;
	char line[4096];
	while (!rc && fgets(line, sizeof(line), stdin)) {
		char a[2048] = "", b[64] = "", c[64] = "", d[64] = "";
		int n = sscanf(line, "%2047s %63s %63s %63s", a, b, c, d);
		char kind = n >= 1 && strlen(a) == 1 ? a[0] : 0;
		int tid = n >= 2 ? (int)strtol(b, NULL, 0) : 0;
		if (nb && (n <= 0 || !strchr("EXSL", kind) || tid != btid || nb == 4096)) {
			rc = uft_append(w, btid, batch, nb);
			nb = 0;
		}
		if (rc || n <= 0)
			continue;
		if (!strcmp(a, "object") && n >= 3 && nobjs < 64) {
			objs[nobjs++] = (struct uft_object){ .path = strdup(b), .base = strtoull(c, NULL, 0) };
			continue;
		}
		if (!strcmp(a, "site") && n >= 3 && nsites < 256) {
			sites[nsites++] = (struct site){ strtoull(b, NULL, 0), strdup(c) };
			continue;
		}
		if (!w) {
			s.objects = objs;
			s.nobjects = nobjs;
			if (!(w = uft_open(argv[2], &s)))
				return die(uft_error(NULL));
		}
		if (!strcmp(a, "dlopen") && n >= 3) {
			struct uft_object o = { .path = b, .base = strtoull(c, NULL, 0) };
			rc = uft_object(w, &o);
		} else if (!strcmp(a, "thread") && n >= 2) {
			rc = uft_thread(w, tid, n >= 3 ? c : NULL);
		} else if (kind && strchr("EXSL", kind) && n == 4) {
			unsigned k = kind == 'E' ? XP_TRACE_ENTRY : kind == 'X' ? XP_TRACE_EXIT
				     : kind == 'S' ? XP_TRACE_SITE : XP_TRACE_LOST;
			btid = tid;
			batch[nb++] = (struct tf_event){ strtoull(c, NULL, 0), strtoull(d, NULL, 0), k };
		} else {
			fprintf(stderr, "uft_write: bad line: %s", line);
			return 1;
		}
	}
	if (!w && !(w = uft_open(argv[2], &s)))
		return die(uft_error(NULL));
	if (!rc && nb)
		rc = uft_append(w, btid, batch, nb);
	if (rc) {
		fprintf(stderr, "uft_write: %s\n", uft_error(w));
		uft_close(w);
		return 1;
	}
	printf("skipped %llu\n", (unsigned long long)uft_skipped(w));
	free(maps);
	for (size_t i = 0; i < nobjs; i++)
		free((char *)objs[i].path);
	for (size_t i = 0; i < nsites; i++)
		free(sites[i].name);
	if (uft_close(w))
		return die(uft_error(NULL));
	return 0;
}

static int do_read(int argc, char **argv)
{
	if (argc < 4)
		return die("usage: read DIR graph|chrome|folded|stat");
	struct uft_recording r;
	if (uft_load(argv[2], &r))
		return die(r.err);
	printf("threads");
	for (size_t i = 0; i < r.nthreads; i++)
		printf(" %d=%s", r.threads[i].tid, r.thread_names[i]);
	printf("\n");
	struct tf_trace t = { r.threads, r.nthreads, r.pid, r.origin_ns, r.names, r.args };
	struct tf_filter f = { .min_ns = 0 };
	int rc = !strcmp(argv[3], "graph") ? tf_graph(stdout, &t, &f)
		 : !strcmp(argv[3], "chrome") ? tf_chrome(stdout, &t, &f)
		 : !strcmp(argv[3], "folded") ? tf_folded(stdout, &t, &f)
		 : tf_stat(stdout, &t, &f, TF_SORT_CALLS);
	uft_free(&r);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "write"))
		return do_write(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "read"))
		return do_read(argc, argv);
	return die("usage: uft_write write|read ...");
}
