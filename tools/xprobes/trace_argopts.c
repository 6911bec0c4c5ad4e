/* SPDX-License-Identifier: MIT */
/* -A/-R/-a for a later session.  The agent records argument words by
 * address and item bytes; only the session that ran `trace start` knows
 * how to show them (uftrace's spec syntax, the enums and .dbg text -a
 * read).  So the start leaves its options with the agent as text (`trace
 * args --options TEXT`), and a session that reads the trace without having
 * started it (`trace cat`, `trace snapshot -o DIR`) asks for them (`trace
 * args show`) and resolves them as the start did (trace_start.c).
 *
 * TEXT is "-A WORD -R WORD -a --no-libcall", each word percent-encoded
 * (blanks, '%', control and non-ASCII bytes as %XX) since the agent splits
 * its requests on blanks.  What comes back is the target's to say: it is
 * bounded, decoded strictly, and only ever parsed again as options, with
 * argspec_option and the start's own checks. */
#include "xprobes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int must_escape(unsigned char c)
{
	return c <= ' ' || c >= 0x7f || c == '%';
}

int argopts_add(char *text, const char *opt, const char *value)
{
	size_t len = strlen(text), need = 1 + strlen(opt);
	for (const char *p = value; p && *p; p++)
		need += must_escape((unsigned char)*p) ? 3 : 1;
	if (value)
		need++;
	if (len + need > TA_OPTIONS_MAX)
		return -1;
	char *o = text + len;
	o += sprintf(o, "%s%s", len ? " " : "", opt);
	if (value) {
		*o++ = ' ';
		for (const unsigned char *p = (const unsigned char *)value; *p; p++)
			o += must_escape(*p) ? sprintf(o, "%%%02X", *p) : (*o = (char)*p, 1);
	}
	*o = 0;
	return 0;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Word w (len bytes) decoded into out (len + 1 bytes): 0, or -1 for a
 * byte no encoder writes (a blank, a bad escape, a NUL). */
static int decode(const char *w, size_t len, char *out)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)w[i];
		if (c == '%') {
			int hi = i + 2 < len ? hexval(w[i + 1]) : -1;
			int lo = hi >= 0 ? hexval(w[i + 2]) : -1;
			if (lo < 0 || (hi == 0 && lo == 0))
				return -1;
			out[n++] = (char)(hi << 4 | lo);
			i += 2;
		} else if (must_escape(c)) {
			return -1;
		} else {
			out[n++] = (char)c;
		}
	}
	out[n] = 0;
	return 0;
}

int argopts_parse(const char *text, struct argspecs **out, int *nolibcall, char *why,
		  size_t whysz)
{
	*out = NULL;
	*nolibcall = 0;
	size_t tlen = strlen(text);
	if (tlen > TA_OPTIONS_MAX) {
		snprintf(why, whysz, "more than %u bytes", TA_OPTIONS_MAX);
		return -1;
	}
	struct argspecs *a = calloc(1, sizeof(*a));
	char *word = malloc(tlen + 1);
	int rc = a && word ? 0 : (snprintf(why, whysz, "out of memory"), -1);
	const char *opt = NULL; /* -A or -R, its value next */
	for (const char *p = text; !rc && *p;) {
		size_t len = strcspn(p, " ");
		if (!len || decode(p, len, word)) {
			snprintf(why, whysz, "a word is not one the tool writes");
			rc = -1;
			break;
		}
		if (opt) {
			char w2[TRACE_WHY_SIZE];
			if (argspec_option(a, word, w2, sizeof(w2)) != 0) {
				snprintf(why, whysz, "%s '%.200s': %s", opt, word, w2);
				rc = -1;
			}
			opt = NULL;
		} else if (!strcmp(word, "-A") || !strcmp(word, "-R")) {
			opt = !strcmp(word, "-A") ? "-A" : "-R";
		} else if (!strcmp(word, "-a")) {
			a->autoargs = 1;
		} else if (!strcmp(word, "--no-libcall")) {
			*nolibcall = 1;
		} else {
			snprintf(why, whysz, "unexpected '%.200s'", word);
			rc = -1;
		}
		p += len;
		if (*p == ' ' && !*++p) {
			snprintf(why, whysz, "a word is not one the tool writes");
			rc = -1;
		}
	}
	if (!rc && opt) {
		snprintf(why, whysz, "%s without its value", opt);
		rc = -1;
	}
	free(word);
	if (!rc && a && (a->nrules || a->autoargs)) {
		*out = a;
		return 0;
	}
	if (a)
		argspecs_free(a);
	free(a);
	return rc;
}

int trace_args_fetch(struct session *s, const char *who, struct argspecs **out)
{
	*out = NULL;
	char *text = NULL, why[TRACE_WHY_SIZE];
	int rc = session_call(s, "trace args show", &text);
	if (rc != 0) { /* an agent older than `show`: the calls without values, as before */
		free(text);
		return rc < 0 ? 1 : 0;
	}
	static const char prefix[] = "options: ";
	size_t len = text ? strnlen(text, TA_OPTIONS_MAX + sizeof(prefix) + 2) : 0;
	if (!text || len < sizeof(prefix) || strncmp(text, prefix, sizeof(prefix) - 1) ||
	    text[len - 1] != '\n' || text[len] || memchr(text, '\n', len - 1)) {
		fprintf(stderr, "xprobes: %s: the agent's argument options are refused: not one "
				"line 'options: TEXT' of at most %u bytes\n", who, TA_OPTIONS_MAX);
		free(text);
		return 1;
	}
	text[len - 1] = 0;
	const char *opts = text + sizeof(prefix) - 1;
	int nolibcall = 0;
	if (!strcmp(opts, "none")) {
		free(text);
		return 0;
	}
	if (argopts_parse(opts, out, &nolibcall, why, sizeof(why)) != 0) {
		fprintf(stderr, "xprobes: %s: the agent's argument options are refused: %s\n", who,
			sanitize_text(why));
		free(text);
		return 1;
	}
	free(text);
	if (*out && trace_args_resolve(s, *out, !nolibcall, who) != 0) {
		argspecs_free(*out);
		free(*out);
		*out = NULL;
		return 1;
	}
	return 0;
}
