/* SPDX-License-Identifier: MIT */
/* Argument values: the ring's records (lib/trace/trace.h) put back
 * together, checked against the function's spec, laid out as uftrace
 * lays them out in a data directory, and shown as uftrace replay shows
 * them.  The target wrote the payload: every length is checked against
 * what is there, and a payload that is not exactly what the spec's items
 * make is refused whole.
 *
 * uftrace's layout (v0.13, as its recordings hold it): after a record
 * whose "more" bit is set, each item in the spec's order; an integer,
 * char, pointer or float takes its size rounded up to 4 bytes (the low
 * bytes of the register); a string a 16-bit length, its bytes (no NUL),
 * the whole rounded up to 4; the block is rounded up to 8.  A NULL string
 * is the text NULL, an unreadable pointer <0xADDR>, and a string of 98
 * bytes or more its first 95 and "...". */
#define _GNU_SOURCE
#include "xprobes.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))
#define LABEL_MASK (~((UINT64_C(1) << 56) - 1))
#define UFT_STR_MAX 98 /* uftrace cuts a string this long or longer */

enum { S_FULL = 0, S_CUT = 1, S_NULL = 2, S_BAD = 3 };

int ta_is_header(const struct tf_event *ev)
{
	return ev->kind == XP_TRACE_LOST && (ev->addr & LABEL_MASK) == (XP_TRACE_LABEL | XP_TRACE_LABEL_ARGS);
}

int ta_is_data(const struct tf_event *ev)
{
	return ev->kind == XP_TRACE_LOST &&
	       (ev->addr & LABEL_MASK) == (XP_TRACE_LABEL | XP_TRACE_LABEL_ARGDATA);
}

uint64_t ta_last_ns(const struct tf_event *ev, size_t n, uint64_t dflt)
{
	while (n--)
		if (!ta_is_data(&ev[n]))
			return ev[n].ns;
	return dflt;
}

size_t ta_collect(const struct tf_event *ev, size_t n, size_t i, uint8_t *buf, size_t *len)
{
	if (i >= n || !ta_is_header(&ev[i]))
		return 0;
	uint64_t nbytes = ev[i].addr & ~LABEL_MASK;
	if (!nbytes || nbytes > TA_PAYLOAD_MAX)
		return 0;
	size_t nrec = (size_t)(nbytes + 13) / 14;
	if (n - i - 1 < nrec)
		return 0; /* cut: the rest is not here */
	for (size_t k = 0; k < nrec; k++) {
		const struct tf_event *d = &ev[i + 1 + k];
		if (!ta_is_data(d))
			return 0;
		for (size_t j = 0; j < 14 && 14 * k + j < nbytes; j++)
			buf[14 * k + j] = (uint8_t)(j < 7 ? d->addr >> (8 * j) : d->ns >> (8 * (j - 6)));
	}
	*len = (size_t)nbytes;
	return 1 + nrec;
}

size_t ta_encode(const uint8_t *p, size_t len, uint64_t ns, struct tf_event *out)
{
	size_t nrec = (len + 13) / 14;
	out[0] = (struct tf_event){ .ns = ns, .addr = XP_TRACE_LABEL | XP_TRACE_LABEL_ARGS | len,
				    .kind = XP_TRACE_LOST };
	for (size_t k = 0; k < nrec; k++) {
		struct tf_event *d = &out[1 + k];
		*d = (struct tf_event){ .ns = XP_TRACE_LOST, .kind = XP_TRACE_LOST,
					.addr = XP_TRACE_LABEL | XP_TRACE_LABEL_ARGDATA };
		for (size_t j = 0; j < 14 && 14 * k + j < len; j++) {
			if (j < 7)
				d->addr |= (uint64_t)p[14 * k + j] << (8 * j);
			else
				d->ns |= (uint64_t)p[14 * k + j] << (8 * (j - 6));
		}
	}
	return 1 + nrec;
}

