/* SPDX-License-Identifier: MIT */
/* `trace snapshot -o DIR`: what the buffers hold now (a flight recorder's
 * last moments, typically) written as a uftrace data directory, the one
 * `trace record -o DIR` writes (trace_uftrace.c), so that uftrace replay,
 * tui, graph and `xprobes trace cat -d DIR` read it.  Tracing goes on.
 *
 * The records are older than the directory's session: uft_close moves
 * the session's and the tasks' timestamps back to the first record, as
 * uftrace reads a record older than them with no symbols. */
#include "xprobes.h"

#include <inttypes.h>
#include <stdio.h>

int trace_snapshot_dir(struct session *s, const char *dir, int tid, const struct argspecs *args)
{
	struct trace_data d;
	if (trace_read(s, tid, &d) != 0) {
		trace_data_free(&d);
		return 1;
	}
	if (tid && !d.nthreads) {
		fprintf(stderr, "xprobes: trace snapshot: nothing recorded by that thread\n");
		trace_data_free(&d);
		return 1;
	}
	struct trace_names *names = NULL;
	struct uft_writer *w = trace_open_writer(s, dir, &names, args);
	int rc = w ? 0 : 1;
	uint64_t records = 0, lost = 0;
	for (size_t i = 0; i < d.nthreads && !rc; i++) {
		const struct tf_thread *th = &d.threads[i];
		if (uft_thread(w, th->tid, th->name) != 0 || uft_append(w, th->tid, th->ev, th->n) != 0) {
			fprintf(stderr, "xprobes: trace snapshot: %s\n", uft_error(w));
			rc = 1;
		}
		records += th->n;
		lost += th->lost;
	}
	uint64_t skipped = w ? uft_skipped(w) : 0;
	if (w && uft_close(w) != 0) {
		fprintf(stderr, "xprobes: trace snapshot: %s\n", uft_error(NULL));
		rc = 1;
	}
	if (!rc) {
		/* A flight recorder's oldest records are exits of calls whose
		 * entries it wrote over: uftrace has no record for them. */
		if (skipped)
			fprintf(stderr, "xprobes: trace snapshot: %" PRIu64 " records not kept in "
					"uftrace's format (exits of calls entered before the "
					"oldest record)\n", skipped);
		fprintf(stderr, "xprobes: trace snapshot: %" PRIu64 " records of %zu thread%s in %s, %"
				PRIu64 " lost\n", records, d.nthreads, d.nthreads == 1 ? "" : "s", dir,
			lost);
	}
	trace_names_free(names);
	trace_data_free(&d);
	return rc;
}
