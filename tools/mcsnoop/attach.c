/* SPDX-License-Identifier: MIT */
/* The module's life in memcached: found next to mcsnoop, loaded for this
 * session, unloaded at the end.  (Finding memcached and connecting to it:
 * tools/common/attach.c.) */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/common.h"
#include "mcsnoop.h"

char *snoop_module_path(const char *path)
{
	if (path) {
		char *real = realpath(path, NULL);
		if (!real)
			fprintf(stderr, "mcsnoop: --module %s: no such file\n", path);
		return real;
	}
	/* The build tree, then an installed tree. */
	static const char *const candidates[] = { "%s/modules/mcsnoop.so",
						  "%s/../lib/xprobes/modules/mcsnoop.so" };
	char *found = exe_dir_find(candidates, sizeof(candidates) / sizeof(candidates[0]));
	if (found)
		return found;
	fprintf(stderr, "mcsnoop: cannot find mcsnoop.so next to mcsnoop; use --module PATH\n");
	return NULL;
}

const char *snoop_module_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* One agent command; 0 with the reply, 1 if it failed (reply holds why),
 * -1 connection lost (a message was printed). */
static int call(struct session *s, const char *fmt, const char *arg, char **reply)
{
	char line[PATH_MAX + 64];
	snprintf(line, sizeof(line), fmt, arg);
	return session_call(s, line, reply);
}

int snoop_load(struct session *s, const char *path, int *ours)
{
	char *reply;
	/* --session: the agent unloads it when this connection closes, so a
	 * mcsnoop killed by SIGKILL leaves memcached as it found it. */
	int rc = attach_load_session(s, path, "mcsnoop", &reply);
	if (rc == 1 && strncmp(reply, "usage: load", 11) == 0) {
		free(reply); /* an agent from before --session: unload by hand */
		rc = call(s, "load %s", path, &reply);
	}
	if (rc < 0)
		return -1;
	*ours = rc == 0;
	if (rc == 0 && strstr(reply, ": 0 attachments")) {
		/* Nothing to hear: a memcached built without xprobes-dtrace. */
		fprintf(stderr, "mcsnoop: process %d has none of memcached's probe sites (a memcached "
				"built without xprobes-dtrace?)\n", (int)s->pid);
		snoop_unload(s, path);
		rc = 1;
	} else if (rc == 1 && strstr(reply, "module already loaded")) {
		fprintf(stderr, "mcsnoop: %s was loaded already (another mcsnoop?): its events are "
				"shared between the readers\n", snoop_module_name(path));
		rc = 0;
	} else if (rc == 1) {
		fprintf(stderr, "mcsnoop: cannot load %s: %s", path, reply);
		if (strstr(reply, "attachments refused") || strstr(reply, "attachment refused"))
			snoop_unload(s, path); /* loaded with some probes missing */
	}
	free(reply);
	return rc == 0 ? 0 : -1;
}

void snoop_unload(struct session *s, const char *path)
{
	char *reply;
	int rc = call(s, "unload %s", snoop_module_name(path), &reply);
	if (rc == 1)
		fprintf(stderr, "mcsnoop: unload: %s", reply);
	if (rc >= 0)
		free(reply);
}
