/* SPDX-License-Identifier: MIT */
/* Requests and response parsing for the text and binary protocols. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

enum { BIN_GET = 0x00, BIN_SET = 0x01, BIN_NOOP = 0x0a, BIN_GETKQ = 0x0d };
enum { BIN_REQ = 0x80, BIN_RES = 0x81, BIN_HDR = 24 };
#define MAX_LINE 4096   /* far above any response line memcached sends */

char *buf_reserve(struct buf *b, size_t n)
{
	if (b->len + n > b->cap) {
		/* Drop what was written already before growing. */
		if (b->off) {
			memmove(b->p, b->p + b->off, b->len - b->off);
			b->len -= b->off;
			b->off = 0;
		}
		if (b->len + n > b->cap) {
			size_t cap = b->cap ? b->cap : 16384;
			while (cap < b->len + n)
				cap *= 2;
			char *p = realloc(b->p, cap);
			if (!p) {
				fputs("mcload: out of memory\n", stderr);
				exit(1);
			}
			b->p = p;
			b->cap = cap;
		}
	}
	return b->p + b->len;
}

static void be16(char *p, unsigned v)
{
	p[0] = (char)(v >> 8);
	p[1] = (char)v;
}

static void be32(char *p, uint32_t v)
{
	be16(p, v >> 16);
	be16(p + 2, v & 0xffff);
}

/* A binary request header; the body (extras, key, value) follows. */
static char *bin_header(struct buf *out, unsigned op, unsigned keylen, unsigned extlen,
			uint32_t bodylen)
{
	char *p = buf_reserve(out, BIN_HDR + bodylen);
	memset(p, 0, BIN_HDR);
	p[0] = (char)BIN_REQ;
	p[1] = (char)op;
	be16(p + 2, keylen);
	p[4] = (char)extlen;
	be32(p + 8, bodylen);
	out->len += BIN_HDR + bodylen;
	return p + BIN_HDR;
}

void proto_get(const struct config *cfg, struct buf *out, const uint64_t *keys, unsigned n)
{
	char key[MCLOAD_MAX_KEY];
	if (cfg->proto == PROTO_TEXT) {
		char *p = buf_reserve(out, 5 + n * (MCLOAD_MAX_KEY + 1));
		char *start = p;
		memcpy(p, "get", 3);
		p += 3;
		for (unsigned i = 0; i < n; i++) {
			*p++ = ' ';
			p += key_format(cfg, keys[i], p);
		}
		memcpy(p, "\r\n", 2);
		out->len += (size_t)(p + 2 - start);
		return;
	}
	if (n == 1) {
		size_t kl = key_format(cfg, keys[0], key);
		memcpy(bin_header(out, BIN_GET, (unsigned)kl, 0, (uint32_t)kl), key, kl);
		return;
	}
	/* Quiet gets answer only hits; the noop's answer closes the batch. */
	for (unsigned i = 0; i < n; i++) {
		size_t kl = key_format(cfg, keys[i], key);
		memcpy(bin_header(out, BIN_GETKQ, (unsigned)kl, 0, (uint32_t)kl), key, kl);
	}
	bin_header(out, BIN_NOOP, 0, 0, 0);
}

void proto_set(const struct config *cfg, struct buf *out, uint64_t k,
	       const char *value, unsigned vlen)
{
	char key[MCLOAD_MAX_KEY];
	size_t kl = key_format(cfg, k, key);
	if (cfg->proto == PROTO_TEXT) {
		char *p = buf_reserve(out, kl + vlen + 48);
		int hl = sprintf(p, "set %.*s 0 0 %u\r\n", (int)kl, key, vlen);
		memcpy(p + hl, value, vlen);
		memcpy(p + hl + vlen, "\r\n", 2);
		out->len += (size_t)hl + vlen + 2;
		return;
	}
	char *body = bin_header(out, BIN_SET, (unsigned)kl, 8, (uint32_t)(8 + kl + vlen));
	memset(body, 0, 8);   /* flags, expiry */
	memcpy(body + 8, key, kl);
	memcpy(body + 8 + kl, value, vlen);
}

static int starts(const char *line, size_t n, const char *word)
{
	size_t w = strlen(word);
	return n >= w && memcmp(line, word, w) == 0;
}

static int is(const char *line, size_t n, const char *word)
{
	return n == strlen(word) && memcmp(line, word, n) == 0;
}

static int is_error_line(const char *line, size_t n)
{
	return is(line, n, "ERROR") || starts(line, n, "CLIENT_ERROR ") ||
	       starts(line, n, "SERVER_ERROR ");
}

