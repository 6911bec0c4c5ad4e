/* SPDX-License-Identifier: MIT */
/* Reply text comes from whatever answered on the socket: a module's
 * command, or something that is not an agent at all.  Printed raw, an
 * escape sequence could clear the screen, retitle the window, rewrite what
 * the user reads or, on some terminals, answer back as typed input.  So
 * every reply loses its escape sequences (whole, not only the ESC byte,
 * so no "[2J" litter is left), its control characters but newline and
 * tab, and C1 controls: U+0080..U+009F in UTF-8, and single bytes
 * 0x80..0x9f outside a UTF-8 character (0x9b is CSI to an 8-bit terminal).
 * Other bytes stay: a path in Latin-1 is still shown. */
#include "common.h"

#include <string.h>

#define ESC 0x1b
#define BEL 0x07

/* Where the escape sequence whose ESC precedes p ends.  A sequence cut
 * short by a control character ends there; that character is then judged
 * on its own. */
static const unsigned char *skip_escape(const unsigned char *p)
{
	if (*p == '[') { /* CSI: parameter and intermediate bytes, a final one */
		for (p++; *p >= 0x20 && *p <= 0x3f; p++)
			;
		return *p >= 0x40 && *p <= 0x7e ? p + 1 : p;
	}
	if (*p == ']' || *p == 'P' || *p == 'X' || *p == '^' || *p == '_') {
		/* OSC, DCS, SOS, PM, APC: a string up to BEL or ESC '\'. */
		for (p++; *p >= 0x20 || *p == '\t'; p++)
			;
		if (*p == BEL)
			return p + 1;
		return *p == ESC && p[1] == '\\' ? p + 2 : p;
	}
	for (; *p >= 0x20 && *p <= 0x2f; p++) /* intermediates: ESC ( B */
		;
	return *p >= 0x30 && *p <= 0x7e ? p + 1 : p;
}

/* Length of the valid UTF-8 character at p; 0 if there is none; -2 for
 * a C1 control (U+0080..U+009F) written in UTF-8. */
static int utf8_len(const unsigned char *p)
{
	int n = *p >= 0xc2 && *p <= 0xdf ? 2 : *p >= 0xe0 && *p <= 0xef ? 3
		: *p >= 0xf0 && *p <= 0xf4 ? 4 : 0;
	for (int i = 1; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n == 2 && p[0] == 0xc2 && p[1] <= 0x9f ? -2 : n;
}

char *sanitize_text(char *text)
{
	const unsigned char *in = (const unsigned char *)text;
	unsigned char *out = (unsigned char *)text;

	while (*in) {
		if (*in == ESC) {
			in = skip_escape(in + 1);
		} else if (*in >= 0x80) {
			int n = utf8_len(in);
			if (n > 0) {
				memmove(out, in, (size_t)n);
				out += n;
				in += n;
			} else if (n < 0 || *in <= 0x9f) {
				in += n < 0 ? 2 : 1; /* C1, in UTF-8 or as one 8-bit byte */
			} else {
				*out++ = *in++; /* Latin-1, say: shown, or a replacement mark */
			}
		} else if ((*in < 0x20 && *in != '\n' && *in != '\t') || *in == 0x7f) {
			in++;
		} else {
			*out++ = *in++;
		}
	}
	*out = '\0';
	return text;
}
