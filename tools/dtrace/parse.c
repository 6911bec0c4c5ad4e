/* SPDX-License-Identifier: MIT */
/* Recursive-descent parser for DTrace provider files.
 *
 *   file      := { provider | skipped }
 *   provider  := "provider" IDENT "{" { probe } "}" [";"]
 *   probe     := "probe" IDENT params [":" params] ";"
 *   params    := "(" [ "void" | param { "," param } ] ")"
 *   param     := specifiers { "*" { qualifier } } [IDENT] [ "[" [size] "]" ]
 *   skipped   := any other top-level construct: balanced tokens up to a
 *                ";" at depth 0 or the "}" closing a function or D clause
 *                body (see skip_construct)
 *
 * The translated argument list after ':' (DTrace's "provider view") is
 * checked and ignored: the native types are what call sites pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lex.h"

struct parser {
	struct lexer lx;
	struct token tok;
	struct dt_file *out;
};

static const char *const keywords[] = {
	"void", "char", "short", "int", "long", "float", "double", "signed",
	"unsigned", "_Bool", "string", "struct", "union", "enum", "const",
	"volatile", "restrict", "provider", "probe", "typedef", "inline",
	"translator", "sizeof", "self", "this", "userland", NULL,
};

static int is_keyword(const struct token *t)
{
	for (int i = 0; keywords[i]; i++)
		if (tok_is(t, keywords[i]))
			return 1;
	return 0;
}

static int next(struct parser *p)
{
	return lex_next(&p->lx, &p->tok);
}

/* "'foo'" or "end of file", for messages. */
static const char *describe(const struct token *t, char *buf, size_t n)
{
	if (t->kind == TOK_EOF)
		return "end of file";
	int len = t->len > 40 ? 40 : (int)t->len;
	snprintf(buf, n, "'%.*s'", len, t->text);
	return buf;
}

static int unexpected(struct parser *p, const char *wanted)
{
	char buf[64];
	loc_error(&p->tok.loc, "expected %s, found %s", wanted,
		  describe(&p->tok, buf, sizeof(buf)));
	return -1;
}

static int expect_punct(struct parser *p, char c, const char *wanted)
{
	if (!tok_punct(&p->tok, c))
		return unexpected(p, wanted);
	return next(p);
}

/* ---- types ------------------------------------------------------------- */

enum spec {
	S_VOID, S_CHAR, S_SHORT, S_INT, S_LONG, S_FLOAT, S_DOUBLE, S_SIGNED,
	S_UNSIGNED, S_BOOL, S_STRING, S_TAG, S_TYPEDEF, S_COUNT
};

static const char *const spec_words[] = {
	[S_VOID] = "void", [S_CHAR] = "char", [S_SHORT] = "short",
	[S_INT] = "int", [S_LONG] = "long", [S_FLOAT] = "float",
	[S_DOUBLE] = "double", [S_SIGNED] = "signed",
	[S_UNSIGNED] = "unsigned", [S_BOOL] = "_Bool", [S_STRING] = "string",
};

/* Would adding `s` to the specifiers seen so far still name a C type? */
static int spec_fits(const int *n, enum spec s)
{
	int base = n[S_VOID] + n[S_CHAR] + n[S_FLOAT] + n[S_DOUBLE] +
		   n[S_BOOL] + n[S_STRING] + n[S_TAG] + n[S_TYPEDEF];
	int modifiers = n[S_SHORT] + n[S_LONG] + n[S_SIGNED] + n[S_UNSIGNED];

	switch (s) {
	case S_LONG:
		if (n[S_LONG] == 2 || n[S_SHORT])
			return 0;
		if (n[S_DOUBLE])
			return n[S_LONG] == 0;
		return base == 0;
	case S_SHORT:
		return !n[S_SHORT] && !n[S_LONG] && base == 0;
	case S_SIGNED:
	case S_UNSIGNED:
		return !n[S_SIGNED] && !n[S_UNSIGNED] &&
		       (base == 0 || (base == 1 && n[S_CHAR]));
	case S_INT:
		return !n[S_INT] && base == 0;
	case S_CHAR:
		return base == 0 && !n[S_INT] && !n[S_SHORT] && !n[S_LONG];
	case S_DOUBLE:
		return base == 0 && !n[S_INT] && !n[S_SHORT] && !n[S_SIGNED] &&
		       !n[S_UNSIGNED] && n[S_LONG] <= 1;
	default: /* void, float, _Bool, string, struct/union/enum, typedef */
		return base == 0 && modifiers == 0 && !n[S_INT];
	}
}

