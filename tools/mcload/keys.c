/* SPDX-License-Identifier: MIT */
/* Key names.  Index i is "PREFIX<i in decimal>", or with --binary-keys
 * "PREFIX" followed by i as 8 big-endian bytes (so small indexes carry
 * NUL and other control bytes: only the binary protocol can send them). */
#include <string.h>

#include "mcload.h"

static size_t u64_decimal(uint64_t v, char *out)
{
	char tmp[20];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

size_t key_format(const struct config *cfg, uint64_t idx, char *out)
{
	memcpy(out, cfg->prefix, cfg->prefix_len);
	char *p = out + cfg->prefix_len;
	if (!cfg->binary_keys)
		return cfg->prefix_len + u64_decimal(idx, p);
	for (int i = 7; i >= 0; i--)
		*p++ = (char)(idx >> (8 * i));
	return cfg->prefix_len + 8;
}

void key_print_escaped(const struct config *cfg, uint64_t idx, int json, FILE *to)
{
	char key[MCLOAD_MAX_KEY + 1];
	size_t n = key_format(cfg, idx, key);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)key[i];
		/* Printable, and safe in both the TSV and the JSON form. */
		if (c > 0x20 && c < 0x7f && c != '\\' && c != '"')
			fputc(c, to);
		else
			fprintf(to, json ? "\\u%04x" : "\\x%02x", c);
	}
}
