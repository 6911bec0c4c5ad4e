/* SPDX-License-Identifier: MIT */
/* Argument specs, uftrace's syntax (-A 'PATTERN@arg1,arg2/s,fparg1',
 * -R 'PATTERN@retval/x'): parsed into rules, merged per function as
 * uftrace merges them, and turned into what the agent takes (`trace args
 * ADDR=i1,s2,r`, docs/man/xprobes.1) and what a uftrace data directory's
 * info says (argspec:/retspec: lines, with pattern_type glob).
 *
 * uftrace's merge, as its recordings show it: rules apply in the order
 * given; an item for an argument already in the function's list (the
 * same argN, or fpargN) replaces it where it stands, a new one goes at
 * the end; a later retval replaces the earlier.  Patterns are globs, as
 * for -F (uftrace takes a regex: a plain name means the same in both).
 * No process I/O: tests/unit/test_trace_argspec.c runs it. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int spec_bad(char *why, size_t whysz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int spec_bad(char *why, size_t whysz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
	return -1;
}

/* A decimal number of at most 3 digits at *s, moved past: -1 if none. */
static int spec_number(const char **s)
{
	int v = 0, digits = 0;
	while (isdigit((unsigned char)**s) && digits < 3) {
		v = v * 10 + (**s - '0');
		(*s)++;
		digits++;
	}
	return digits && !isdigit((unsigned char)**s) ? v : -1;
}

/* A type name kept in a's pool (enum and struct items), "NAME\0BODY":
 * BODY an enum's "{A=1,B,C=5}" (argspec_enum), else "".  NULL if no memory. */
static const char *argpool_add(struct argspecs *a, const char *name, size_t len, const char *body)
{
	size_t blen = strlen(body);
	char **grown = reallocarray(a->pool, a->npool + 1, sizeof(*grown));
	if (!grown)
		return NULL;
	a->pool = grown;
	char *p = malloc(len + blen + 2);
	if (!p)
		return NULL;
	memcpy(p, name, len);
	p[len] = '\0';
	memcpy(p + len + 1, body, blen + 1);
	return a->pool[a->npool++] = p;
}

static const char *pool_name(struct argspecs *a, const char *name, size_t len)
{
	for (size_t i = a->npool; i-- > 0;)
		if (!strncmp(a->pool[i], name, len) && !a->pool[i][len])
			return a->pool[i];
	return argpool_add(a, name, len, "");
}

int argspec_enum(struct argspecs *a, const char *def)
{
	if (strncmp(def, "enum ", 5))
		return 0;
	const char *name = def + 5, *body = strchr(name, '{');
	if (!body)
		return 0;
	size_t len = (size_t)(body - name);
	while (len && name[len - 1] == ' ')
		len--;
	for (size_t i = a->npool; i-- > 0;)
		if (!strncmp(a->pool[i], name, len) && !a->pool[i][len] && a->pool[i][len + 1])
			return 0; /* the first definition of a name kept, as uftrace */
	return argpool_add(a, name, len, body) ? 0 : -1;
}

/* A location "%rdx", "%XMM1", "%stack+2" (uftrace's -a names where an
 * argument is, at the function's entry): where the agent reads it, as
 * ta_item.reg says, or 0 if it reads no such place. */
static int reg_position(const char *s, int fp)
{
	static const char *const ints[] = { "rdi", "rsi", "rdx", "rcx", "r8", "r9" };
	if (!strncmp(s, "stack+", 6)) {
		/* The Nth word above the return address: the agent's i(6+N). */
		s += 6;
		int n = spec_number(&s);
		return n >= 1 && n <= TA_MAX_ARG - 6 && !*s ? (6 + n) | (fp ? TA_REG_WORD : 0) : 0;
	}
	if (fp)
		return !strncasecmp(s, "xmm", 3) && s[3] >= '0' && s[3] <= '7' && !s[4]
		       ? s[3] - '0' + 1 : 0;
	for (int i = 0; i < 6; i++)
		if (!strcasecmp(s, ints[i]))
			return i + 1;
	return 0;
}

/* An item's location at s ("%RDX", "%stack+2"), to its end. */
static int parse_location(struct argspecs *a, const char *s, struct ta_item *it, const char *word,
			  char *why, size_t whysz)
{
	if (it->kind != TA_RETVAL && (it->reg = (uint8_t)reg_position(s + 1, it->kind == TA_FPARG)))
		return 0;
	if (a->lenient)
		return 0; /* where uftrace read it does not matter to its data */
	return spec_bad(why, whysz, "'%s': only the registers the arguments come in (%%rdi..%%r9, "
			"%%xmm0..%%xmm7) and %%stack+1..%d are supported", word, TA_MAX_ARG - 6);
}

