/* SPDX-License-Identifier: MIT */
/* Request-scoped recording lent to probe modules: the table a module's
 * xprobes_trace_request_begin() and _end() (<xprobes/probe.h>) call
 * through, written into each module as it is loaded (lib/probes/
 * modules.c, a layer below this one, is handed it here at start-up), and
 * what a module's unload does to requests still open (they are dropped:
 * the handler that would end them is gone).  The recording itself is in
 * trace_record.c, beside the hot path it changes. */
#include <xprobes/probe.h>

#include "../probes/probes.h"
#include "trace.h"

static int request_begin(void)
{
	return xp_trace_request_begin();
}

static int request_end(int keep, const char *label)
{
	return xp_trace_request_end(keep, label);
}

static const struct xprobes_trace_api api = {
	XPROBES_TRACE_API_ABI, sizeof(struct xprobes_trace_api), request_begin, request_end,
};

/* Before the agent's start-up (priority 101 is the traced objects' own
 * constructor, lib/static/trace_note.c; the agent's runs unordered). */
__attribute__((constructor(102))) static void lend(void)
{
	xp_modules_lend_trace((void *)&api, xp_trace_request_cancel_all);
}
