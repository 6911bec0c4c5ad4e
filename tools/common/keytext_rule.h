/* SPDX-License-Identifier: MIT */
/* The key text rule (keytext.c says it) as inline code with no other
 * dependency, so that a probe module compiled on its own (modules/mclat.c
 * names kept requests with their key) writes a key exactly as the tools
 * show it. */
#ifndef XP_KEYTEXT_RULE_H
#define XP_KEYTEXT_RULE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The length of the valid UTF-8 character at p (its code point in *cp), or 0. */
static inline int keytext_rule_utf8(const unsigned char *p, size_t n, uint32_t *cp)
{
	if (n == 0)
		return 0;
	unsigned char c = p[0];
	int len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
		: c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	if (len == 0 || (size_t)len > n)
		return 0;
	uint32_t v = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
	for (int i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (p[i] & 0x3f);
	}
	/* Overlong three- and four-byte forms, surrogates, past U+10FFFF
	 * (two-byte overlongs were refused by the lead byte above). */
	if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10ffff)) ||
	    (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

/* Escaped although valid: controls, and the ASCII space (see the top). */
static inline int keytext_rule_escaped(uint32_t cp)
{
	return cp <= 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

/* KEY as its text into out (whole units, NUL-terminated); ascii: every byte
 * past 0x7f escaped too.  1 if the text is not the key's bytes. */
static inline int keytext_rule_from_bytes(const void *key, size_t len, char *out, size_t outsz,
					  int ascii)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = key;
	size_t o = 0;
	int escaped = 0;
	if (outsz == 0)
		return 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		int n = keytext_rule_utf8(p + i, len - i, &cp);
		char unit[5];
		size_t ulen;
		if (n > 0 && !keytext_rule_escaped(cp) && cp != '\\' && !(n > 1 && ascii)) {
			memcpy(unit, p + i, (size_t)n);
			ulen = (size_t)n;
		} else if (n == 1 && cp == '\\') {
			memcpy(unit, "\\\\", 2);
			ulen = 2;
			n = 1;
		} else { /* one byte at a time: each is reversible on its own */
			unit[0] = '\\';
			unit[1] = 'x';
			unit[2] = hex[p[i] >> 4];
			unit[3] = hex[p[i] & 15];
			ulen = 4;
			n = 1;
		}
		if (o + ulen >= outsz) /* whole units only: a cut text still reverses */
			break;
		memcpy(out + o, unit, ulen);
		o += ulen;
		escaped |= ulen != (size_t)n;
		i += (size_t)n;
	}
	out[o] = '\0';
	return escaped;
}

#endif
