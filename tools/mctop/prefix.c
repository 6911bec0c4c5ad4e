/* SPDX-License-Identifier: MIT */
/* --prefix PAT: rows for groups of keys instead of keys.
 *
 * The rule (also in mctop(1)), applied to the key text (UTF-8, other
 * bytes \xHH: what the table shows):
 *   - PAT with a '(' is a POSIX extended regular expression; a key it
 *     matches belongs to the group named by the text of the first
 *     parenthesised subexpression (the whole match if that one did not
 *     take part);
 *   - any other PAT is a literal delimiter: a key belongs to the group
 *     named by its text up to and including the first occurrence of PAT
 *     ("--prefix :" puts user:1 and user:2 in "user:"; "--prefix user:"
 *     puts user:1 in "user:" and leaves session:9 alone).
 * A key that belongs to no group is a row of its own. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "core.h"

int mctop_prefix_init(struct mctop_prefix *p, const char *pat, char *why, size_t whysz)
{
	*p = (struct mctop_prefix){ .pat = pat, .is_regex = strchr(pat, '(') != NULL };
	if (!*pat) {
		snprintf(why, whysz, "--prefix: the pattern is empty");
		return -1;
	}
	if (!p->is_regex)
		return 0;
	int rc = regcomp(&p->re, pat, REG_EXTENDED);
	if (rc) {
		char msg[256];
		regerror(rc, &p->re, msg, sizeof(msg));
		snprintf(why, whysz, "--prefix: '%s' is not a regular expression: %s", pat, msg);
		p->is_regex = 0;
		return -1;
	}
	return 0;
}

void mctop_prefix_free(struct mctop_prefix *p)
{
	if (p->is_regex)
		regfree(&p->re);
	p->is_regex = 0;
}

int mctop_prefix_group(const struct mctop_prefix *p, const char *key, char *out, size_t outsz)
{
	const char *start;
	size_t len;
	if (p->is_regex) {
		regmatch_t mt[2];
		if (regexec(&p->re, key, 2, mt, 0) != 0)
			return -1;
		int i = mt[1].rm_so >= 0 ? 1 : 0;
		start = key + mt[i].rm_so;
		len = (size_t)(mt[i].rm_eo - mt[i].rm_so);
	} else {
		const char *hit = strstr(key, p->pat);
		if (!hit)
			return -1;
		start = key;
		len = (size_t)(hit - key) + strlen(p->pat);
	}
	if (len == 0 || len >= outsz)
		return -1;
	memcpy(out, start, len);
	out[len] = '\0';
	return 0;
}

/* Add b's counts to a (a group); its latency is the mean weighted by the
 * commands each measured (the histogram's samples). */
static void merge(struct mctop_key *a, const struct mctop_key *b)
{
	uint64_t na = 0, nb = 0;
	for (int h = 0; h < MCTOP_HIST; h++) {
		na += a->hist[h];
		nb += b->hist[h];
		a->hist[h] += b->hist[h];
	}
	if (b->lat_us >= 0)
		a->lat_us = a->lat_us >= 0 && na + nb
				    ? (a->lat_us * (double)na + b->lat_us * (double)nb) / (double)(na + nb)
				    : b->lat_us;
	if (a->objsize < 0) /* the first member's (the busiest: frames come by calls) */
		a->objsize = b->objsize;
	a->calls += b->calls;
	a->err += b->err;
	a->bytes += b->bytes;
	a->reqs += b->reqs;
	a->bw_kbps += b->bw_kbps;
	a->clients += b->clients;
	a->members += b->members;
	if (b->first_ns < a->first_ns)
		a->first_ns = b->first_ns;
	for (int c = 0; c < MC_NCMD; c++)
		a->ncmd[c] += b->ncmd[c];
}

int mctop_prefix_apply(const struct mctop_prefix *p, struct mctop_frame *f)
{
	size_t n = 0; /* rows kept so far, in f->keys[0..n) */
	for (size_t i = 0; i < f->nkeys; i++) {
		struct mctop_key k = f->keys[i];
		char group[MCTOP_KEY_ESCAPED];
		if (mctop_prefix_group(p, k.key, group, sizeof(group)) == 0) {
			memcpy(k.key, group, strlen(group) + 1);
			k.key_escaped = strchr(group, '\\') != NULL; /* a part of a key text */
		}
		size_t j = 0;
		while (j < n && strcmp(f->keys[j].key, k.key) != 0)
			j++;
		if (j < n) {
			merge(&f->keys[j], &k);
		} else {
			f->keys[n++] = k;
		}
	}
	f->nkeys = n;
	return 0;
}
