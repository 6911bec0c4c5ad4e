/* SPDX-License-Identifier: MIT */
/* modules/mclat.so in memcached: found next to mclat, loaded for this
 * session (the agent unloads it when mclat's connection closes, however
 * mclat ends), read, unloaded.  Its reply format is documented at the top
 * of modules/mclat.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/common.h"
#include "mclat.h"

char *module_path(const char *given)
{
	if (given) {
		char *real = realpath(given, NULL);
		if (!real)
			fprintf(stderr, "mclat: --module %s: no such file\n", given);
		return real;
	}
	static const char *const candidates[] = { "%s/modules/mclat.so",
						  "%s/../lib/xprobes/modules/mclat.so" };
	char *found = exe_dir_find(candidates, sizeof(candidates) / sizeof(candidates[0]));
	if (!found)
		fprintf(stderr, "mclat: cannot find mclat.so next to mclat; use --module PATH\n");
	return found;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

int module_load(struct session *s, const char *path, int *ours)
{
	char *reply;
	int rc = attach_load_session(s, path, "mclat", &reply);
	if (rc < 0)
		return -1;
	*ours = rc == 0;
	if (rc == 0 && strstr(reply, ": 0 attachments")) {
		fprintf(stderr, "mclat: process %d has none of memcached's probe sites (a memcached "
				"built without xprobes-dtrace?)\n", (int)s->pid);
		module_unload(s, path);
		rc = 1;
	} else if (rc == 1 && strstr(reply, "module already loaded")) {
		/* Another mclat: the module's batches would be split between us. */
		fprintf(stderr, "mclat: %s is loaded already (another mclat?)\n", base_name(path));
	} else if (rc == 1) {
		fprintf(stderr, "mclat: cannot load %s: %s", path, reply);
	}
	free(reply);
	return rc == 0 ? 0 : -1;
}

void module_unload(struct session *s, const char *path)
{
	char line[PATH_MAX + 16], *reply;
	snprintf(line, sizeof(line), "unload %s", base_name(path));
	if (session_call(s, line, &reply) >= 0)
		free(reply);
}

int module_read(struct session *s, const char *path,
		void (*cb)(const struct module_batch *, void *), void *arg, uint64_t *now_ns,
		unsigned long long *dropped)
{
	char line[PATH_MAX + 32], *reply;
	snprintf(line, sizeof(line), "command %s read", base_name(path));
	int rc = session_call(s, line, &reply);
	if (rc < 0)
		return -1;
	if (rc > 0) {
		fprintf(stderr, "mclat: unexpected answer from the module: %.200s\n", reply);
		free(reply);
		return -1;
	}
	char why[256];
	int more = module_parse_reply(reply, cb, arg, now_ns, dropped, why, sizeof(why));
	if (more < 0)
		fprintf(stderr, "mclat: %s\n", why);
	free(reply);
	return more;
}

int module_window(struct session *s, const char *path, int open)
{
	char line[PATH_MAX + 32], *reply;
	snprintf(line, sizeof(line), "command %s window %s", base_name(path),
		 open ? "open" : "close");
	int rc = session_call(s, line, &reply);
	if (rc < 0)
		return -1;
	if (rc > 0 || strncmp(reply, "window ", 7) != 0) {
		fprintf(stderr, "mclat: unexpected answer from the module: %.200s\n", reply);
		rc = -1;
	}
	free(reply);
	return rc;
}
