/* SPDX-License-Identifier: MIT */
/* One line of memcached's watch stream, parsed (the stream and what the
 * tools do with it: mcwatch.c).  memcached 1.6.18's logger.c writes
 *
 *   ts=SEC.USEC gid=N type=item_get key=K status=found clsid=N cfd=N size=N
 *   ts=SEC.USEC gid=N type=item_store key=K status=stored cmd=set ttl=N clsid=N cfd=N size=N
 *   skipped=N
 *
 * USEC is "%d" microseconds, not zero-padded (.5 is 5 us).  K is
 * URI-encoded: every byte but [A-Za-z0-9._~-] as %XX (upper-case hex), so
 * café is caf%C3%A9 and a binary key is exact; it is decoded here, once,
 * and the tools show the bytes by the key text rule (keytext.c).
 *
 * The stream is the target's: a memcached that is not one, or that was
 * taken over, writes anything.  So a field is taken only as memcached
 * writes it: numbers are decimal digits within their bounds, the key
 * decodes to at most 250 bytes; an item line that breaks a rule is no
 * event (3: the caller counts it).  What stays text (cmd, status) is
 * bytes without a space, shown by the key text rule too, never raw. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "common.h"

/* Bounds no memcached reaches: seconds to the year 2286 (their
 * nanoseconds fit 64 bits), item sizes (memcached's -I stops at 1 GB),
 * descriptors. */
#define TS_SEC_MAX 9999999999ull
#define SIZE_MAX_BYTES (1ull << 40)
#define CFD_MAX 0x7fffffffull

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0'
	     : c >= 'a' && c <= 'f' ? c - 'a' + 10
	     : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The decimal number of len bytes at s, at most max: 0 and *v, or -1 for
 * anything else (a sign, no digits, a digit too many). */
static int number(const char *s, size_t len, unsigned long long max, unsigned long long *v)
{
	unsigned long long n = 0;
	if (len == 0 || len > 20)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9' || n > (max - (unsigned)(s[i] - '0')) / 10)
			return -1;
		n = n * 10 + (unsigned)(s[i] - '0');
	}
	*v = n;
	return 0;
}

/* Where the value of " name=" starts in line, and its length (up to the
 * next space) in *len; NULL if absent. */
static const char *field_at(const char *line, const char *name, size_t *len)
{
	size_t n = strlen(name);
	for (const char *p = line; (p = strstr(p, name)); p += n) {
		if ((p != line && p[-1] != ' ') || p[n] != '=')
			continue;
		p += n + 1;
		*len = strcspn(p, " ");
		return p;
	}
	return NULL;
}

/* The value of name into out: 0, or -1 if absent or too long. */
static int field(const char *line, const char *name, char *out, size_t outsz)
{
	size_t len;
	const char *p = field_at(line, name, &len);
	if (!p || len >= outsz)
		return -1;
	memcpy(out, p, len);
	out[len] = '\0';
	return 0;
}

/* A numeric field: 0 and *v; 1 if absent; -1 if not a number in bounds. */
static int field_number(const char *line, const char *name, unsigned long long max,
			unsigned long long *v)
{
	size_t len;
	const char *p = field_at(line, name, &len);
	if (!p)
		return 1;
	return number(p, len, max, v);
}

/* The key's URI encoding of len bytes at in, decoded into out: 0, or -1
 * for a broken %XX or more than outsz bytes.  Other bytes are taken as
 * they come (an older memcached wrote keys raw; the key text shows any). */
static int uridecode(const char *in, size_t len, unsigned char *out, size_t outsz,
		     size_t *outlen)
{
	size_t n = 0;
	for (size_t i = 0; i < len; n++) {
		int hi, lo;
		if (n == outsz)
			return -1;
		if (in[i] == '%') {
			if (len - i < 3 || (hi = hexval(in[i + 1])) < 0 ||
			    (lo = hexval(in[i + 2])) < 0)
				return -1;
			out[n] = (unsigned char)(hi << 4 | lo);
			i += 3;
		} else {
			out[n] = (unsigned char)in[i++];
		}
	}
	*outlen = n;
	return 0;
}

/* "ts=SEC.USEC" at the line's start: 0 and the two, or -1. */
static int timestamp(const char *line, struct mcwatch_event *e)
{
	const char *s = line + 3, *end = s + strcspn(s, " ");
	const char *dot = memchr(s, '.', (size_t)(end - s));
	unsigned long long sec, usec;
	if (!dot || number(s, (size_t)(dot - s), TS_SEC_MAX, &sec) ||
	    number(dot + 1, (size_t)(end - dot - 1), 999999, &usec))
		return -1;
	e->ts_sec = (long long)sec;
	e->ts_usec = (long)usec;
	return 0;
}

int mcwatch_parse(const char *line, struct mcwatch_event *e, unsigned long long *skipped)
{
	char type[16];
	if (strncmp(line, "skipped=", 8) == 0)
		return number(line + 8, strlen(line + 8), ~0ull, skipped) == 0 ? 2 : 3;
	if (!strncmp(line, "ERROR", 5) || !strncmp(line, "CLIENT_ERROR", 12) ||
	    !strncmp(line, "SERVER_ERROR", 12) || !strncmp(line, "WATCHER_", 8))
		return -1;
	if (strncmp(line, "ts=", 3) != 0 || field(line, "type", type, sizeof(type)))
		return 0;
	memset(e, 0, sizeof(*e));
	if (!strcmp(type, "item_get")) {
		strcpy(e->cmd, "get");
	} else if (!strcmp(type, "item_store")) {
		e->store = 1;
		if (field(line, "cmd", e->cmd, sizeof(e->cmd)) || !e->cmd[0])
			return 3;
	} else {
		return 0; /* another kind of line: not for us */
	}
	size_t keylen;
	const char *key = field_at(line, "key", &keylen);
	unsigned long long size = 0, cfd;
	int has_cfd;
	if (!key || uridecode(key, keylen, e->key, sizeof(e->key), &e->keylen) ||
	    field(line, "status", e->status, sizeof(e->status)) || !e->status[0] ||
	    timestamp(line, e) || field_number(line, "size", SIZE_MAX_BYTES, &size) < 0 ||
	    (has_cfd = field_number(line, "cfd", CFD_MAX, &cfd)) < 0)
		return 3;
	e->size = (long)size;
	e->cfd = has_cfd == 0 ? (int)cfd : -1; /* older memcached: no cfd */
	return 1;
}

void mcwatch_escape(const unsigned char *key, size_t len, char *out, size_t outsz)
{
	size_t n = 0;
	for (size_t i = 0; i < len && n + 5 <= outsz; i++) {
		if (key[i] < 0x21 || key[i] > 0x7e || key[i] == '\\')
			n += (size_t)snprintf(out + n, 5, "\\x%02x", key[i]);
		else
			out[n++] = (char)key[i];
	}
	if (outsz)
		out[n < outsz ? n : outsz - 1] = '\0';
}