/* The items of s a payload holds: the arguments, or the return value. */
static size_t items_of(const struct ta_spec *s, int ret, const struct ta_item **it)
{
	*it = ret ? &s->ret : s->arg;
	return ret ? (size_t)s->has_ret : s->nargs;
}

static int is_str(const struct ta_item *it)
{
	return it->fmt == TA_STR && it->kind != TA_FPARG;
}

/* One value of a payload, checked. */
struct value {
	uint64_t raw;        /* a number, or a bad string's pointer */
	int status;          /* a string's */
	const uint8_t *str;
	size_t len;
};

/* The payload's values, one per item: 0, or -1 when it does not fit. */
static int payload_values(const struct ta_item *it, size_t nit, const uint8_t *p, size_t len,
		  struct value *v)
{
	size_t at = 0;
	for (size_t i = 0; i < nit; i++) {
		v[i] = (struct value){ 0 };
		if (it[i].fmt == TA_STRUCT) {
			/* One byte, 0: its place (uftrace's copy is not kept:
			 * it shows none of it either). */
			if (len - at < 1 || p[at++])
				return -1;
			continue;
		}
		if (!is_str(&it[i])) {
			if (len - at < 8)
				return -1;
			memcpy(&v[i].raw, p + at, 8);
			at += 8;
			continue;
		}
		if (len - at < 1)
			return -1;
		v[i].status = p[at++];
		switch (v[i].status) {
		case S_FULL:
		case S_CUT:
			if (len - at < 1 || p[at] > TA_STR_MAX || len - at - 1 < p[at])
				return -1;
			v[i].len = p[at];
			v[i].str = p + at + 1;
			at += 1 + v[i].len;
			break;
		case S_NULL:
			break;
		case S_BAD:
			if (len - at < 8)
				return -1;
			memcpy(&v[i].raw, p + at, 8);
			at += 8;
			break;
		default:
			return -1;
		}
	}
	return at == len ? 0 : -1;
}

/* ta_to_uftrace's layout: its size, or -1 (0 is the size of structs alone,
 * read from uftrace's recordings). */
static long to_uftrace(const struct ta_spec *s, int ret, const uint8_t *p, size_t len, uint8_t *out)
{
	const struct ta_item *it;
	size_t nit = items_of(s, ret, &it), at = 0;
	struct value v[TA_MAX_HELD];
	if (!nit || nit > TA_MAX_HELD || payload_values(it, nit, p, len, v))
		return -1;
	memset(out, 0, TA_UFT_MAX);
	for (size_t i = 0; i < nit; i++) {
		if (it[i].fmt == TA_STRUCT)
			continue;
		if (TA_UFT_MAX - at < 2 + UFT_STR_MAX + 8)
			return -1; /* more than uftrace's layout takes (a spec read from uftrace's -a) */
		if (!is_str(&it[i])) {
			size_t size = ALIGN_UP((size_t)it[i].size, 4);
			memcpy(out + at, &v[i].raw, size);
			at += size;
			continue;
		}
		char text[UFT_STR_MAX + 1];
		size_t n;
		if (v[i].status == S_NULL) {
			n = (size_t)snprintf(text, sizeof(text), "NULL");
		} else if (v[i].status == S_BAD) {
			n = (size_t)snprintf(text, sizeof(text), "<0x%" PRIx64 ">", v[i].raw);
		} else if (v[i].status == S_CUT || v[i].len >= UFT_STR_MAX) {
			memcpy(text, v[i].str, UFT_STR_MAX - 3);
			memcpy(text + UFT_STR_MAX - 3, "...", 3);
			n = UFT_STR_MAX;
		} else {
			memcpy(text, v[i].str, v[i].len);
			n = v[i].len;
		}
		uint16_t n16 = (uint16_t)n;
		memcpy(out + at, &n16, 2);
		memcpy(out + at + 2, text, n);
		at += ALIGN_UP(n + 2, 4);
	}
	return (long)ALIGN_UP(at, 8);
}

size_t ta_to_uftrace(const struct ta_spec *s, int ret, const uint8_t *p, size_t len, uint8_t *out)
{
	long n = to_uftrace(s, ret, p, len, out);
	return n > 0 ? (size_t)n : 0;
}