static enum spec spec_of(const struct token *t)
{
	for (int s = 0; s < S_TAG; s++)
		if (tok_is(t, spec_words[s]))
			return (enum spec)s;
	if (tok_is(t, "struct") || tok_is(t, "union") || tok_is(t, "enum"))
		return S_TAG;
	return S_COUNT;
}

static int is_qualifier(const struct token *t)
{
	return tok_is(t, "const") || tok_is(t, "volatile") ||
	       tok_is(t, "restrict");
}

/* One parameter.  *is_void is set for a bare "void" (no pointer, no
 * name), which only `(void)` allows. */
static int parse_param(struct parser *p, struct dt_param *out, int *is_void)
{
	struct strbuf words = { 0 };
	int n[S_COUNT] = { 0 };
	int has_const = 0, has_volatile = 0, nspec = 0;
	const char *words_kind = ""; /* "struct", "union" or "enum" */
	struct loc start = p->tok.loc;

	*is_void = 0;
	for (;;) {
		struct token t = p->tok;
		enum spec s = spec_of(&t);
		if (is_qualifier(&t)) {
			if (tok_is(&t, "restrict")) {
				loc_error(&t.loc, "'restrict' applies to pointers only");
				goto fail;
			}
			has_const |= tok_is(&t, "const");
			has_volatile |= tok_is(&t, "volatile");
			if (next(p))
				goto fail;
			continue;
		} else if (s != S_COUNT) {
			if (!spec_fits(n, s)) {
				loc_error(&t.loc, "invalid combination of type specifiers at '%.*s'",
					  (int)t.len, t.text);
				goto fail;
			}
			n[s]++;
			nspec++;
		} else if (t.kind == TOK_IDENT && !is_keyword(&t) && nspec == 0) {
			/* An identifier before any type specifier is a type
			 * name (int64_t, uintptr_t, a typedef of the program). */
			n[S_TYPEDEF]++;
			nspec++;
		} else {
			break;
		}
		if (s == S_STRING) {
			/* D's string is a NUL-terminated char array: to C, a
			 * const char pointer. */
			if (words.len)
				sb_puts(&words, " ");
			sb_puts(&words, "char");
		} else if (s == S_TAG) {
			words_kind = tok_is(&t, "enum") ? "enum" : "struct";
			if (next(p))
				goto fail;
			if (p->tok.kind != TOK_IDENT || is_keyword(&p->tok)) {
				unexpected(p, "a struct, union or enum tag");
				goto fail;
			}
			if (words.len)
				sb_puts(&words, " ");
			sb_putn(&words, t.text, t.len);
			sb_puts(&words, " ");
			sb_putn(&words, p->tok.text, p->tok.len);
		} else {
			if (words.len)
				sb_puts(&words, " ");
			sb_putn(&words, t.text, t.len);
		}
		if (next(p))
			goto fail;
	}
	if (nspec == 0) {
		unexpected(p, "a parameter type");
		goto fail;
	}
	if (tok_punct(&p->tok, '{')) {
		loc_error(&p->tok.loc, "type definitions are not allowed in a probe's parameters");
		goto fail;
	}

	/* Qualifiers go first whatever their place in the source: "char
	 * const" and "const char" are one type, and one spelling keeps the
	 * signature the same however the .d writes it. */
	struct strbuf type = { 0 };
	if (has_const || n[S_STRING])
		sb_puts(&type, "const ");
	if (has_volatile)
		sb_puts(&type, "volatile ");
	sb_puts(&type, words.s);
	sb_free(&words);
	int pointers = n[S_STRING];
	if (n[S_STRING])
		sb_puts(&type, "*");

	while (tok_punct(&p->tok, '*')) {
		sb_puts(&type, "*");
		pointers++;
		if (next(p))
			goto fail_type;
		while (is_qualifier(&p->tok)) {
			sb_puts(&type, " ");
			sb_putn(&type, p->tok.text, p->tok.len);
			if (next(p))
				goto fail_type;
		}
	}
	if (tok_punct(&p->tok, '(')) {
		loc_error(&p->tok.loc, "function pointer parameters are not supported (declare them as void *)");
		goto fail_type;
	}

	/* An SDT argument is one register or memory operand of at most 8
	 * bytes; say so here rather than in the compiler's words later. */
	if (pointers == 0 && n[S_TAG] && strncmp(words_kind, "enum", 4)) {
		loc_error(&start, "a struct or union cannot be passed by value to a probe: "
				  "pass a pointer");
		goto fail_type;
	}
	if (pointers == 0 && n[S_DOUBLE] && n[S_LONG]) {
		loc_error(&start, "long double is wider than a probe argument (8 bytes)");
		goto fail_type;
	}

	out->name = NULL;
	if (p->tok.kind == TOK_IDENT && !is_keyword(&p->tok)) {
		out->name = xstrndup(p->tok.text, p->tok.len);
		if (next(p))
			goto fail_name;
	} else if (p->tok.kind == TOK_IDENT) {
		char buf[64];
		loc_error(&p->tok.loc, "unexpected %s in a parameter declaration",
			  describe(&p->tok, buf, sizeof(buf)));
		goto fail_type;
	}
	/* An array parameter is a pointer, as in C. */
	if (tok_punct(&p->tok, '[')) {
		if (next(p))
			goto fail_name;
		if (p->tok.kind == TOK_NUMBER || p->tok.kind == TOK_IDENT)
			if (next(p))
				goto fail_name;
		if (expect_punct(p, ']', "']'"))
			goto fail_name;
		sb_puts(&type, "*");
		pointers++;
	}
	if (n[S_VOID] && pointers == 0) {
		if (out->name) {
			loc_error(&start, "parameter '%s' has type void", out->name);
			goto fail_name;
		}
		*is_void = 1;
	}
	out->type = type.s;
	return 0;

fail_name:
	free(out->name);
	out->name = NULL;
fail_type:
	sb_free(&type);
	return -1;
fail:
	sb_free(&words);
	return -1;
}

