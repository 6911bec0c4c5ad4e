/* SPDX-License-Identifier: MIT */
/* mcsnoop on a memcached without probe sites: one line per item_get and
 * item_store of memcached's own watch stream (tools/common/mcwatch.c).
 * What the stream does not say is absent: the worker thread ("-", null)
 * and the latency; touch, incr, decr and delete appear as the gets
 * memcached logs for their lookups.  Lines memcached skipped (this reader
 * fell behind) or its workers dropped (its logger thread fell behind) are
 * reported on stderr as drops, as the module's are. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/common.h"
#include "mcsnoop.h"

/* Every field the stream gave goes out by the key text rule, as the
 * module's do: the key from the bytes memcached URI-encoded (decoded
 * once, in mcwatch_line.c), and a store's cmd, which is the stream's text
 * too.  The time is memcached's stamp on CLOCK_MONOTONIC (mcwatch.c). */
static void to_snoop(const struct mcwatch_event *w, struct snoop_event *e)
{
	memset(e, 0, sizeof(*e));
	e->time_ns = w->time_ns;
	e->tid = -1;
	e->conn = w->cfd;
	e->lat_ns = -1;
	e->keylen = (unsigned)w->keylen;
	e->key_escaped = keytext_from_bytes(w->key, w->keylen, e->key, sizeof(e->key), 0);
	if (!w->store) {
		int hit = strcmp(w->status, "found") == 0;
		snprintf(e->cmd, sizeof(e->cmd), "get");
		snprintf(e->result, sizeof(e->result), hit ? "hit" : "miss");
		e->size = hit ? w->size : -1;
	} else {
		keytext_from_bytes(w->cmd, strlen(w->cmd), e->cmd, sizeof(e->cmd), 0);
		snprintf(e->result, sizeof(e->result), "%s",
			 strcmp(w->status, "stored") == 0 ? "stored" : "not_stored");
		e->size = w->size;
	}
}

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* What was reported so far. */
struct drops {
	unsigned long long skipped, dropped;
	double asked_at;
};

/* Report drops since the last report: the stream's skipped lines (and
 * the gets a skip made undecidable) as they come; memcached's statistics
 * once a second at most (a stats round trip), and at the end, when they
 * hold skips the stream never got to report. */
static void report_drops(struct mcwatch *w, struct drops *d, int final, double deadline)
{
	unsigned long long skipped = w->skipped + w->ambiguous;
	if (skipped > d->skipped) {
		fprintf(stderr, "mcsnoop: %llu events dropped (memcached skipped them: mcsnoop fell "
				"behind)\n", skipped - d->skipped);
		d->skipped = skipped;
	}
	double now = mono_s();
	/* The round trip is bounded (a memcached that answers slowly must not
	 * hold -d), and before the end it is not begun too close to -d. */
	int ms = MCWATCH_STATS_MS;
	if (!final && deadline && (deadline - now) * 1000 < ms)
		ms = (int)((deadline - now) * 1000);
	unsigned long long dropped, stat_skipped;
	if ((!final && (now - d->asked_at < 1 || ms < 50)) ||
	    mcwatch_stats(w, ms, &dropped, &stat_skipped) != 0)
		return;
	d->asked_at = now;
	if (dropped > d->dropped) {
		fprintf(stderr, "mcsnoop: %llu events dropped (by memcached's workers: its logger "
				"thread fell behind)\n", dropped - d->dropped);
		d->dropped = dropped;
	}
	if (final && stat_skipped > w->skipped)
		fprintf(stderr, "mcsnoop: %llu events dropped (memcached skipped them: mcsnoop fell "
				"behind)\n", stat_skipped - w->skipped);
}

/* Lines the stream sent that memcached does not write: said once, at the
 * end, so that a broken or hostile memcached is noticed. */
static void report_malformed(const struct mcwatch *w)
{
	if (w->malformed)
		fprintf(stderr, "mcsnoop: %llu lines of the watch stream ignored (longer than %d "
				"bytes, or not as memcached writes them)\n", w->malformed,
			MCWATCH_LINE_MAX);
}

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int snoop_watch(pid_t pid, const struct snoop_watch_opts *o)
{
	struct mcwatch *w = calloc(1, sizeof(*w));
	if (!w) {
		fprintf(stderr, "mcsnoop: out of memory\n");
		return 1;
	}
	fprintf(stderr, "mcsnoop: process %d has no probe sites (a memcached not built with "
			"xprobes-dtrace): reading its watch stream instead; no latency, no thread\n",
		(int)pid);
	if (mcwatch_open(w, pid, o->port, "mcsnoop") != 0) {
		free(w);
		return 1;
	}
	double deadline = o->duration ? mono_s() + o->duration : 0, drain_end = 0;
	int64_t wall_offset = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
	struct drops d = { .asked_at = mono_s() };
	long shown = 0;
	int status = 0;
	if (!o->json)
		snoop_print_header(stdout);
	/* Until a signal, -d or -n; then what already arrived, held-back gets
	 * included: a drain bounded in events and in time, as memcached may go
	 * on writing.  Each wait ends on time whatever the stream sends. */
	for (long drained = 0; (!o->count || shown < o->count) && drained < 100000;
	     drained += drain_end > 0) {
		double now = mono_s(), left = deadline ? deadline - now : 0.1;
		if (!drain_end && (cli_stop || (deadline && left <= 0))) {
			drain_end = now + 1;
			mcwatch_flush(w);
		}
		if (drain_end && now > drain_end)
			break;
		struct mcwatch_event we;
		int wait_ms = drain_end ? 0 : left < 0.1 ? (int)(left * 1000) + 1 : 100;
		int rc = mcwatch_next(w, &we, wait_ms, "mcsnoop");
		if (rc == 0 && drain_end) {
			if (!w->npend)
				break;
			/* Gets held back from lines read while draining. */
			mcwatch_flush(w);
			continue;
		}
		if (rc < 0) {
			status = 1;
			break;
		}
		report_drops(w, &d, 0, deadline);
		struct snoop_event e;
		if (rc == 0)
			continue;
		to_snoop(&we, &e);
		if (!snoop_match(o->filter, &e))
			continue;
		(o->json ? snoop_print_json : snoop_print_text)(&e, wall_offset, stdout);
		shown++;
		/* Flushed per line only when nothing else is waiting would be
		 * faster; a line at a time keeps a pipe reader current. */
		if (fflush(stdout) != 0 || ferror(stdout)) {
			status = errno == EPIPE ? 0 : 1;
			break;
		}
	}
	report_drops(w, &d, 1, deadline);
	report_malformed(w);
	mcwatch_close(w); /* memcached stops logging for us */
	free(w);
	return status;
}
