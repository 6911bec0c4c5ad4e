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
};

void lex_init(struct lexer *lx, struct dt_file *f, const char *name,
	      const char *text, size_t len);
/* 0, or -1 after printing an error. */
int lex_next(struct lexer *lx, struct token *t);

int tok_is(const struct token *t, const char *word);  /* identifier `word` */
int tok_punct(const struct token *t, char c);

void loc_error(const struct loc *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void loc_warning(const struct loc *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