static void free_params(struct dt_param *v, int n)
{
	for (int i = 0; i < n; i++) {
		free(v[i].type);
		free(v[i].name);
	}
}

/* "(" ... ")" into probe->params. */
static int parse_params(struct parser *p, struct dt_probe *probe)
{
	struct loc open = p->tok.loc;
	if (expect_punct(p, '(', "'('"))
		return -1;
	if (tok_punct(&p->tok, ')'))
		return next(p);
	for (;;) {
		if (p->tok.kind == TOK_ELLIPSIS) {
			loc_error(&p->tok.loc, "probes cannot take variable arguments");
			return -1;
		}
		struct loc at = p->tok.loc;
		struct dt_param prm;
		int is_void;
		if (parse_param(p, &prm, &is_void))
			return -1;
		if (is_void) {
			free(prm.type);
			if (probe->nparams == 0 && tok_punct(&p->tok, ')'))
				return next(p); /* (void) */
			loc_error(&at, "'void' must be the only parameter");
			return -1;
		}
		if (probe->nparams == XPD_MAX_ARGS) {
			loc_error(&at, "probe '%s' has more than %d arguments",
				  probe->name, XPD_MAX_ARGS);
			free(prm.type);
			free(prm.name);
			return -1;
		}
		for (int i = 0; prm.name && i < probe->nparams; i++)
			if (probe->params[i].name &&
			    !strcmp(probe->params[i].name, prm.name)) {
				loc_error(&at, "duplicate parameter name '%s'", prm.name);
				free(prm.type);
				free(prm.name);
				return -1;
			}
		probe->params[probe->nparams++] = prm;
		if (tok_punct(&p->tok, ')'))
			return next(p);
		if (p->tok.kind == TOK_EOF) {
			loc_error(&open, "unbalanced '(': end of file inside the parameter list");
			return -1;
		}
		if (expect_punct(p, ',', "',' or ')' after a parameter"))
			return -1;
	}
}

