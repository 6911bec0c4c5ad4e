/* SPDX-License-Identifier: MIT */
/* The switcher's view of the process's text (trace_maps.c) and the copies
 * it swaps in (trace_copy.c), shared with trace_patch.c only. */
#ifndef XP_TRACE_TEXT_H
#define XP_TRACE_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* ---- trace_maps.c: /proc/self/maps, read once per switch ---- */

/* A descriptor held for one call: opened O_CLOEXEC, and used or closed
 * only while fstat still finds the file it opened (a program's thread may
 * close it and open its own at the same number meanwhile). */
struct xp_brief_fd {
	int fd;
	unsigned long long dev, ino;
	int reg;                     /* a regular file */
};
int xp_brief_open(struct xp_brief_fd *b, const char *path, int flags); /* 0 or -errno */
int xp_brief_ours(const struct xp_brief_fd *b);
void xp_brief_close(struct xp_brief_fd *b);

struct xp_map {
	uintptr_t start, end;
	unsigned long long off, ino;
	unsigned maj, min;
	char perms[5];
	const char *path;            /* into the maps' text; "" when anonymous */
};

struct xp_maps {
	struct xp_map *m;            /* sorted by start, as the kernel lists them */
	size_t n;
	char *text;
};

/* A text segment: the longest run of touching mappings, all r-xp, of one
 * file at contiguous offsets (swaps and mprotect split one into several;
 * a swap of the whole segment makes it one again). */
struct xp_seg {
	uintptr_t start, end;
	uintptr_t first_end;         /* of its first mapping (/proc/self/map_files) */
	unsigned long long off, ino;
	unsigned maj, min;
	const char *path;
};

/* 0, or -EIO with xp_trace_patch_error set. */
int xp_maps_read(struct xp_maps *maps);
void xp_maps_free(struct xp_maps *maps);
/* The segment holding addr: 0, or -EFAULT / -EINVAL with the error set. */
int xp_maps_segment(const struct xp_maps *maps, uintptr_t addr, struct xp_seg *s);
/* vm.max_map_count (xp_trace_map_limit when a test set one). */
long xp_maps_limit(void);
extern long xp_trace_map_limit;

/* ---- trace_copy.c: copies of a segment, and how they are written ---- */

struct xp_copy_change {
	uintptr_t site;
	const uint8_t *old, *new;    /* XP_TRACE_SITE_LEN bytes each */
};

/* How an operation writes into its copies: with memcpy into a writable
 * private mapping made executable afterwards, or, where a W^X policy
 * refuses that mprotect, through /proc/self/mem opened for the one
 * operation (checked to be still ours before every write, closed at the
 * end).  Between operations the agent holds no descriptor at all. */
struct xp_writer {
	int mem;                     /* writing through /proc/self/mem */
	struct xp_brief_fd fd;
	uint8_t *page;               /* one page of scratch */
	size_t pg;
};
int xp_writer_init(struct xp_writer *w);
void xp_writer_done(struct xp_writer *w);
/* Tests: 1 writes through /proc/self/mem from the start; 2 takes every
 * mprotect to PROT_EXEC of a written copy as refused, as a W^X policy
 * would, so that each copy is made again and written that way. */
extern int xp_trace_patch_via_mem;

/* The segment's file, opened for one operation and checked to be the
 * mapped one (device, inode, a regular file): 0, or -ENOENT with the
 * error set. */
int xp_copy_open(const struct xp_seg *s, struct xp_brief_fd *f);

/* A copy of the segment: a new private mapping of its file (f) at its
 * offset, or the spare given (f NULL); holding
 * the text's bytes with the changes' new bytes (n == 0: as it is), made
 * executable.  Pages equal to what the copy holds already are not written,
 * so a page that ends equal to the file's stays the file's (no anonymous
 * page).  NULL with xp_trace_patch_error set (a spare is left a spare). */
void *xp_copy_make(struct xp_writer *w, const struct xp_seg *s, const struct xp_brief_fd *f,
		   void *spare, const struct xp_copy_change *c, size_t n);
/* The text is still what copy was made from: its sites hold the changes'
 * old bytes and every other byte is the copy's.  0, or -EAGAIN. */
int xp_copy_check(struct xp_writer *w, const struct xp_seg *s, const void *copy,
		  const struct xp_copy_change *c, size_t n);

/* Spares: a PROT_NONE private mapping of a traced segment's file, made at
 * the first start (one mapping, no descriptor, no page), so that stopping
 * can still make its copy when the file was deleted or replaced. */
void *xp_spare_find(const struct xp_seg *s);
void *xp_spare_new(const struct xp_seg *s, const struct xp_brief_fd *f);
int xp_spare_reserve(size_t more);                      /* 0 or -ENOMEM */
void xp_spare_keep(const struct xp_seg *s, void *map);  /* after a reserve */
void xp_spare_taken(void *map);                         /* swapped in */
void xp_spare_put_back(void *map, size_t len);          /* not swapped in */
/* Drop spares whose segment is gone (all == 0), or every one. */
void xp_spares_prune(const struct xp_maps *maps, int all);
size_t xp_spares_count(void);

#endif