size_t ta_from_uftrace(const struct ta_spec *s, int ret, const uint8_t *u, size_t ulen,
		       uint8_t *p, size_t *used)
{
	const struct ta_item *it;
	size_t nit = items_of(s, ret, &it), at = 0, plen = 0;
	for (size_t i = 0; i < nit; i++) {
		if (TA_PAYLOAD_MAX - plen < 2 + TA_STR_MAX)
			return 0; /* more than a payload holds (a spec read from uftrace's -a) */
		if (it[i].fmt == TA_STRUCT) { /* uftrace's copy of a struct: skipped */
			size_t size = ALIGN_UP((size_t)it[i].size, 4);
			if (ulen - at < size)
				return 0;
			at += size;
			p[plen++] = 0;
			continue;
		}
		if (it[i].fmt == TA_LDOUBLE) { /* uftrace's 10 bytes: as a double */
			size_t size = ALIGN_UP(10u, 4);
			long double ld = 0;
			if (ulen - at < size)
				return 0;
			memcpy(&ld, u + at, 10);
			double d = (double)ld;
			memcpy(p + plen, &d, 8);
			at += size;
			plen += 8;
			continue;
		}
		if (!is_str(&it[i])) {
			size_t size = ALIGN_UP((size_t)it[i].size, 4);
			uint64_t raw = 0;
			if (ulen - at < size)
				return 0;
			memcpy(&raw, u + at, size < 8 ? size : 8);
			memcpy(p + plen, &raw, 8);
			at += size;
			plen += 8;
			continue;
		}
		uint16_t n;
		if (ulen - at < 2)
			return 0;
		memcpy(&n, u + at, 2);
		if (ulen - at - 2 < n)
			return 0;
		size_t keep = n > TA_STR_MAX ? TA_STR_MAX : n;
		p[plen++] = n > TA_STR_MAX ? S_CUT : S_FULL;
		p[plen++] = (uint8_t)keep;
		memcpy(p + plen, u + at + 2, keep);
		plen += keep;
		at += ALIGN_UP((size_t)n + 2, 4);
		if (at > ulen)
			at = ulen;
	}
	at = ALIGN_UP(at, 8);
	if (!nit || at > ulen)
		return 0;
	*used = at;
	return plen;
}

/* ---- text --------------------------------------------------------------- */

struct tout {
	char *buf;
	size_t size, len;
};

static void tput(struct tout *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tput(struct tout *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->buf + o->len, o->len < o->size ? o->size - o->len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

/* A byte of a string or char: printable ASCII as it is (and a tab, as
 * uftrace shows it), a newline \n, anything else \xHH (never a control
 * byte or half a UTF-8 sequence to the terminal). */
static void tput_char(struct tout *o, uint8_t c)
{
	if (c == '\n')
		tput(o, "\\n");
	else if (c == '\t' || (c >= 0x20 && c < 0x7f))
		tput(o, "%c", c);
	else
		tput(o, "\\x%02x", c);
}

/* A number of the item's size from uftrace's bytes u, as its replay shows it. */
static void tput_number(struct tout *o, const struct ta_item *it, const uint8_t *u)
{
	uint64_t v = 0;
	memcpy(&v, u, it->size);
	int64_t sv = it->size == 8 ? (int64_t)v : it->size == 4 ? (int32_t)v
		     : it->size == 2 ? (int16_t)v : (int8_t)v;
	uint64_t mask = it->size == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * it->size)) - 1;
	int hex = it->fmt == TA_HEX;
	switch (it->fmt) {
	case TA_AUTO:
		/* Big ones in hex, but a small negative int (its 32 bits
		 * zero-extended) as the number it is. */
		if ((int64_t)v > 100000 || (int64_t)v < -100000) {
			if (v > 0xffff0000u && v <= 0xffffffffu) {
				tput(o, "%d", (int32_t)v);
				return;
			}
			hex = 1;
		}
		break;
	case TA_UINT:
		if (v > 100000) {
			hex = 1;
			break;
		}
		tput(o, "%" PRIu64, v & mask);
		return;
	default:
		break;
	}
	if (hex)
		tput(o, "%s%" PRIx64, (v & mask) ? "0x" : "", v & mask);
	else
		tput(o, "%" PRId64, sv);
}