/* One item ("arg2/u32", "fparg1/32", "retval/s", "arg1/e:color%RDI") of
 * len bytes at w. */
static int parse_item(struct argspecs *a, const char *w, size_t len, struct ta_item *it,
		      char *why, size_t whysz)
{
	char word[600];
	if (len >= sizeof(word))
		return spec_bad(why, whysz, "'%.40s...' is not an argument spec", w);
	memcpy(word, w, len);
	word[len] = '\0';
	const char *s = word;
	*it = (struct ta_item){ .fmt = TA_AUTO, .size = 8 };
	if (!strncmp(s, "fparg", 5)) {
		s += 5;
		it->kind = TA_FPARG;
		it->fmt = TA_FLOAT;
	} else if (!strncmp(s, "arg", 3)) {
		s += 3;
		it->kind = TA_ARG;
	} else if (!strncmp(s, "retval", 6)) {
		s += 6;
		it->kind = TA_RETVAL;
	} else {
		return spec_bad(why, whysz, "'%s' is not an argument spec (argN, fpargN or retval)", word);
	}
	if (it->kind != TA_RETVAL) {
		int n = spec_number(&s);
		int max = a->lenient ? 255 : it->kind == TA_FPARG ? TA_MAX_FPARG : TA_MAX_ARG;
		if (n < 1 || n > max)
			return spec_bad(why, whysz, "'%s': the argument's number must be 1 to %d", word, max);
		it->idx = (uint8_t)n;
	}
	/* The location goes last: cut it off first (a type's name has no %). */
	char *loc = strchr(s, '%');
	if (loc) {
		if (parse_location(a, loc, it, word, why, whysz))
			return -1;
		*loc = '\0';
	}
	if (!*s)
		return 0;
	if (*s++ != '/')
		return spec_bad(why, whysz, "'%s' is not an argument spec", word);
	if (it->kind == TA_FPARG && *s == 'f')
		s++; /* fpargN/f32: the format it has anyway */
	if (it->kind == TA_FPARG) {
		int bits = spec_number(&s);
		if (a->lenient && !*s && bits == 80) {
			it->fmt = TA_LDOUBLE; /* uftrace's -a: a long double */
			return 0;
		}
		if (*s || (bits != 32 && bits != 64))
			return spec_bad(why, whysz, "'%s': a floating-point argument's size is 32 or 64%s",
				   word, bits == 80 ? " (long double is passed on the stack: not recorded)"
				   : "");
		it->size = (uint8_t)(bits / 8);
		return 0;
	}
	if (*s == 'e' && s[1] == ':' && s[2]) {
		/* An enum: a machine word (uftrace's layout), its name from
		 * the enum's definition (a .dbg's E: lines). */
		it->fmt = TA_ENUM;
		return (it->name = pool_name(a, s + 2, strlen(s + 2))) ? 0
		       : spec_bad(why, whysz, "out of memory");
	}
	if (a->lenient && *s == 't') {
		/* A struct by value, as uftrace's -a records it: SIZE[:NAME]
		 * (an anonymous one has none). */
		s++;
		int size = spec_number(&s);
		if (size < 0 || size > 255 || (*s && *s != ':'))
			return spec_bad(why, whysz, "'%s': a struct's size must be 0 to 255", word);
		it->fmt = TA_STRUCT;
		it->size = (uint8_t)size;
		s += *s == ':';
		return (it->name = pool_name(a, s, strlen(s))) ? 0 : spec_bad(why, whysz, "out of memory");
	}
	if (a->lenient && it->kind == TA_RETVAL && !strcmp(s, "f80")) {
		it->fmt = TA_LDOUBLE;
		return 0;
	}
	if (a->lenient && *s == 'S' && !s[1]) {
		it->fmt = TA_STR; /* std::string: uftrace records its text as a string's */
		return 0;
	}
	static const char fmts[] = "diuxscfp";
	static const uint8_t fmt_of[] = { TA_AUTO, TA_SINT, TA_UINT, TA_HEX, TA_STR, TA_CHAR,
					  TA_FLOAT, TA_PTR };
	const char *f = *s ? strchr(fmts, *s) : NULL;
	if (!f) {
		if (*s == 'e' || *s == 'S' || *s == 't')
			return spec_bad(why, whysz, "'%s': format '%c' (%s) is not supported", word, *s,
				   *s == 'e' ? "enum without e:NAME" : *s == 'S' ? "std::string" : "struct");
		return spec_bad(why, whysz, "'%s': unknown format '%c' (d, i, u, x, s, c, f, p or e:NAME)",
			   word, *s ? *s : ' ');
	}
	s++;
	it->fmt = fmt_of[f - fmts];
	if (it->fmt == TA_FLOAT && it->kind == TA_ARG)
		return spec_bad(why, whysz, "'%s': a floating-point argument is fpargN", word);
	if (it->fmt == TA_CHAR)
		it->size = 1;
	if (!*s)
		return 0;
	int bits = spec_number(&s);
	if (it->fmt == TA_STR || it->fmt == TA_CHAR || it->fmt == TA_PTR)
		return spec_bad(why, whysz, "'%s': format '%c' takes no size", word, *f);
	if (*s || (it->fmt == TA_FLOAT ? bits != 32 && bits != 64
		   : bits != 8 && bits != 16 && bits != 32 && bits != 64))
		return spec_bad(why, whysz, "'%s': the size must be %s", word,
			   it->fmt == TA_FLOAT ? "32 or 64" : "8, 16, 32 or 64");
	it->size = (uint8_t)(bits / 8);
	return 0;
}