/* ---- declarations -------------------------------------------------------- */

static int parse_probe(struct parser *p, struct dt_provider *prov)
{
	struct dt_probe probe;
	memset(&probe, 0, sizeof(probe));

	if (next(p)) /* "probe" */
		return -1;
	if (p->tok.kind != TOK_IDENT || is_keyword(&p->tok))
		return unexpected(p, "a probe name");
	probe.loc = p->tok.loc;
	probe.name = xstrndup(p->tok.text, p->tok.len);
	for (size_t i = 0; i < prov->nprobes; i++)
		if (!strcmp(prov->probes[i].name, probe.name)) {
			loc_error(&probe.loc, "probe '%s' already declared at %s:%d:%d",
				  probe.name, prov->probes[i].loc.file,
				  prov->probes[i].loc.line, prov->probes[i].loc.col);
			goto fail;
		}
	if (next(p))
		goto fail;
	if (!tok_punct(&p->tok, '(')) {
		unexpected(p, "'(' after the probe name");
		goto fail;
	}
	if (parse_params(p, &probe))
		goto fail;
	if (tok_punct(&p->tok, ':')) {
		/* The translated view: parsed for errors, then dropped. */
		struct dt_probe view;
		memset(&view, 0, sizeof(view));
		view.name = probe.name;
		if (next(p))
			goto fail;
		int rc = parse_params(p, &view);
		free_params(view.params, view.nparams);
		if (rc)
			goto fail;
	}
	if (!tok_punct(&p->tok, ';')) {
		unexpected(p, "';' after the probe declaration");
		goto fail;
	}
	if (next(p))
		goto fail;
	prov->probes = xrealloc(prov->probes, (prov->nprobes + 1) * sizeof(*prov->probes));
	prov->probes[prov->nprobes++] = probe;
	return 0;
fail:
	free_params(probe.params, probe.nparams);
	free(probe.name);
	return -1;
}

static int parse_provider(struct parser *p)
{
	struct loc kw = p->tok.loc;
	p->lx.lenient = 0; /* a stray '@' in a provider is a mistake */
	if (next(p))
		return -1;
	if (p->tok.kind != TOK_IDENT || is_keyword(&p->tok))
		return unexpected(p, "a provider name");

	/* A provider may be declared in several blocks; they add up. */
	struct dt_provider *prov = NULL;
	for (size_t i = 0; i < p->out->nprovs; i++)
		if (strlen(p->out->provs[i].name) == p->tok.len &&
		    !memcmp(p->out->provs[i].name, p->tok.text, p->tok.len))
			prov = &p->out->provs[i];
	if (!prov) {
		p->out->provs = xrealloc(p->out->provs,
					 (p->out->nprovs + 1) * sizeof(*p->out->provs));
		prov = &p->out->provs[p->out->nprovs++];
		memset(prov, 0, sizeof(*prov));
		prov->name = xstrndup(p->tok.text, p->tok.len);
		prov->loc = p->tok.loc;
	}
	if (next(p))
		return -1;
	if (expect_punct(p, '{', "'{' after the provider name"))
		return -1;
	while (!tok_punct(&p->tok, '}')) {
		if (p->tok.kind == TOK_EOF) {
			loc_error(&kw, "unterminated provider '%s': missing '}'", prov->name);
			return -1;
		}
		if (!tok_is(&p->tok, "probe"))
			return unexpected(p, "'probe' or '}'");
		if (parse_probe(p, prov))
			return -1;
	}
	p->lx.lenient = 1; /* back at the top level */
	if (next(p))
		return -1;
	if (tok_punct(&p->tok, ';'))
		return next(p);
	return 0;
}

