/* SPDX-License-Identifier: MIT */
/* The process's mappings as the switcher needs them: /proc/self/maps read
 * once per switch into a sorted array (a switch of 20,000 sites used to
 * read it again from the top for every run: quadratic), the text segments
 * found in it, and the kernel's limit on the number of mappings.
 *
 * Every descriptor opened here lives for one call, and is checked (device
 * and inode) to be still the one opened before it is read and before it
 * is closed: a thread of the program that closes descriptors it does not
 * own and opens its own at the same number meanwhile gets neither its
 * file read as ours nor its descriptor closed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace.h"
#include "trace_text.h"

/* Here, below trace_copy.c and trace_patch.c, which both set it. */
const char *xp_trace_patch_error = "";
long xp_trace_map_limit;

int xp_brief_open(struct xp_brief_fd *b, const char *path, int flags)
{
	struct stat st;
	b->fd = open(path, flags | O_CLOEXEC);
	if (b->fd < 0)
		return -errno;
	if (fstat(b->fd, &st) != 0) {
		int err = -errno;
		close(b->fd);
		b->fd = -1;
		return err;
	}
	b->dev = st.st_dev;
	b->ino = st.st_ino;
	b->reg = S_ISREG(st.st_mode);
	return 0;
}

int xp_brief_ours(const struct xp_brief_fd *b)
{
	struct stat st;
	return b->fd >= 0 && fstat(b->fd, &st) == 0 && st.st_dev == b->dev && st.st_ino == b->ino;
}

void xp_brief_close(struct xp_brief_fd *b)
{
	if (xp_brief_ours(b))
		close(b->fd);
	b->fd = -1;
}

/* The whole of a /proc file through a brief descriptor; NUL-terminated. */
static char *read_proc(const char *path, size_t *len)
{
	struct xp_brief_fd b;
	if (xp_fault() || xp_brief_open(&b, path, O_RDONLY) != 0)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *buf = xp_malloc(cap);
	while (buf) {
		if (n + 4096 + 1 > cap) {
			char *more = xp_realloc(buf, cap *= 2);
			if (!more) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = more;
		}
		ssize_t got = xp_brief_ours(&b) ? read(b.fd, buf + n, cap - n - 1) : -1;
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			free(buf);
			buf = NULL;
		} else if (got == 0) {
			break;
		}
		n += buf ? (size_t)got : 0;
	}
	if (buf && !xp_brief_ours(&b)) {
		free(buf);
		buf = NULL;
	}
	xp_brief_close(&b);
	if (buf) {
		buf[n] = '\0';
		*len = n;
	}
	return buf;
}

int xp_maps_read(struct xp_maps *maps)
{
	*maps = (struct xp_maps){ 0 };
	size_t len, lines = 0;
	char *text = read_proc("/proc/self/maps", &len);
	for (size_t i = 0; text && i < len; i++)
		lines += text[i] == '\n';
	struct xp_map *m = text ? xp_calloc(lines + 1, sizeof(*m)) : NULL;
	if (!m) {
		free(text);
		xp_trace_patch_error = "cannot read /proc/self/maps";
		return -EIO;
	}
	size_t n = 0;
	for (char *line = text, *next; line < text + len && n < lines; line = next) {
		next = strchr(line, '\n');
		next = next ? next + 1 : text + len;
		next[-1] = '\0';
		int at = 0;
		struct xp_map *x = &m[n];
		if (sscanf(line, "%lx-%lx %4s %llx %x:%x %llu %n", &x->start, &x->end, x->perms,
			   &x->off, &x->maj, &x->min, &x->ino, &at) < 7)
			continue;
		x->path = line + at;
		n++;
	}
	*maps = (struct xp_maps){ .m = m, .n = n, .text = text };
	return 0;
}

void xp_maps_free(struct xp_maps *maps)
{
	free(maps->m);
	free(maps->text);
	*maps = (struct xp_maps){ 0 };
}

static const struct xp_map *map_at(const struct xp_maps *maps, uintptr_t addr, size_t *index)
{
	size_t lo = 0, hi = maps->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < maps->m[mid].start)
			hi = mid;
		else if (addr >= maps->m[mid].end)
			lo = mid + 1;
		else {
			*index = mid;
			return &maps->m[mid];
		}
	}
	return NULL;
}

static int is_text(const struct xp_map *m)
{
	return strcmp(m->perms, "r-xp") == 0 && m->ino != 0;
}

/* b continues a: both text, touching, the same file, the next offsets. */
static int continues(const struct xp_map *a, const struct xp_map *b)
{
	return is_text(a) && is_text(b) && a->end == b->start && a->ino == b->ino && a->maj == b->maj &&
	       a->min == b->min && b->off == a->off + (a->end - a->start);
}

static char error_buf[4096 + 160];

int xp_maps_segment(const struct xp_maps *maps, uintptr_t addr, struct xp_seg *s)
{
	size_t i;
	const struct xp_map *m = map_at(maps, addr, &i);
	if (!m) {
		xp_trace_patch_error = "a patch site is in no mapping";
		return -EFAULT;
	}
	if (!is_text(m)) {
		snprintf(error_buf, sizeof(error_buf),
			 "the text at 0x%lx is not one file's private executable mapping (%s %.*s)",
			 (unsigned long)m->start, m->perms, 4096, m->path);
		xp_trace_patch_error = error_buf;
		return -EINVAL;
	}
	size_t lo = i, hi = i;
	while (lo > 0 && continues(&maps->m[lo - 1], &maps->m[lo]))
		lo--;
	while (hi + 1 < maps->n && continues(&maps->m[hi], &maps->m[hi + 1]))
		hi++;
	const struct xp_map *a = &maps->m[lo];
	*s = (struct xp_seg){ .start = a->start, .end = maps->m[hi].end, .first_end = a->end,
			      .off = a->off, .ino = a->ino, .maj = a->maj, .min = a->min,
			      .path = a->path };
	return 0;
}

long xp_maps_limit(void)
{
	if (xp_trace_map_limit > 0)
		return xp_trace_map_limit;
	/* Not a fault point: unreadable, the kernel's default is assumed. */
	struct xp_brief_fd b;
	char text[32] = "";
	if (xp_brief_open(&b, "/proc/sys/vm/max_map_count", O_RDONLY) == 0) {
		ssize_t n = read(b.fd, text, sizeof(text) - 1);
		text[n > 0 && xp_brief_ours(&b) ? n : 0] = '\0';
		xp_brief_close(&b);
	}
	long limit = strtol(text, NULL, 10);
	return limit > 0 ? limit : 65530;
}