/* The <bytes> field of "VALUE <key> <flags> <bytes> [<cas>]", or -1. */
static long long value_bytes(const char *line, size_t n)
{
	size_t i = 0;
	for (int sp = 0; sp < 3; i++) {
		if (i >= n)
			return -1;
		if (line[i] == ' ')
			sp++;
	}
	long long v = 0;
	size_t start = i;
	for (; i < n && line[i] >= '0' && line[i] <= '9'; i++)
		v = v * 10 + (line[i] - '0');
	if (i == start || v > MCLOAD_MAX_VALUE * 2LL)
		return -1;
	return v;
}

static void finish(struct parser *ps, struct outcome *out, unsigned hits, unsigned misses,
		   unsigned error)
{
	out->hits = hits;
	out->misses = misses;
	out->error = error || ps->errors;
	ps->hits = 0;
	ps->errors = 0;
}

/* Pass over value bytes still owed; 1 when some are still to come. */
static int skipping(struct parser *ps, size_t len, size_t *pos)
{
	size_t n = len - *pos < ps->skip ? len - *pos : ps->skip;
	*pos += n;
	ps->skip -= n;
	return ps->skip != 0;
}

static int parse_text(struct parser *ps, const struct pending *front, const char *data,
		      size_t len, size_t *used, struct outcome *out)
{
	size_t pos = 0;
	for (;;) {
		if (skipping(ps, len, &pos)) {
			*used = pos;
			return 0;
		}
		const char *line = data + pos;
		const char *nl = memchr(line, '\n', len - pos);
		if (!nl) {
			*used = pos;
			return len - pos >= MAX_LINE ? -1 : 0;
		}
		size_t n = (size_t)(nl - line);
		if (n == 0 || line[n - 1] != '\r')
			return -1;
		n--;
		pos += n + 2;
		*used = pos;
		if (front->kind == REQ_GET) {
			if (starts(line, n, "VALUE ")) {
				long long b = value_bytes(line, n);
				if (b < 0)
					return -1;
				ps->skip = (uint64_t)b + 2;   /* data and its \r\n */
				ps->hits++;
				continue;
			}
			if (is(line, n, "END")) {
				finish(ps, out, ps->hits, front->width - ps->hits, 0);
				return 1;
			}
		} else if (is(line, n, "STORED")) {
			finish(ps, out, 0, 0, 0);
			return 1;
		} else if (is(line, n, "NOT_STORED") || is(line, n, "EXISTS") ||
			   is(line, n, "NOT_FOUND")) {
			finish(ps, out, 0, 0, 1);
			return 1;
		}
		if (is_error_line(line, n)) {
			finish(ps, out, ps->hits, 0, 1);
			return 1;
		}
		return -1;
	}
}

static unsigned rd16(const char *p)
{
	return (unsigned)(unsigned char)p[0] << 8 | (unsigned char)p[1];
}

static uint32_t rd32(const char *p)
{
	return (uint32_t)rd16(p) << 16 | rd16(p + 2);
}

static int parse_binary(struct parser *ps, const struct pending *front, const char *data,
			size_t len, size_t *used, struct outcome *out)
{
	size_t pos = 0;
	for (;;) {
		int more = skipping(ps, len, &pos);
		*used = pos;
		if (!more && ps->ready) {
			/* A response is complete only with its body. */
			*out = ps->done;
			ps->ready = 0;
			return 1;
		}
		if (more || len - pos < BIN_HDR)
			return 0;
		const char *h = data + pos;
		if ((unsigned char)h[0] != BIN_RES)
			return -1;
		unsigned op = (unsigned char)h[1], status = rd16(h + 6);
		ps->skip = rd32(h + 8);
		pos += BIN_HDR;
		*used = pos;
		if (front->kind == REQ_SET) {
			if (op != BIN_SET)
				return -1;
			finish(ps, &ps->done, 0, 0, status != 0);
			ps->ready = 1;
			continue;
		}
		if (front->width == 1) {
			if (op != BIN_GET)
				return -1;
			/* 0x0001: key not found, a miss, not an error. */
			finish(ps, &ps->done, status == 0, status == 1, status > 1);
			ps->ready = 1;
			continue;
		}
		if (op == BIN_GETKQ) {
			if (status == 0)
				ps->hits++;
			else if (status != 1)
				ps->errors++;
			continue;
		}
		if (op != BIN_NOOP)
			return -1;
		finish(ps, &ps->done, ps->hits, front->width - ps->hits, 0);
		ps->ready = 1;
		continue;
	}
}

int proto_parse(enum mc_proto proto, struct parser *ps, const struct pending *front,
		const char *data, size_t len, size_t *used, struct outcome *out)
{
	if (proto == PROTO_TEXT)
		return parse_text(ps, front, data, len, used, out);
	return parse_binary(ps, front, data, len, used, out);
}
