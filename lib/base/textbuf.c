/* SPDX-License-Identifier: MIT */
#include "base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tb_init(struct textbuf *tb, size_t limit)
{
	memset(tb, 0, sizeof(*tb));
	tb->limit = limit;
}

void tb_free(struct textbuf *tb)
{
	free(tb->data);
	tb_init(tb, tb->limit);
}

void tb_reset(struct textbuf *tb)
{
	tb->len = 0;
	tb->truncated = 0;
	if (tb->data)
		tb->data[0] = '\0';
}

int tb_append(struct textbuf *tb, const char *s, size_t n)
{
	if (tb->truncated || tb->len + n > tb->limit) {
		tb->truncated = 1;
		return -1;
	}
	if (tb->len + n + 1 > tb->cap) {
		size_t cap = tb->cap ? tb->cap : 256;
		while (cap < tb->len + n + 1)
			cap *= 2;
		char *p = realloc(tb->data, cap);
		if (!p) {
			tb->truncated = 1;
			return -1;
		}
		tb->data = p;
		tb->cap = cap;
	}
	memcpy(tb->data + tb->len, s, n);
	tb->len += n;
	tb->data[tb->len] = '\0';
	return 0;
}

int tb_puts(struct textbuf *tb, const char *s)
{
	return tb_append(tb, s, strlen(s));
}

int tb_printf(struct textbuf *tb, const char *fmt, ...)
{
	char small[512];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	if ((size_t)n < sizeof(small))
		return tb_append(tb, small, (size_t)n);

	char *big = malloc((size_t)n + 1);
	if (!big)
		return -1;
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	int rc = tb_append(tb, big, (size_t)n);
	free(big);
	return rc;
}
