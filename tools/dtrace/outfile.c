/* Output files appear whole or not at all: written under a temporary name
 * in the same directory, renamed over the final name when complete. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtrace.h"

int outfile_begin(struct outfile *o, const char *path)
{
	struct stat st;

	o->path = xstrdup(path);
	o->tmp = NULL;
	o->fd = -1;
	/* -o /dev/stdout and the like: no renaming over a device. */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		o->fd = open(path, O_WRONLY | O_CLOEXEC);
		if (o->fd < 0) {
			fprintf(stderr, "%s: cannot write %s: %s\n", xpd_prog, path,
				strerror(errno));
			return -1;
		}
		return 0;
	}
	const char *slash = strrchr(path, '/');
	struct strbuf t = { 0 };
	if (slash)
		sb_putn(&t, path, (size_t)(slash - path + 1));
	sb_printf(&t, ".%s.XXXXXX", slash ? slash + 1 : path);
	o->fd = mkostemp(t.s, O_CLOEXEC);
	if (o->fd < 0) {
		fprintf(stderr, "%s: cannot create %s: %s\n", xpd_prog, path,
			strerror(errno));
		sb_free(&t);
		return -1;
	}
	/* mkstemp makes 0600; an output file gets what creat() would. */
	mode_t mask = umask(0);
	umask(mask);
	fchmod(o->fd, 0666 & ~mask);
	o->tmp = t.s;
	return 0;
}

int outfile_write(struct outfile *o, const char *data, size_t len)
{
	while (len) {
		ssize_t w = write(o->fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			fprintf(stderr, "%s: cannot write %s: %s\n", xpd_prog, o->path,
				strerror(errno));
			return -1;
		}
		data += w;
		len -= (size_t)w;
	}
	return 0;
}

const char *outfile_target(const struct outfile *o)
{
	return o->tmp ? o->tmp : o->path;
}

int outfile_commit(struct outfile *o)
{
	int rc = 0;
	if (close(o->fd)) {
		fprintf(stderr, "%s: cannot write %s: %s\n", xpd_prog, o->path,
			strerror(errno));
		rc = -1;
	}
	o->fd = -1;
	if (rc == 0 && o->tmp && rename(o->tmp, o->path)) {
		fprintf(stderr, "%s: cannot create %s: %s\n", xpd_prog, o->path,
			strerror(errno));
		rc = -1;
	}
	if (rc && o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	free(o->path);
	o->tmp = o->path = NULL;
	return rc;
}

void outfile_abort(struct outfile *o)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	free(o->path);
	o->tmp = o->path = NULL;
}
