/* SPDX-License-Identifier: MIT */
/* Tokenizer for DTrace provider files. */
#ifndef XPD_LEX_H
#define XPD_LEX_H

#include "dtrace.h"

enum tok_kind {
	TOK_EOF,
	TOK_IDENT,  /* identifiers and keywords */
	TOK_NUMBER,
	TOK_STRING, /* "..." or '...', only inside skipped declarations */
	TOK_PUNCT,  /* one character: { } ( ) [ ] ; , * : and other operators */
	TOK_ELLIPSIS,
};

struct token {
	enum tok_kind kind;
	const char *text;
	size_t len;
	struct loc loc;
};

struct lexer {
	const char *p, *end;
	struct loc cur;       /* position of p */
	int line_start;       /* only blanks since the last newline */
	struct dt_file *file; /* owns the file names in locations */
	/* At the top level, where the parser skips C and D code it does not
	 * model, any printable character is a token ('$' in pid$target, '@'
	 * in D aggregations); in a provider block it stays an error. */
	int lenient;
	/* Set on a copy of the lexer used to look ahead: the real pass
	 * reports whatever the look-ahead found. */
	int quiet;
};

void lex_init(struct lexer *lx, struct dt_file *f, const char *name,
	      const char *text, size_t len);
/* 0, or -1 after printing an error. */
int lex_next(struct lexer *lx, struct token *t);
/* The token after the current one, without consuming it; TOK_EOF if it
 * cannot be read (the error is reported when it is really read). */
void lex_peek(const struct lexer *lx, struct token *t);

int tok_is(const struct token *t, const char *word);  /* identifier `word` */
int tok_punct(const struct token *t, char c);

void loc_error(const struct loc *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void loc_warning(const struct loc *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
