/* SPDX-License-Identifier: MIT */
/* The module's "top N raw" text (format: mctop.h, MCTOP_RAW_VERSION) into
 * numbers.  Strict: a reply that does not have exactly the documented
 * shape is refused rather than half-read, since a silently wrong count is
 * worse than none. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

static int fail(char *why, size_t whysz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
	return -1;
}

/* A decimal number that fills [s, end) exactly. */
static int num_u(const char *s, const char *end, uint64_t *v)
{
	if (s == end || *s < '0' || *s > '9')
		return -1;
	char *stop;
	errno = 0;
	unsigned long long x = strtoull(s, &stop, 10);
	if (errno || stop != end)
		return -1;
	*v = x;
	return 0;
}

static int num_i(const char *s, const char *end, int64_t *v)
{
	uint64_t u;
	if (s < end && *s == '-') {
		if (num_u(s + 1, end, &u) || u > (uint64_t)INT64_MAX)
			return -1;
		*v = -(int64_t)u;
		return 0;
	}
	if (num_u(s, end, &u) || u > (uint64_t)INT64_MAX)
		return -1;
	*v = (int64_t)u;
	return 0;
}

/* "mctop 1 now_ns=N total=N ...": every documented field, in any order;
 * fields we do not know are skipped (a later module may add some). */
static int parse_header(const char *line, const char *end, struct mctop_raw *r, char *why,
			size_t whysz)
{
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
		{ "now_ns", offsetof(struct mctop_raw, now_ns) },
		{ "total", offsetof(struct mctop_raw, total) },
		{ "tracked", offsetof(struct mctop_raw, tracked) },
		{ "untracked", offsetof(struct mctop_raw, untracked) },
		{ "threads", offsetof(struct mctop_raw, threads) },
		{ "counters", offsetof(struct mctop_raw, counters) },
		{ "bytes", offsetof(struct mctop_raw, bytes) },
		{ "budget", offsetof(struct mctop_raw, budget) },
		{ "bound", offsetof(struct mctop_raw, bound) },
		{ "lat_every", offsetof(struct mctop_raw, lat_every) }, /* optional: the last */
	};
	enum { NFIELDS = sizeof(fields) / sizeof(fields[0]), NREQUIRED = NFIELDS - 1 };
	unsigned seen = 0;

	if ((size_t)(end - line) < 8 || strncmp(line, "mctop ", 6) != 0)
		return fail(why, whysz, "the module's answer does not start with 'mctop %d'",
			    MCTOP_RAW_VERSION);
	const char *p = line + 6, *w = p;
	while (w < end && *w != ' ')
		w++;
	uint64_t version;
	if (num_u(p, w, &version) || version != MCTOP_RAW_VERSION)
		return fail(why, whysz, "the module speaks version %.*s of the raw format, mctop %d",
			    (int)(w - p), p, MCTOP_RAW_VERSION);
	for (p = w; p < end; p = w) {
		while (p < end && *p == ' ')
			p++;
		for (w = p; w < end && *w != ' '; w++)
			;
		if (p == w)
			break;
		const char *eq = memchr(p, '=', (size_t)(w - p));
		if (!eq)
			return fail(why, whysz, "header field '%.*s' has no value", (int)(w - p), p);
		for (int i = 0; i < NFIELDS; i++) {
			if (strlen(fields[i].name) != (size_t)(eq - p) ||
			    strncmp(fields[i].name, p, (size_t)(eq - p)) != 0)
				continue;
			if (num_u(eq + 1, w, (uint64_t *)((char *)r + fields[i].off)))
				return fail(why, whysz, "header field '%.*s' is not a number",
					    (int)(w - p), p);
			seen |= 1u << i;
		}
	}
	for (int i = 0; i < NREQUIRED; i++)
		if (!(seen & (1u << i)))
			return fail(why, whysz, "the module's header lacks %s=", fields[i].name);
	if (!(seen & (1u << NREQUIRED)) || !r->lat_every)
		r->lat_every = 1;
	return 0;
}

/* KEY \t 8 numbers \t MC_NCMD counts \t h0,...,h31 */
static int parse_key(const char *line, const char *end, struct mctop_raw_key *k, char *why,
		     size_t whysz)
{
	const char *f[9 + MC_NCMD + 1], *fe[9 + MC_NCMD + 1];
	size_t n = 0;
	const char *p = line;
	for (;;) {
		const char *t = memchr(p, '\t', (size_t)(end - p));
		if (n == sizeof(f) / sizeof(f[0]))
			return fail(why, whysz, "a key line has more than %zu fields", n);
		f[n] = p;
		fe[n++] = t ? t : end;
		if (!t)
			break;
		p = t + 1;
	}
	if (n != sizeof(f) / sizeof(f[0]))
		return fail(why, whysz, "a key line has %zu fields, not %zu", n,
			    sizeof(f) / sizeof(f[0]));
	size_t klen = (size_t)(fe[0] - f[0]);
	if (klen == 0 || klen >= sizeof(k->key))
		return fail(why, whysz, "a key line's key is %zu bytes long", klen);
	memcpy(k->key, f[0], klen);
	k->key[klen] = '\0';
	uint64_t *u[] = { &k->calls, &k->err, NULL, &k->bytes, &k->lat_sum_ns,
			  &k->lat_n, &k->first_ns, &k->clients };
	for (size_t i = 1; i < 9; i++) {
		int bad = i == 3 ? num_i(f[i], fe[i], &k->objsize) : num_u(f[i], fe[i], u[i - 1]);
		if (bad)
			return fail(why, whysz, "field %zu of key %s is not a number", i + 1, k->key);
	}
	for (size_t c = 0; c < MC_NCMD; c++)
		if (num_u(f[9 + c], fe[9 + c], &k->ncmd[c]))
			return fail(why, whysz, "command count %zu of key %s is not a number", c + 1,
				    k->key);
	p = f[9 + MC_NCMD];
	for (size_t h = 0; h < MCTOP_HIST; h++) {
		const char *c = h + 1 < MCTOP_HIST ? memchr(p, ',', (size_t)(end - p)) : end;
		if (!c || num_u(p, c, &k->hist[h]))
			return fail(why, whysz, "the histogram of key %s is not %d numbers", k->key,
				    MCTOP_HIST);
		p = c + 1;
	}
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(struct mctop_raw_key *const *)a)->key,
		      (*(struct mctop_raw_key *const *)b)->key);
}

