/* A growable, NUL-terminated text buffer with a hard size limit. */
#ifndef XP_TEXTBUF_H
#define XP_TEXTBUF_H

#include <stddef.h>

struct textbuf {
	char *data;
	size_t len, cap, limit;
	int truncated; /* set once an append did not fit under limit */
};

void tb_init(struct textbuf *tb, size_t limit);
void tb_free(struct textbuf *tb);
void tb_reset(struct textbuf *tb);
/* Append; returns 0, or -1 when the text did not fit (it is dropped). */
int tb_append(struct textbuf *tb, const char *s, size_t n);
int tb_puts(struct textbuf *tb, const char *s);
int tb_printf(struct textbuf *tb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
