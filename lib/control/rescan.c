/* SPDX-License-Identifier: MIT */
/* The rescan: after a dlopen() or before a command, find the objects
 * loaded or unloaded since the last look, give the sites of new objects
 * every live module's probes, and let the tracer patch new functions.
 * Here, above the probe runtime and the tracer, because it is the one
 * place that joins them. */
#include <stdlib.h>

#include "control.h"

void xp_rescan(struct textbuf *log)
{
	struct xp_object **added;
	size_t nadded;

	if (xp_objects_refresh(&added, &nadded, log) != 0)
		return;
	for (size_t i = 0; i < nadded; i++) {
		struct xp_object *o = added[i];
		/* All or nothing per object: on failure its sites stay detached
		 * (and say so); the process runs on as it was. */
		if (xp_modules_attach_sites(o->sites, o->nsites, log) != 0 && log)
			tb_printf(log, "out of memory attaching probes to the sites of %s; "
				       "they stay detached until it is loaded again\n", o->path);
	}
	free(added);
	xp_trace_after_rescan(log); /* after the sites: their hits are traced too */
}
