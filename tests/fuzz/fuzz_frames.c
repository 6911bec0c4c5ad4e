/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the frame reader (lib/base/wire.c).
 *
 * Input: byte 0 picks the size limit, byte 1 seeds the chunk sizes, the
 * rest is the byte stream a peer sent.  Three readers must agree on it:
 *   1. xp_frame_parse over the whole stream at once;
 *   2. xp_frame_parse as a gathering reader calls it, the stream arriving
 *      in chunks (each call sees an exact-sized copy, so ASan catches a
 *      read past what has arrived);
 *   3. xp_recv_frame_within on a socketpair whose writer sent the stream
 *      and closed: it must end with EOF or "too big", never time out,
 *      since every byte is already there. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"

#define MAX_FRAMES 4096

/* What a reader made of the stream: frames as (offset, length), then how
 * it ended (1: needs more bytes, -EMSGSIZE: announced length too big). */
struct result {
	size_t off[MAX_FRAMES], len[MAX_FRAMES];
	size_t n;
	int end;
};

static const size_t limits[] = { 0, 1, 7, 64, 4096, XP_MAX_REQUEST, XP_MAX_REPLY };

static void fail(const char *why)
{
	fprintf(stderr, "fuzz_frames: %s\n", why);
	abort();
}

/* One parse over exactly buf[0, len): checks the invariants of a frame. */
static int parse_checked(const char *buf, size_t len, size_t max, size_t *plen,
			 size_t *consumed)
{
	char *copy = malloc(len ? len : 1);
	if (!copy)
		fail("out of memory");
	memcpy(copy, buf, len);
	const char *payload = NULL;
	int rc = xp_frame_parse(copy, len, max, &payload, plen, consumed);
	if (rc == 0) {
		if (payload != copy + 4 || *consumed != 4 + *plen || *plen > max ||
		    *consumed > len)
			fail("parsed frame breaks an invariant");
		if (*plen && memcmp(payload, buf + 4, *plen))
			fail("payload differs from the input");
	} else if (rc != 1 && rc != -EMSGSIZE) {
		fail("unexpected return value");
	}
	free(copy);
	return rc;
}

static void add_frame(struct result *r, size_t off, size_t len)
{
	if (r->n == MAX_FRAMES)
		fail("too many frames"); /* cannot happen: each takes 4 bytes */
	r->off[r->n] = off;
	r->len[r->n] = len;
	r->n++;
}

static void parse_whole(const char *s, size_t len, size_t max, struct result *r)
{
	size_t pos = 0, plen, consumed;
	int rc;

	while ((rc = parse_checked(s + pos, len - pos, max, &plen, &consumed)) == 0) {
		add_frame(r, pos + 4, plen);
		pos += consumed;
	}
	r->end = rc;
}

/* Chunk sizes from a tiny LCG seeded by the input: 1 to 16 bytes mostly,
 * sometimes a big gulp. */
static size_t next_chunk(uint32_t *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	uint32_t v = *seed >> 16;
	return (v & 7) == 0 ? 1 + (v >> 3) % 512 : 1 + (v >> 3) % 16;
}

static void parse_chunked(const char *s, size_t len, size_t max, uint32_t seed,
			  struct result *r)
{
	size_t start = 0, have = 0, plen, consumed; /* buffered: s[start, have) */
	int rc = 1;

	while (have < len) {
		size_t c = next_chunk(&seed);
		have += c < len - have ? c : len - have;
		while ((rc = parse_checked(s + start, have - start, max, &plen,
					   &consumed)) == 0) {
			add_frame(r, start + 4, plen);
			start += consumed;
		}
		if (rc < 0)
			break; /* the reader drops the peer */
	}
	if (len == 0)
		rc = parse_checked(s, 0, max, &plen, &consumed);
	r->end = rc;
}

static void recv_socketpair(const char *s, size_t *len, size_t max, struct result *r)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		fail("socketpair");
	/* Whatever does not fit in the socket buffer is left out of the
	 * comparison rather than blocking this single thread. */
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	size_t sent = 0;
	while (sent < *len) {
		ssize_t n = write(sv[1], s + sent, *len - sent);
		if (n <= 0)
			break;
		sent += (size_t)n;
	}
	*len = sent;
	close(sv[1]);

	size_t pos = 0;
	for (;;) {
		char *buf = (char *)1;
		size_t n = 1;
		errno = 0;
		int rc = xp_recv_frame_within(sv[0], &buf, &n, max, 0);
		if (rc == 0) {
			if (!buf || buf[n] != '\0' || n > max || pos + 4 + n > sent ||
			    (n && memcmp(buf, s + pos + 4, n)))
				fail("received frame differs from what was sent");
			add_frame(r, pos + 4, n);
			pos += 4 + n;
			free(buf);
			continue;
		}
		if (buf != NULL || n != 0)
			fail("failed receive left a buffer");
		if (rc == -1 && errno == ETIMEDOUT)
			fail("timed out with every byte already sent");
		if (rc == -1 && errno != 0)
			fail("I/O error on a socketpair");
		r->end = rc == -2 ? -EMSGSIZE : 1;
		break;
	}
	close(sv[0]);
}

static void compare(const struct result *a, const struct result *b, const char *what)
{
	if (a->n != b->n || a->end != b->end)
		fail(what);
	for (size_t i = 0; i < a->n; i++)
		if (a->off[i] != b->off[i] || a->len[i] != b->len[i])
			fail(what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct result whole, chunked, received;

	if (size < 2)
		return 0;
	size_t max = limits[data[0] % (sizeof(limits) / sizeof(limits[0]))];
	uint32_t seed = data[1];
	const char *s = (const char *)data + 2;
	size_t len = size - 2;

	memset(&whole, 0, sizeof(whole));
	memset(&chunked, 0, sizeof(chunked));
	parse_whole(s, len, max, &whole);
	parse_chunked(s, len, max, seed, &chunked);
	compare(&whole, &chunked, "chunked parse differs from the whole-buffer parse");

	/* The socket reader sees what the writer got out; compare it with a
	 * parse of that same prefix. */
	size_t sent = len;
	memset(&received, 0, sizeof(received));
	recv_socketpair(s, &sent, max, &received);
	if (sent != len) {
		memset(&whole, 0, sizeof(whole));
		parse_whole(s, sent, max, &whole);
	}
	compare(&whole, &received, "recv_frame differs from xp_frame_parse");
	return 0;
}