void argspecs_free(struct argspecs *a)
{
	for (size_t i = 0; i < a->nrules; i++) {
		free(a->rule[i].pattern);
		if (a->rule[i].re)
			regfree(a->rule[i].re);
		free(a->rule[i].re);
	}
	free(a->rule);
	free(a->spec);
	for (size_t i = 0; i < a->ndbg; i++) {
		free(a->dbg[i].path);
		free(a->dbg[i].text);
	}
	free(a->dbg);
	for (size_t i = 0; i < a->npool; i++)
		free(a->pool[i]);
	free(a->pool);
	u64map_free(&a->index);
	*a = (struct argspecs){ 0 };
}

int argspec_add(struct argspecs *a, const char *pattern, const char *spec, int exact_name,
		char *why, size_t whysz)
{
	struct ta_rule r = { .exact = exact_name };
	if (!*pattern)
		return spec_bad(why, whysz, "no function name before '@'");
	if (!exact_name && a->regex && !pattern[strcspn(pattern, ".[]*+?^$(){}|\\")])
		r.exact = exact_name = 1; /* uftrace: no special character, a name */
	if (!exact_name && !a->regex && xp_glob_error(pattern))
		return spec_bad(why, whysz, "'%s' is not a valid glob: %s", pattern, xp_glob_error(pattern));
	for (const char *s = spec;;) {
		size_t len = strcspn(s, ",");
		if (r.n == TA_MAX_ITEMS)
			return spec_bad(why, whysz, "more than %d arguments and return values", TA_MAX_ITEMS);
		if (parse_item(a, s, len, &r.item[r.n++], why, whysz))
			return -1;
		if (!s[len])
			break;
		s += len + 1;
	}
	if (!exact_name && a->regex) {
		if (!(r.re = malloc(sizeof(regex_t))))
			return spec_bad(why, whysz, "out of memory");
		if (regcomp(r.re, pattern, REG_EXTENDED | REG_NOSUB)) {
			free(r.re);
			return spec_bad(why, whysz, "'%s' is not a valid regex", pattern);
		}
	}
	struct ta_rule *grown = reallocarray(a->rule, a->nrules + 1, sizeof(*grown));
	if (!grown || !(r.pattern = strdup(pattern))) {
		if (grown)
			a->rule = grown;
		if (r.re)
			regfree(r.re);
		free(r.re);
		return spec_bad(why, whysz, "out of memory");
	}
	a->rule = grown;
	a->rule[a->nrules++] = r;
	return 0;
}

int argspec_option(struct argspecs *a, const char *arg, char *why, size_t whysz)
{
	const char *at = strrchr(arg, '@');
	if (!at)
		return spec_bad(why, whysz, "'%s' has no @SPEC (automatic arguments are not supported)",
			   arg);
	if (!at[1])
		return spec_bad(why, whysz, "'%s': nothing after '@'", arg);
	char *pattern = strndup(arg, (size_t)(at - arg));
	if (!pattern)
		return spec_bad(why, whysz, "out of memory");
	int rc = argspec_add(a, pattern, at + 1, 0, why, whysz);
	free(pattern);
	return rc;
}

