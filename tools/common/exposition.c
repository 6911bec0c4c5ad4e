/* SPDX-License-Identifier: MIT */
/* Writing the Prometheus text format (0.0.4) and OpenMetrics 1.0, the two
 * a scraper may ask for: the pieces every exporter's renderer needs, so
 * that each tool (mctop, mclat) writes only its own families. */
#include "common.h"

#include <math.h>
#include <string.h>

/* Integers exactly (counts stay below 2^53), the rest with 15 digits, and
 * the spellings both formats accept for the non-finite. */
void expo_value(FILE *f, double v)
{
	if (isnan(v))
		fputs("NaN", f);
	else if (isinf(v))
		fputs(v > 0 ? "+Inf" : "-Inf", f);
	else if (v > -9e15 && v < 9e15 && v == (double)(long long)v)
		fprintf(f, "%lld", (long long)v);
	else
		fprintf(f, "%.15g", v);
}

/* Backslash, double quote and newline escaped as both formats require.
 * Valid UTF-8 is written as it is, so a key's label is its key text
 * (keytext.c: what mctop shows) and Prometheus answers with the same
 * text.  A byte outside valid UTF-8 or a control, which a key text never
 * holds but a target's name might, becomes \xNN in the value, as in a key
 * text: the exposition stays valid UTF-8 and one line per sample. */
void expo_label(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t left = strlen(s);
	while (left) {
		uint32_t cp;
		int n = keytext_utf8(p, left, &cp);
		if (n > 0 && cp == '\\') {
			fputs("\\\\", f);
		} else if (n > 0 && cp == '"') {
			fputs("\\\"", f);
		} else if (n > 0 && cp == '\n') {
			fputs("\\n", f);
		} else if (n > 0 && cp >= 0x20 && !(cp >= 0x7f && cp <= 0x9f)) {
			fwrite(p, 1, (size_t)n, f);
		} else {
			fprintf(f, "\\\\x%02x", *p);
			n = 1;
		}
		p += n;
		left -= (size_t)n;
	}
}

/* Sample names carry a suffix by type: a counter's samples end in _total
 * and an info's in _info. */
const char *expo_suffix(const char *type)
{
	return !strcmp(type, "counter") ? "_total" : !strcmp(type, "info") ? "_info" : "";
}

/* OpenMetrics names the family without the suffix; the Prometheus 0.0.4
 * format has no info type (a gauge stands in) and names every family by
 * its samples. */
void expo_family(FILE *f, enum expo_format fmt, const char *name, const char *type,
		 const char *help)
{
	const char *sfx = fmt == EXPO_OPENMETRICS ? "" : expo_suffix(type);
	if (fmt == EXPO_PROMETHEUS && !strcmp(type, "info"))
		type = "gauge";
	fprintf(f, "# HELP %s%s %s\n# TYPE %s%s %s\n", name, sfx, help, name, sfx, type);
}

void expo_single(FILE *f, enum expo_format fmt, const char *name, const char *type,
		 const char *help, double v)
{
	expo_family(f, fmt, name, type, help);
	fprintf(f, "%s%s ", name, expo_suffix(type));
	expo_value(f, v);
	fputc('\n', f);
}

void expo_end(FILE *f, enum expo_format fmt)
{
	if (fmt == EXPO_OPENMETRICS)
		fputs("# EOF\n", f);
}
