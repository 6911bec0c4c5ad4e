/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the reader of memcached's watch stream
 * (tools/common/mcwatch_line.c and mcwatch.c): the stream is the
 * target's, and mcsnoop and mctop print what it says.
 *
 * Every input is taken two ways:
 *   1. each of its lines by mcwatch_parse: an event holds to memcached's
 *      bounds (key, numbers, cmd and status without a space), and its key
 *      and cmd as the tools show them (keytext.c) are valid UTF-8 without
 *      a control, reverse to the exact bytes, and make a valid JSON string;
 *   2. as a stream, through mcwatch_next over a socket pair: written in
 *      chunks (byte 1 sets their size, 16 to 4096 bytes, at most ~64 of
 *      them; byte 0 how many times the rest is repeated, so that lines
 *      longer than MCWATCH_LINE_MAX occur), read with no wait between
 *      chunks, until the writer closes; every event
 *      handed out holds the same bounds and its time lies between the
 *      watch's start and now.  What the reader says on stderr goes to
 *      /dev/null (sanitizer reports still reach libFuzzer). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../tools/common/common.h"

static FILE *real_stderr; /* stderr is /dev/null while the reader runs */

static void fail(const char *why)
{
	fprintf(real_stderr ? real_stderr : stderr, "fuzz_watch: %s\n", why);
	abort();
}

/* Is s (len bytes) one JSON string, quotes included, with no control? */
static int json_string(const char *s, size_t len)
{
	if (len < 2 || s[0] != '"' || s[len - 1] != '"')
		return 0;
	for (size_t i = 1; i < len - 1; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f || c == '"')
			return 0;
		if (c != '\\')
			continue;
		if (++i >= len - 1)
			return 0;
		if (s[i] == 'u') {
			if (i + 4 >= len - 1 || strspn(s + i + 1, "0123456789abcdefABCDEF") < 4)
				return 0;
			i += 4;
		} else if (!strchr("\"\\/bfnrt", s[i])) {
			return 0;
		}
	}
	return 1;
}

/* The text the tools show for len bytes: checked as keytext.c promises. */
static void shown(const void *bytes, size_t len)
{
	char text[4 * MCWATCH_KEY_MAX + 1];
	unsigned char back[MCWATCH_KEY_MAX];
	keytext_from_bytes(bytes, len, text, sizeof(text), 0);
	const unsigned char *p = (const unsigned char *)text;
	for (size_t left = strlen(text); left;) {
		uint32_t cp;
		int n = keytext_utf8(p, left, &cp);
		if (n <= 0 || cp <= 0x20 || (cp >= 0x7f && cp <= 0x9f))
			fail("a shown field holds a byte outside UTF-8, a control or a space");
		p += n;
		left -= (size_t)n;
	}
	ssize_t n = keytext_to_bytes(text, back, sizeof(back));
	if (n != (ssize_t)len || memcmp(back, bytes, len) != 0)
		fail("a shown field does not reverse to its bytes");
	char *json;
	size_t jlen;
	FILE *f = open_memstream(&json, &jlen);
	if (!f)
		fail("out of memory");
	keytext_json(f, text);
	fclose(f);
	if (!json_string(json, jlen))
		fail("a shown field is not one JSON string");
	free(json);
}

static void check(const struct mcwatch_event *e)
{
	if (e->keylen > MCWATCH_KEY_MAX || e->ts_usec < 0 || e->ts_usec > 999999 || e->ts_sec < 0 ||
	    e->size < 0 || e->cfd < -1 || !e->cmd[0] || !e->status[0] ||
	    memchr(e->cmd, ' ', strlen(e->cmd)) || memchr(e->status, ' ', strlen(e->status)))
		fail("an event out of memcached's bounds was taken");
	shown(e->key, e->keylen);
	shown(e->cmd, strlen(e->cmd));
}

static void lines(const char *text)
{
	for (const char *line = text; *line;) {
		size_t n = strcspn(line, "\n");
		char *one = strndup(line, n);
		if (!one)
			fail("out of memory");
		struct mcwatch_event e;
		unsigned long long skipped;
		if (mcwatch_parse(one, &e, &skipped) == 1)
			check(&e);
		free(one);
		line += n + (line[n] == '\n');
	}
}

static unsigned long long mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* Every event waiting now; -1 once the stream ended. */
static int drain(struct mcwatch *w)
{
	struct mcwatch_event e;
	int rc;
	while ((rc = mcwatch_next(w, &e, 0, "fuzz_watch")) == 1) {
		check(&e);
		if (e.time_ns < w->opened_ns || e.time_ns > mono_ns())
			fail("an event's time lies outside the watch");
	}
	return rc;
}

static void stream(const uint8_t *data, size_t size)
{
	if (size < 2)
		return;
	size_t times = 1 + data[0] % 8, chunk = (1 + (size_t)data[1]) * 16;
	data += 2;
	size -= 2;
	if (chunk < size * times / 64 + 1) /* at most ~64 writes: syscalls are the cost */
		chunk = size * times / 64 + 1;
	int sv[2];
	struct mcwatch *w = malloc(sizeof(*w));
	if (!w || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
		fail("no socket pair");
	if (mcwatch_init(w, "fuzz_watch") != 0)
		fail("out of memory");
	w->fd = sv[0];
	int ended = 0;
	for (size_t t = 0; t < times && !ended; t++)
		for (size_t off = 0; off < size && !ended; off += chunk) {
			size_t n = size - off < chunk ? size - off : chunk;
			if (write(sv[1], data + off, n) != (ssize_t)n)
				fail("the socket pair took less than a chunk");
			ended = drain(w) < 0; /* an error line ends it */
		}
	close(sv[1]);
	while (!ended)
		ended = drain(w) < 0;
	mcwatch_flush(w); /* the held-back gets, as the tools do at the end */
	drain(w);
	mcwatch_close(w);
	free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	if (!null && !(null = fopen("/dev/null", "w")))
		fail("cannot open /dev/null");
	char *text = malloc(size + 1);
	if (!text)
		fail("out of memory");
	memcpy(text, data, size);
	text[size] = '\0';
	lines(text);
	free(text);
	real_stderr = stderr; /* the reader's messages, not libFuzzer's */
	stderr = null;
	stream(data, size);
	stderr = real_stderr;
	return 0;
}