static int rule_matches(const struct ta_rule *r, const char *name)
{
	if (r->re)
		return regexec(r->re, name, 0, NULL, 0) == 0;
	return r->exact ? !strcmp(r->pattern, name) : fnmatch(r->pattern, name, 0) == 0;
}

static int same_arg(const struct ta_item *x, const struct ta_item *y)
{
	return x->kind == y->kind && x->idx == y->idx;
}

int argspec_match(struct argspecs *a, const char *name, struct ta_spec *out, char *why,
		  size_t whysz)
{
	int any = 0;
	*out = (struct ta_spec){ 0 };
	for (size_t i = 0; i < a->nrules; i++) {
		struct ta_rule *r = &a->rule[i];
		if (!rule_matches(r, name))
			continue;
		any = r->matched = 1;
		for (size_t k = 0; k < r->n; k++) {
			const struct ta_item *it = &r->item[k];
			if (it->kind == TA_RETVAL) {
				out->ret = *it;
				out->has_ret = 1;
				continue;
			}
			size_t j = 0;
			while (j < out->nargs && !same_arg(&out->arg[j], it))
				j++;
			if (j == TA_MAX_ITEMS)
				return spec_bad(why, whysz, "%s: more than %d arguments", name, TA_MAX_ITEMS);
			out->arg[j] = *it;
			out->nargs += j == out->nargs;
		}
	}
	if (any && out->nargs + (size_t)out->has_ret > TA_MAX_ITEMS)
		return spec_bad(why, whysz, "%s: more than %d arguments and return values", name,
			   TA_MAX_ITEMS);
	return any;
}

void argspec_merge_auto(struct ta_spec *out, const struct ta_spec *autos, const struct ta_spec *user)
{
	static const struct ta_spec none;
	const struct ta_spec *args = user && user->nargs ? user : autos ? autos : &none;
	const struct ta_spec *ret = user && user->has_ret ? user : autos ? autos : &none;
	struct ta_spec m = *args;
	m.ret = ret->ret;
	m.has_ret = ret->has_ret;
	*out = m;
}

int argspec_parse_auto(struct argspecs *a, const char *text, int ret, struct ta_spec *out,
		       char *why, size_t whysz)
{
	size_t max = ret ? 1 : a->lenient ? TA_MAX_HELD : TA_MAX_ITEMS;
	size_t n = 0;
	struct ta_item items[TA_MAX_HELD];
	for (const char *s = text; *s;) {
		size_t len = strcspn(s, ",");
		if (n == max)
			return spec_bad(why, whysz, "more than %zu %s", max, ret ? "return value" : "arguments");
		if (parse_item(a, s, len, &items[n], why, whysz))
			return -1;
		if ((items[n].kind == TA_RETVAL) != !!ret)
			return spec_bad(why, whysz, "'%.*s': %s", (int)len, s,
					ret ? "not a return value" : "a return value among the arguments");
		n++;
		s += len + (s[len] != '\0');
	}
	if (ret) {
		out->has_ret = n > 0;
		if (n)
			out->ret = items[0];
	} else {
		memcpy(out->arg, items, n * sizeof(items[0]));
		out->nargs = n;
	}
	return 0;
}

int argspec_keep_dbg(struct argspecs *a, const char *path, const char *text)
{
	struct ta_dbg *grown = reallocarray(a->dbg, a->ndbg + 1, sizeof(*grown));
	if (!grown)
		return -1;
	a->dbg = grown;
	struct ta_dbg d = { strdup(path), strdup(text) };
	if (!d.path || !d.text) {
		free(d.path);
		free(d.text);
		return -1;
	}
	a->dbg[a->ndbg++] = d;
	return 0;
}

int argspec_bind(struct argspecs *a, uint64_t addr, const struct ta_spec *s)
{
	uint32_t at;
	if (u64map_get(&a->index, addr, &at) == 0) {
		a->spec[at] = *s;
		return 0;
	}
	if (a->nspec == a->capspec) {
		size_t cap = a->capspec ? 2 * a->capspec : 64;
		struct ta_spec *grown = reallocarray(a->spec, cap, sizeof(*grown));
		if (!grown)
			return -1;
		a->spec = grown;
		a->capspec = cap;
	}
	if (a->nspec >= UINT32_MAX - 1 || u64map_put(&a->index, addr, (uint32_t)a->nspec))
		return -1;
	a->spec[a->nspec++] = *s;
	return 0;
}