/* An enum's value by its name, from the definition after name (the
 * pool's "NAME\0{A=1,B,C=5}": a value without "=" is the previous plus
 * one, the first 0; of two names of one value the last, as uftrace), else
 * the number (uftrace shows flags as A|B: not here). */
static void tput_enum(struct tout *o, const char *name, int32_t v)
{
	const char *s = name ? name + strlen(name) + 1 : "", *found = NULL;
	size_t flen = 0;
	long long cur = -1;
	if (*s == '{')
		s++;
	while (*s && *s != '}') {
		size_t len = strcspn(s, "=,}");
		const char *e = s + len;
		if (cur == LLONG_MAX)
			break; /* a hostile definition: no more names */
		cur++;
		if (*e == '=') {
			char *end;
			cur = strtoll(e + 1, &end, 0);
			e = end;
		}
		if (cur == v) {
			found = s;
			flen = len;
		}
		s = e + (*e == ',');
		if (*e != ',' && *e != '}')
			break; /* not a definition this reads */
	}
	if (found)
		tput(o, "%.*s", (int)flen, found);
	else
		tput(o, "%d", v);
}

const char *ta_format(const struct ta_spec *s, int ret, const uint8_t *p, size_t len, char *buf,
		      size_t size)
{
	return ta_format_sym(s, ret, p, len, buf, size, NULL, NULL);
}

const char *ta_format_sym(const struct ta_spec *s, int ret, const uint8_t *p, size_t len,
			  char *buf, size_t size, const char *(*sym)(void *, uint64_t), void *ctx)
{
	uint8_t u[TA_UFT_MAX];
	const struct ta_item *it;
	size_t nit = items_of(s, ret, &it), at = 0;
	if (to_uftrace(s, ret, p, len, u) < 0)
		return NULL;
	struct tout o = { buf, size, 0 };
	buf[0] = '\0';
	for (size_t i = 0; i < nit; i++) {
		if (i)
			tput(&o, ", ");
		if (is_str(&it[i])) {
			uint16_t n;
			memcpy(&n, u + at, 2);
			tput(&o, "\"");
			for (size_t k = 0; k < n; k++)
				tput_char(&o, u[at + 2 + k]);
			tput(&o, "\"");
			at += ALIGN_UP((size_t)n + 2, 4);
			continue;
		}
		if (it[i].fmt == TA_STRUCT) {
			tput(&o, "%s{%s}", it[i].name ? it[i].name : "", it[i].size ? "..." : "");
			continue;
		}
		if (it[i].fmt == TA_ENUM) {
			int32_t v;
			memcpy(&v, u + at, 4);
			tput_enum(&o, it[i].name, v);
		} else if (it[i].fmt == TA_CHAR) {
			tput(&o, "'");
			tput_char(&o, u[at]);
			tput(&o, "'");
		} else if (it[i].fmt == TA_FLOAT || it[i].fmt == TA_LDOUBLE) {
			double d;
			float f;
			if (it[i].size == 4)
				memcpy(&f, u + at, 4), d = f;
			else
				memcpy(&d, u + at, 8);
			tput(&o, "%f", d);
		} else if (it[i].fmt == TA_PTR) {
			uint64_t v;
			memcpy(&v, u + at, 8);
			const char *name = v && sym ? sym(ctx, v) : NULL;
			if (name)
				tput(&o, "&%s", name);
			else if (v)
				tput(&o, "0x%" PRIx64, v);
			else
				tput(&o, "0");
		} else {
			tput_number(&o, &it[i], u + at);
		}
		at += ALIGN_UP((size_t)it[i].size, 4);
	}
	if (o.len >= size && size > 4)
		memcpy(buf + size - 4, "...", 4);
	return buf;
}
