/* SPDX-License-Identifier: MIT */
/* The memcached text and binary protocols, as much as mcload speaks:
 * get (one key, or a multi-get: "get k1 k2 ..." / getkq... noop) and set.
 * Requests are appended to a byte buffer; responses are parsed
 * incrementally, one request's response at a time, in order. */
#ifndef MCLOAD_PROTO_H
#define MCLOAD_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "mcload.h"

struct buf {
	char *p;
	size_t len;               /* bytes held */
	size_t off;               /* bytes already written out */
	size_t cap;
};

/* Room for N more bytes; returns where they go (exits when out of memory). */
char *buf_reserve(struct buf *b, size_t n);

enum req_kind { REQ_GET, REQ_SET };

/* A request sent and not yet answered. */
struct pending {
	uint64_t t;               /* intended send time, ns */
	uint16_t width;           /* keys asked for (gets) */
	uint8_t kind;
};

void proto_get(const struct config *cfg, struct buf *out, const uint64_t *keys, unsigned n);
void proto_set(const struct config *cfg, struct buf *out, uint64_t key,
	       const char *value, unsigned vlen);

struct outcome {
	unsigned hits, misses;
	unsigned error;           /* 1: the server answered with an error */
};

/* Where the parser is inside the current response. */
struct parser {
	uint64_t skip;            /* value bytes still to pass over */
	unsigned hits;            /* of the current multi-get so far */
	unsigned errors;          /* error statuses inside the current response */
	int ready;                /* binary: done once the body is skipped */
	struct outcome done;
};

/* Consume bytes of DATA[0..LEN) belonging to FRONT's response; *USED says
 * how many.  Returns 1 when that response is complete (OUT filled, parser
 * reset), 0 when more bytes are needed, -1 on a protocol violation. */
int proto_parse(enum mc_proto proto, struct parser *ps, const struct pending *front,
		const char *data, size_t len, size_t *used, struct outcome *out);

#endif
