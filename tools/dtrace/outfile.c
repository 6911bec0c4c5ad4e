/* SPDX-License-Identifier: MIT */
/* Output files appear whole or not at all: written under a temporary name
 * in the same directory, renamed over the final name when complete.
 *
 * systemtap's stub simply opens its output for writing, so a symlink
 * (a build tree linking generated files elsewhere) is written through and
 * an existing file keeps its mode.  Renaming over the link itself would
 * replace the link with a regular file, so the final name here is the
 * link's target, and the temporary file is made beside it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtrace.h"

/* Like the kernel's limit on links followed in one lookup. */
#define MAX_LINK_HOPS 40

/* The contents of symlink `path`, or NULL with errno set. */
static char *read_link(const char *path)
{
	for (size_t size = 256;; size *= 2) {
		char *buf = xmalloc(size);
		ssize_t n = readlink(path, buf, size);
		if (n < 0) {
			int err = errno;
			free(buf);
			errno = err;
			return NULL;
		}
		if ((size_t)n < size) {
			buf[n] = '\0';
			return buf;
		}
		free(buf); /* maybe truncated: try again with more room */
	}
}

/* Where open(path, O_WRONLY | O_CREAT) would write: symlinks followed to
 * the first name that is not one (which need not exist yet: a dangling
 * link creates its target).  NULL with errno set on a loop or an
 * unreadable link. */
static char *follow_links(const char *path)
{
	char *cur = xstrdup(path);
	for (int hops = 0;; hops++) {
		struct stat st;
		if (lstat(cur, &st) || !S_ISLNK(st.st_mode))
			return cur; /* missing names are reported when created */
		char *target = hops < MAX_LINK_HOPS ? read_link(cur) : NULL;
		if (!target) {
			if (hops == MAX_LINK_HOPS)
				errno = ELOOP;
			int err = errno;
			free(cur);
			errno = err;
			return NULL;
		}
		/* A relative target is relative to the link's directory. */
		const char *slash = strrchr(cur, '/');
		if (target[0] != '/' && slash) {
			struct strbuf sb = { 0 };
			sb_putn(&sb, cur, (size_t)(slash - cur + 1));
			sb_puts(&sb, target);
			free(target);
			target = sb.s;
		}
		free(cur);
		cur = target;
	}
}

/* -o /dev/stdout and the like: no renaming over a device. */
static int begin_direct(struct outfile *o)
{
	o->fd = open(o->dest, O_WRONLY | O_CLOEXEC);
	if (o->fd < 0) {
		fprintf(stderr, "%s: cannot write %s: %s\n", xpd_prog, o->path,
			strerror(errno));
		return -1;
	}
	return 0;
}

static int begin_temporary(struct outfile *o)
{
	const char *slash = strrchr(o->dest, '/');
	struct strbuf t = { 0 };
	if (slash)
		sb_putn(&t, o->dest, (size_t)(slash - o->dest + 1));
	sb_printf(&t, ".%s.XXXXXX", slash ? slash + 1 : o->dest);
	o->fd = mkostemp(t.s, O_CLOEXEC);
	if (o->fd < 0) {
		fprintf(stderr, "%s: cannot create %s: %s\n", xpd_prog, o->path,
			strerror(errno));
		sb_free(&t);
		return -1;
	}
	o->tmp = t.s;
	return 0;
}

static void outfile_free(struct outfile *o)
{
	free(o->tmp);
	free(o->dest);
	free(o->path);
	o->tmp = o->dest = o->path = NULL;
}

int outfile_begin(struct outfile *o, const char *path)
{
	struct stat st;

	o->path = xstrdup(path);
	o->tmp = NULL;
	o->fd = -1;
	o->dest = follow_links(path);
	if (!o->dest) {
		fprintf(stderr, "%s: cannot write %s: %s\n", xpd_prog, path,
			strerror(errno));
		outfile_free(o);
		return -1;
	}
	int exists = stat(o->dest, &st) == 0;
	if (exists && !S_ISREG(st.st_mode)) {
		if (begin_direct(o) == 0)
			return 0;
		outfile_free(o);
		return -1;
	}
	if (exists) {
		/* Rewritten in place by the stub, the file would keep its
		 * permissions (bar set-id bits, which a write clears). */
		o->mode = st.st_mode & 0777;
	} else {
		/* What creat() would give it. */
		mode_t mask = umask(0);
		umask(mask);
		o->mode = 0666 & ~mask;
	}
	if (begin_temporary(o)) {
		outfile_free(o);
		return -1;
	}
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
	return o->tmp ? o->tmp : o->dest;
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
	/* By name, not by descriptor: a compiler writing the temporary file
	 * (-G) may have unlinked and recreated it. */
	if (rc == 0 && o->tmp && chmod(o->tmp, o->mode)) {
		fprintf(stderr, "%s: cannot set the mode of %s: %s\n", xpd_prog,
			o->path, strerror(errno));
		rc = -1;
	}
	if (rc == 0 && o->tmp && rename(o->tmp, o->dest)) {
		fprintf(stderr, "%s: cannot create %s: %s\n", xpd_prog, o->path,
			strerror(errno));
		rc = -1;
	}
	if (rc && o->tmp)
		unlink(o->tmp);
	outfile_free(o);
	return rc;
}

void outfile_abort(struct outfile *o)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (o->tmp)
		unlink(o->tmp);
	outfile_free(o);
}
