/* SPDX-License-Identifier: MIT */
/* Tokenizer for DTrace provider files.
 *
 * Besides tokens it handles what a C preprocessor would leave behind or
 * what a .d file may hold on its own: comments, `#pragma D ...` lines
 * (ignored), and line markers (`# 12 "file.d"`, from `cpp` under -C) which
 * move the reported location back to the original file.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lex.h"

static void vreport(const struct loc *l, const char *kind, const char *fmt,
		    va_list ap)
{
	fprintf(stderr, "%s:%d:%d: %s", l->file, l->line, l->col, kind);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void loc_error(const struct loc *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(l, "", fmt, ap);
	va_end(ap);
}

void loc_warning(const struct loc *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(l, "warning: ", fmt, ap);
	va_end(ap);
}

/* File names live in the model so locations stay valid after lexing. */
static const char *intern(struct dt_file *f, const char *name, size_t n)
{
	for (size_t i = 0; i < f->nnames; i++)
		if (strlen(f->names[i]) == n && !memcmp(f->names[i], name, n))
			return f->names[i];
	f->names = xrealloc(f->names, (f->nnames + 1) * sizeof(*f->names));
	f->names[f->nnames] = xstrndup(name, n);
	return f->names[f->nnames++];
}

/* Errors found while looking ahead are reported on the real pass. */
static void lex_error(const struct lexer *lx, const struct loc *l,
		      const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void lex_error(const struct lexer *lx, const struct loc *l,
		      const char *fmt, ...)
{
	va_list ap;
	if (lx->quiet)
		return;
	va_start(ap, fmt);
	vreport(l, "", fmt, ap);
	va_end(ap);
}

void lex_init(struct lexer *lx, struct dt_file *f, const char *name,
	      const char *text, size_t len)
{
	lx->lenient = 0;
	lx->quiet = 0;
	lx->p = text;
	lx->end = text + len;
	lx->file = f;
	lx->cur.file = intern(f, name, strlen(name));
	lx->cur.line = 1;
	lx->cur.col = 1;
	lx->line_start = 1;
}

static void advance(struct lexer *lx)
{
	if (*lx->p == '\n') {
		lx->cur.line++;
		lx->cur.col = 1;
		lx->line_start = 1;
	} else {
		lx->cur.col++;
	}
	lx->p++;
}

static int is_ident_start(int c)
{
	return isalpha(c) || c == '_';
}

static int is_ident(int c)
{
	return isalnum(c) || c == '_';
}

/* A directive line: its text without the '#', continuation lines joined
 * as they are.  Leaves p at the newline (or the end). */
static void directive(struct lexer *lx)
{
	struct loc at = lx->cur;
	advance(lx); /* '#' */
	const char *s = lx->p;
	while (lx->p < lx->end && *lx->p != '\n') {
		if (*lx->p == '\\' && lx->p + 1 < lx->end && lx->p[1] == '\n')
			advance(lx);
		advance(lx);
	}
	const char *e = lx->p;
	while (s < e && (*s == ' ' || *s == '\t'))
		s++;

	/* Line markers: "# 12 "file" flags" and "#line 12 "file"". */
	const char *q = s;
	if (e - q >= 4 && !memcmp(q, "line", 4) && (e - q == 4 || !is_ident(q[4])))
		q += 4;
	while (q < e && (*q == ' ' || *q == '\t'))
		q++;
	if (q < e && isdigit((unsigned char)*q)) {
		long n = 0;
		while (q < e && isdigit((unsigned char)*q) && n < 100000000)
			n = n * 10 + (*q++ - '0');
		while (q < e && (*q == ' ' || *q == '\t'))
			q++;
		if (q < e && *q == '"') {
			const char *ns = ++q;
			while (q < e && *q != '"')
				q++;
			lx->cur.file = intern(lx->file, ns, (size_t)(q - ns));
		}
		/* The marker names the line that follows it. */
		lx->cur.line = (int)n - 1;
		return;
	}

	size_t wl = 0;
	while (s + wl < e && is_ident((unsigned char)s[wl]))
		wl++;
	if (wl == 0 && s == e)
		return; /* the null directive */
	if (wl == 6 && !memcmp(s, "pragma", 6))
		return; /* #pragma D attributes/option/depends_on: no meaning here */
	if (!lx->quiet)
			loc_warning(&at, "ignoring '#%.*s' (use -C to run the C preprocessor)",
			    (int)(wl ? wl : 1), s);
}

int lex_next(struct lexer *lx, struct token *t)
{
	for (;;) {
		if (lx->p >= lx->end) {
			t->kind = TOK_EOF;
			t->text = lx->p;
			t->len = 0;
			t->loc = lx->cur;
			return 0;
		}
		char c = *lx->p;
		if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' ||
		    c == '\n') {
			advance(lx);
			continue;
		}
		if (c == '#' && lx->line_start) {
			directive(lx);
			continue;
		}
		lx->line_start = 0;
		if (c == '/' && lx->p + 1 < lx->end && lx->p[1] == '*') {
			struct loc at = lx->cur;
			advance(lx);
			advance(lx);
			for (;;) {
				if (lx->p + 1 >= lx->end) {
					lex_error(lx, &at, "unterminated comment");
					return -1;
				}
				if (lx->p[0] == '*' && lx->p[1] == '/')
					break;
				advance(lx);
			}
			advance(lx);
			advance(lx);
			continue;
		}
		if (c == '/' && lx->p + 1 < lx->end && lx->p[1] == '/') {
			while (lx->p < lx->end && *lx->p != '\n')
				advance(lx);
			continue;
		}
		break;
	}

	char c = *lx->p;
	t->text = lx->p;
	t->loc = lx->cur;
	if (is_ident_start((unsigned char)c)) {
		t->kind = TOK_IDENT;
		while (lx->p < lx->end && is_ident((unsigned char)*lx->p))
			advance(lx);
	} else if (isdigit((unsigned char)c)) {
		t->kind = TOK_NUMBER;
		while (lx->p < lx->end && is_ident((unsigned char)*lx->p))
			advance(lx);
	} else if (c == '"' || c == '\'') {
		t->kind = TOK_STRING;
		advance(lx);
		for (;;) {
			if (lx->p >= lx->end || *lx->p == '\n') {
				lex_error(lx, &t->loc, "missing terminating %c character", c);
				return -1;
			}
			if (*lx->p == '\\' && lx->p + 1 < lx->end)
				advance(lx);
			else if (*lx->p == c)
				break;
			advance(lx);
		}
		advance(lx);
	} else if (c == '.' && lx->end - lx->p >= 3 && lx->p[1] == '.' &&
		   lx->p[2] == '.') {
		t->kind = TOK_ELLIPSIS;
		advance(lx);
		advance(lx);
		advance(lx);
	} else if ((c && strchr("{}()[];,*:.<>=+-/%&|^!~?", c)) ||
		   (lx->lenient && isprint((unsigned char)c))) {
		t->kind = TOK_PUNCT;
		advance(lx);
	} else {
		if (isprint((unsigned char)c))
			lex_error(lx, &t->loc, "unexpected character '%c'", c);
		else
			lex_error(lx, &t->loc, "unexpected byte 0x%02x",
				  (unsigned)(unsigned char)c);
		return -1;
	}
	t->len = (size_t)(lx->p - t->text);
	return 0;
}

void lex_peek(const struct lexer *lx, struct token *t)
{
	struct lexer ahead = *lx;
	ahead.quiet = 1;
	if (lex_next(&ahead, t)) {
		t->kind = TOK_EOF;
		t->len = 0;
	}
}

int tok_is(const struct token *t, const char *word)
{
	return t->kind == TOK_IDENT && strlen(word) == t->len &&
	       !memcmp(t->text, word, t->len);
}

int tok_punct(const struct token *t, char c)
{
	return t->kind == TOK_PUNCT && t->text[0] == c;
}