const struct ta_spec *argspec_find(const struct argspecs *a, uint64_t addr)
{
	uint32_t at;
	return a && a->nspec && u64map_get(&a->index, addr, &at) == 0 ? &a->spec[at] : NULL;
}

/* The agent's word for an item. */
static int item_word(const struct ta_item *it, char *buf, size_t size)
{
	if (it->kind == TA_RETVAL)
		return snprintf(buf, size, "%s", it->fmt == TA_STR ? "rs" : it->fmt == TA_FLOAT ? "rf" : "r");
	if (it->kind == TA_FPARG && (it->reg & TA_REG_WORD)) /* a float on the stack: its word */
		return snprintf(buf, size, "i%u", it->reg & ~TA_REG_WORD);
	return snprintf(buf, size, "%c%u", it->kind == TA_FPARG ? 'f' : it->fmt == TA_STR ? 's' : 'i',
			it->reg ? it->reg : it->idx);
}

int ta_items_text(const struct ta_spec *s, char *buf, size_t size)
{
	size_t len = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < s->nargs + (size_t)s->has_ret; i++) {
		const struct ta_item *it = i < s->nargs ? &s->arg[i] : &s->ret;
		if (len)
			len += (size_t)snprintf(buf + len, len < size ? size - len : 0, ",");
		len += (size_t)item_word(it, buf + len, len < size ? size - len : 0);
	}
	return len < size ? (int)len : -1;
}

/* uftrace's text for an item, which its info takes back. */
static void item_spec(FILE *f, const struct ta_item *it)
{
	static const char fmtc[] = { [TA_AUTO] = 'd', [TA_SINT] = 'i', [TA_UINT] = 'u',
				     [TA_HEX] = 'x', [TA_STR] = 's', [TA_CHAR] = 'c',
				     [TA_FLOAT] = 'f', [TA_PTR] = 'p', [TA_ENUM] = 'e',
				     [TA_STRUCT] = 't', [TA_LDOUBLE] = 'f' };
	if (it->kind == TA_FPARG) {
		fprintf(f, "fparg%u%s", it->idx, it->fmt == TA_LDOUBLE ? "/80" : it->size == 4 ? "/32" : "");
		return;
	}
	if (it->kind == TA_ARG)
		fprintf(f, "arg%u", it->idx);
	else
		fputs("retval", f);
	if (it->fmt == TA_ENUM)
		fprintf(f, "/e:%s", it->name);
	else if (it->fmt == TA_STRUCT)
		fprintf(f, "/t%u:%s", it->size, it->name);
	else if (it->fmt == TA_LDOUBLE)
		fputs("/f80", f);
	else if (it->fmt != TA_AUTO || it->size != 8)
		fprintf(f, "/%c", fmtc[it->fmt]);
	if (it->fmt != TA_STR && it->fmt != TA_CHAR && it->fmt != TA_PTR && it->fmt != TA_ENUM &&
	    it->fmt != TA_STRUCT && it->fmt != TA_LDOUBLE && (it->fmt != TA_AUTO || it->size != 8))
		fprintf(f, "%u", it->size * 8u);
	/* No location ("%rdi"): where the value was read is not how it
	 * reads, and uftrace's replay takes register names only with an
	 * info cpuinfo section. */
}

void argspec_info(const struct argspecs *a, int ret, FILE *f)
{
	const char *sep = "";
	for (size_t i = 0; i < a->nrules; i++) {
		const struct ta_rule *r = &a->rule[i];
		const char *isep = "@";
		for (size_t k = 0; k < r->n; k++) {
			if ((r->item[k].kind == TA_RETVAL) != !!ret)
				continue;
			if (*isep == '@') {
				fputs(sep, f);
				/* An exact name's glob characters, escaped (C++'s operator[]). */
				for (const char *c = r->pattern; *c; c++) {
					if (r->exact && strchr("*?[\\", *c))
						fputc('\\', f);
					fputc(*c == ';' || *c == '\n' ? '?' : *c, f);
				}
				sep = ";";
			}
			fputs(isep, f);
			isep = ",";
			item_spec(f, &r->item[k]);
		}
	}
}