/* ---- top-level code that is not a provider ----------------------------- */

/* A .d file may hold more than providers: D declarations (typedef,
 * struct, translator, inline), D clauses (CPython's configure tests
 * `BEGIN{}`), and under -C whatever the C headers it includes declare.
 * None of it means anything to C call sites, and systemtap's stub accepts
 * it all, so each top-level construct is skipped as balanced tokens up to
 * a ';' at depth 0, or up to the '}' closing a function or clause body. */
struct construct {
	struct token first;  /* first token, after any __extension__ */
	int d_decl;          /* starts like a D declaration */
	int desc_ok;         /* so far, tokens a probe description allows */
	int prev_word;       /* the last token was an identifier or number */
	int clause;          /* a D clause: probe description, then '{' or '/' */
	int params;          /* a parameter list seen at depth 0 */
	int assign;          /* an '=' seen at depth 0 */
	int body_open;       /* the outer '{' opens a function or clause body */
	int cut;             /* ended by 'provider' or end of file */
	int depth;           /* brackets open, of any kind */
	struct token prev;   /* the last token taken in */
};

/* Words whose parentheses hold attributes or types, not parameters. */
static int is_attribute_word(const struct token *t)
{
	static const char *const words[] = {
		"__attribute__", "__attribute", "__declspec", "__asm__", "__asm",
		"asm", "_Alignas", "alignas", "__typeof__", "__typeof", "typeof",
		"__typeof_unqual__", "_Pragma", NULL,
	};
	for (int i = 0; words[i]; i++)
		if (tok_is(t, words[i]))
			return 1;
	return 0;
}

static int is_d_declaration_word(const struct token *t)
{
	return tok_is(t, "typedef") || tok_is(t, "struct") ||
	       tok_is(t, "union") || tok_is(t, "enum") ||
	       tok_is(t, "translator") || tok_is(t, "inline");
}

/* Probe descriptions are words joined by ':' '-' '*' '?' '$' and listed
 * with ','; "syscall::read:entry", "tick-1s", "pid$target:::entry".  Two
 * words in a row ("provder t") are not one. */
static void track_description(struct construct *c, const struct token *t)
{
	int word = t->kind == TOK_IDENT || t->kind == TOK_NUMBER;
	if ((word && c->prev_word) ||
	    (!word && !(t->kind == TOK_PUNCT && strchr(":-*?$,", t->text[0]))))
		c->desc_ok = 0;
	c->prev_word = word;
}

/* One token of the construct at its depth; returns 1 when it ends the
 * construct (the token is then consumed by the caller). */
static int construct_token(struct construct *c, const struct token *t)
{
	if (t->kind != TOK_PUNCT) {
		if (c->depth == 0 && !c->clause)
			track_description(c, t);
		c->prev = *t;
		return 0;
	}
	char ch = t->text[0];
	int at_top = c->depth == 0;
	if (at_top && (ch == '{' || ch == '/') && !c->clause && c->desc_ok &&
	    c->prev.kind != TOK_EOF)
		c->clause = 1;
	else if (at_top && !c->clause)
		track_description(c, t);

	if (ch == '{' || ch == '(' || ch == '[') {
		if (at_top && ch == '(' && !is_attribute_word(&c->prev))
			c->params = 1;
		if (at_top && ch == '{')
			c->body_open = c->clause || (c->params && !c->assign) ||
				       c->prev.kind == TOK_EOF;
		c->depth++;
	} else if (ch == '}' || ch == ')' || ch == ']') {
		/* A stray closer cannot unbalance what follows: ignored. */
		if (c->depth > 0 && --c->depth == 0 && ch == '}' && c->body_open)
			return 1;
	} else if (at_top && ch == '=') {
		c->assign = 1;
	} else if (at_top && ch == ';') {
		return 1;
	}
	c->prev = *t;
	return 0;
}

