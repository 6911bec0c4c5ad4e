/* SPDX-License-Identifier: MIT */
/* Keys as people write them: a memcached key is bytes, and most
 * keys are UTF-8.  Every tool shows a key as one text, its "key text":
 *   - a valid UTF-8 character other than a control is itself;
 *   - a byte that is not part of one (invalid UTF-8, overlong forms,
 *     surrogates, past U+10FFFF) and every control (C0, DEL, and C1
 *     U+0080..U+009F, which a terminal would obey instead of show) is
 *     \xHH, two lower-case hex digits per byte; so is the ASCII space,
 *     which no text-protocol key holds (only a binary-protocol one can):
 *     a key stays one word in the table, for awk and cut;
 *   - a backslash is \\ so that the two above stay unambiguous.
 * The text is valid UTF-8 and safe on a terminal; the rule reverses
 * exactly (keytext_to_bytes), and a key whose text is not its bytes is
 * flagged (the JSON's "key_escaped") so a reader knows to reverse it.
 * Being one function, the table, the JSON, the full-screen view, the
 * Prometheus labels and mcsnoop cannot disagree about a key. */
#define _GNU_SOURCE
#include "common.h"
#include "keytext_rule.h"

#include <locale.h>
#include <pthread.h>
#include <string.h>
#include <wchar.h>

int keytext_utf8(const unsigned char *p, size_t n, uint32_t *cp)
{
	return keytext_rule_utf8(p, n, cp);
}

int keytext_from_bytes(const void *key, size_t len, char *out, size_t outsz, unsigned flags)
{
	return keytext_rule_from_bytes(key, len, out, outsz, !!(flags & KEYTEXT_ASCII));
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	     : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

ssize_t keytext_to_bytes(const char *text, unsigned char *out, size_t outsz)
{
	size_t n = 0;
	for (const char *s = text; *s; n++) {
		if (n >= outsz)
			return -1;
		if (*s != '\\') {
			out[n] = (unsigned char)*s++;
		} else if (s[1] == '\\') {
			out[n] = '\\';
			s += 2;
		} else if (s[1] == 'x' && hexval(s[2]) >= 0 && hexval(s[3]) >= 0) {
			out[n] = (unsigned char)(hexval(s[2]) << 4 | hexval(s[3]));
			s += 4;
		} else {
			return -1; /* not a key text: a lone backslash */
		}
	}
	return (ssize_t)n;
}

int keytext_from_module(const char *escaped, char *out, size_t outsz, unsigned flags)
{
	/* The modules write bytes outside 0x21..0x7e and every backslash as
	 * \xNN (their keys travel space-separated); a key is at most 250
	 * bytes, so 1024 is room for any. */
	unsigned char raw[1024];
	size_t n = 0;
	for (const char *s = escaped; *s && n < sizeof(raw); n++) {
		if (s[0] == '\\' && s[1] == 'x' && hexval(s[2]) >= 0 && hexval(s[3]) >= 0) {
			raw[n] = (unsigned char)(hexval(s[2]) << 4 | hexval(s[3]));
			s += 4;
		} else {
			raw[n] = (unsigned char)*s++;
		}
	}
	return keytext_from_bytes(raw, n, out, outsz, flags);
}

/* Widths are Unicode's (glibc's C.UTF-8 tables), whatever the user's
 * locale: the -C table and mcsnoop align the same for everyone, and the
 * full-screen view agrees with them.  The locale object is made once and
 * used for this thread only (uselocale), never installed globally. */
static locale_t utf8;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;

static void utf8_open(void)
{
	utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

static int cp_width(uint32_t cp)
{
	pthread_once(&utf8_once, utf8_open);
	if (cp < 0x80)
		return cp >= 0x20 && cp < 0x7f ? 1 : 0;
	if (!utf8)
		return 1; /* no table: every character one column */
	locale_t old = uselocale(utf8);
	int w = wcwidth((wchar_t)cp);
	uselocale(old);
	return w < 0 ? 1 : w; /* unassigned: terminals show one cell, a box */
}

/* The next unit of a key text at s: an escape (\xHH, \\) or a character
 * with the zero-width ones that follow it (combining marks go with their
 * base).  Its length in bytes; its columns in *cols.  s is NUL-terminated,
 * and a character is read no further than its first byte that is not a
 * continuation byte (the NUL is not), so each read is bounded by 4 rather
 * than by a strlen() per unit, which made a long key's width quadratic. */
static size_t next_unit(const char *s, int *cols)
{
	const unsigned char *p = (const unsigned char *)s;
	if (p[0] == '\\') {
		size_t n = p[1] == 'x' && p[2] && p[3] ? 4 : p[1] ? 2 : 1;
		*cols = (int)n;
		return n;
	}
	uint32_t cp;
	int n = keytext_utf8(p, 4, &cp);
	if (n <= 0) { /* not a key text: a byte, one column */
		*cols = 1;
		return 1;
	}
	*cols = cp_width(cp);
	size_t used = (size_t)n;
	for (;;) {
		int m = keytext_utf8(p + used, 4, &cp);
		if (m <= 0 || cp_width(cp) != 0 || cp < 0x80)
			break;
		used += (size_t)m;
	}
	return used;
}

int keytext_width(const char *text)
{
	int w = 0, c;
	for (size_t i = 0; text[i]; i += next_unit(text + i, &c), w += c)
		;
	return w;
}

size_t keytext_fit(const char *text, int cols, int *width)
{
	size_t i = 0;
	int w = 0, c;
	while (text[i]) {
		size_t n = next_unit(text + i, &c);
		if (w + c > cols)
			break;
		w += c;
		i += n;
	}
	if (width)
		*width = w;
	return i;
}

char *keytext_pad(char *out, size_t outsz, const char *text, int cols)
{
	int w, cut = 0;
	if (cols < 0)
		cols = 0;
	size_t n = keytext_fit(text, cols, &w);
	if (text[n] && cols > 0) { /* cut: a '~' so it is not taken for a shorter key */
		n = keytext_fit(text, cols - 1, &w);
		cut = 1;
	}
	snprintf(out, outsz, "%.*s%s%*s", (int)n, text, cut ? "~" : "", cols - w - cut, "");
	return out;
}

void keytext_json(FILE *f, const char *text)
{
	const unsigned char *p = (const unsigned char *)text;
	size_t left = strlen(text);
	fputc('"', f);
	while (left) {
		uint32_t cp;
		int n = keytext_utf8(p, left, &cp);
		if (n <= 0) /* not from a key text (a target's name): one code point a byte */
			fprintf(f, "\\u%04x", *p);
		else if (cp == '"' || cp == '\\')
			fprintf(f, "\\%c", *p);
		else if (cp < 0x20 || cp == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fwrite(p, 1, (size_t)n, f);
		n = n > 0 ? n : 1;
		p += n;
		left -= (size_t)n;
	}
	fputc('"', f);
}