int mctop_raw_parse(const char *text, struct mctop_raw *r, char *why, size_t whysz)
{
	*r = (struct mctop_raw){ 0 };
	const char *end = strchr(text, '\n');
	if (!end)
		return fail(why, whysz, "the module's answer is not the raw format");
	if (parse_header(text, end, r, why, whysz))
		return -1;
	size_t cap = 0;
	for (const char *p = end + 1;; p = end + 1) {
		end = strchr(p, '\n');
		if (!end)
			end = p + strlen(p);
		if ((size_t)(end - p) == 3 && strncmp(p, "end", 3) == 0)
			break;
		if (!*p) {
			mctop_raw_free(r);
			return fail(why, whysz, "the module's answer was cut short (no 'end' line)");
		}
		if (r->nkeys == cap) {
			cap = cap ? 2 * cap : 64;
			void *grown = realloc(r->keys, cap * sizeof(*r->keys));
			if (!grown) {
				mctop_raw_free(r);
				return fail(why, whysz, "out of memory");
			}
			r->keys = grown;
		}
		if (parse_key(p, end, &r->keys[r->nkeys], why, whysz)) {
			mctop_raw_free(r);
			return -1;
		}
		r->nkeys++;
	}
	r->by_name = malloc((r->nkeys ? r->nkeys : 1) * sizeof(*r->by_name));
	if (!r->by_name) {
		mctop_raw_free(r);
		return fail(why, whysz, "out of memory");
	}
	for (size_t i = 0; i < r->nkeys; i++)
		r->by_name[i] = &r->keys[i];
	qsort(r->by_name, r->nkeys, sizeof(*r->by_name), by_name);
	return 0;
}

void mctop_raw_free(struct mctop_raw *r)
{
	free(r->keys);
	free(r->by_name);
	*r = (struct mctop_raw){ 0 };
}

const struct mctop_raw_key *mctop_raw_find(const struct mctop_raw *r, const char *key)
{
	size_t lo = 0, hi = r->nkeys;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(key, r->by_name[mid]->key);
		if (c == 0)
			return r->by_name[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* -c's words: one per enum mctop_cmd but "get" for hits and misses both. */
static const struct {
	const char *name;
	unsigned mask;
} cmd_words[] = {
	{ "get", 1u << MC_GET_HIT | 1u << MC_GET_MISS },
	{ "set", 1u << MC_SET },
	{ "add", 1u << MC_ADD },
	{ "replace", 1u << MC_REPLACE },
	{ "append", 1u << MC_APPEND },
	{ "prepend", 1u << MC_PREPEND },
	{ "cas", 1u << MC_CAS },
	{ "touch", 1u << MC_TOUCH },
	{ "incr", 1u << MC_INCR },
	{ "decr", 1u << MC_DECR },
	{ "delete", 1u << MC_DELETE },
};
enum { NWORDS = sizeof(cmd_words) / sizeof(cmd_words[0]) };

int mctop_cmd_mask(const char *list, unsigned *mask, char *why, size_t whysz)
{
	*mask = 0;
	for (const char *p = list;; p++) {
		size_t len = strcspn(p, ",");
		int found = 0;
		for (int i = 0; i < NWORDS && !found; i++)
			if (strlen(cmd_words[i].name) == len && !strncmp(p, cmd_words[i].name, len)) {
				*mask |= cmd_words[i].mask;
				found = 1;
			}
		if (!found)
			return fail(why, whysz,
				    "unknown command '%.*s' (known: get, set, add, replace, append, "
				    "prepend, cas, touch, incr, decr, delete)",
				    (int)len, p);
		p += len;
		if (!*p)
			return 0;
	}
}

void mctop_cmd_by(unsigned mask, char *out, size_t outsz)
{
	size_t n = 0;
	out[0] = '\0';
	for (int i = 0; i < NWORDS && mask; i++) {
		if ((mask & cmd_words[i].mask) != cmd_words[i].mask)
			continue;
		int w = snprintf(out + n, outsz - n, "%s%s", n ? "," : "by=", cmd_words[i].name);
		if (w < 0 || (size_t)w >= outsz - n)
			return;
		n += (size_t)w;
	}
}