static const char *main_file(const struct parser *p)
{
	return p->out->names[0]; /* interned first, by lex_init */
}

/* Silent for the declarations and clauses D itself allows, and for
 * anything a header included under -C brings in; a warning otherwise, so
 * that a typo such as "provder" is not lost without a word. */
static void report_skipped(struct parser *p, const struct construct *c)
{
	char buf[64];
	const char *what = describe(&c->first, buf, sizeof(buf));
	int one_token = c->prev.text == c->first.text;
	const char *more = one_token ? "" : " ...";

	if (tok_punct(&c->first, ';') || c->first.loc.file != main_file(p))
		return;
	if (c->clause || (c->d_decl && !c->body_open)) {
		if (c->cut)
			loc_warning(&c->first.loc, "skipping unterminated %s%s "
				    "(no ';' or '}' before %s)", what, more,
				    p->tok.kind == TOK_EOF ? "the end of the file" : "'provider'");
		return;
	}
	/* Quote the first token only: the construct may span pages. */
	loc_warning(&c->first.loc, "skipping %s%s (not a provider declaration)",
		    what, more);
}

static int skip_construct(struct parser *p)
{
	struct construct c;
	memset(&c, 0, sizeof(c));
	c.desc_ok = 1;
	c.prev.kind = TOK_EOF; /* nothing yet */
	c.first = p->tok;

	while (tok_is(&p->tok, "__extension__")) {
		if (next(p))
			return -1;
		if (p->tok.kind != TOK_EOF)
			c.first = p->tok;
	}
	c.d_decl = is_d_declaration_word(&c.first);
	for (;;) {
		if (p->tok.kind == TOK_EOF) {
			c.cut = 1;
			break;
		}
		/* A missing ';' must not swallow the provider after it. */
		if (c.depth == 0 && tok_is(&p->tok, "provider") &&
		    p->tok.text != c.first.text) {
			struct token after;
			lex_peek(&p->lx, &after);
			if (after.kind == TOK_IDENT) {
				c.cut = 1;
				break;
			}
		}
		int end = construct_token(&c, &p->tok);
		if (end)
			c.prev = p->tok;
		if (next(p))
			return -1;
		if (end)
			break;
	}
	report_skipped(p, &c);
	return 0;
}

int dt_parse(const char *name, const char *text, size_t len, struct dt_file *out)
{
	struct parser p;

	memset(out, 0, sizeof(*out));
	p.out = out;
	lex_init(&p.lx, out, name, text, len);
	p.lx.lenient = 1; /* top level: see lexer.lenient */
	if (next(&p))
		return -1;
	while (p.tok.kind != TOK_EOF) {
		if (tok_is(&p.tok, "provider")) {
			if (parse_provider(&p))
				return -1;
		} else if (skip_construct(&p)) {
			return -1;
		}
	}
	return 0;
}

void dt_free(struct dt_file *f)
{
	for (size_t i = 0; i < f->nprovs; i++) {
		struct dt_provider *pv = &f->provs[i];
		for (size_t j = 0; j < pv->nprobes; j++) {
			free_params(pv->probes[j].params, pv->probes[j].nparams);
			free(pv->probes[j].name);
		}
		free(pv->probes);
		free(pv->name);
	}
	free(f->provs);
	for (size_t i = 0; i < f->nnames; i++)
		free(f->names[i]);
	free(f->names);
	memset(f, 0, sizeof(*f));
}
