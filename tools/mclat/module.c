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

#include "../attach.h"
#include "../exedir.h"
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

/* One "TID CONN START_NS END_NS" line at p into *m; 1 if it is one.
 * Not sscanf: glibc's sscanf measures the whole rest of its input on
 * every call, which over a reply of thousands of lines was quadratic and
 * two thirds of mclat's CPU time (perf, under mcload). */
static int parse_batch(const char *p, struct module_batch *m)
{
	char *e;
	errno = 0;
	long tid = strtol(p, &e, 10);
	if (e == p || *e != ' ')
		return 0;
	p = e + 1;
	long fd = strtol(p, &e, 10);
	if (e == p || *e != ' ')
		return 0;
	p = e + 1;
	unsigned long long start = strtoull(p, &e, 10);
	if (e == p || *e != ' ')
		return 0;
	p = e + 1;
	unsigned long long end = strtoull(p, &e, 10);
	if (e == p || (*e != '\n' && *e != '\0') || errno || tid < 0 || tid > INT_MAX || fd < 0 ||
	    fd > INT_MAX)
		return 0;
	m->tid = (int)tid;
	m->fd = (int)fd;
	m->start_ns = start;
	m->end_ns = end;
	return 1;
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
	if (rc > 0 || sscanf(reply, "mclat 1 now_ns=%" SCNu64, now_ns) != 1) {
		fprintf(stderr, "mclat: unexpected answer from the module: %.200s\n", reply);
		free(reply);
		return -1;
	}
	int more = -1;
	for (char *p = strchr(reply, '\n'); p && *++p; p = strchr(p, '\n')) {
		struct module_batch m;
		if (parse_batch(p, &m))
			cb(&m, arg);
		else if (sscanf(p, "end records=%*u dropped=%llu more=%d", dropped, &more) == 2)
			break;
	}
	free(reply);
	if (more < 0)
		fprintf(stderr, "mclat: the module's answer has no end line\n");
	return more;
}
