/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the tool's readers of what a target sends it
 * (tools/xprobes/trace_parse.c, then trace_format.c): a target is anyone's
 * process, and root's tool reads it.
 *
 * Every input is taken three ways:
 *   1. as the text of a `trace buffers` reply: what parses must hold to
 *      the bounds (tid, cap, no overlap) whatever the bytes;
 *   2. as the text of a `trace objects` reply: the same for sites, paths;
 *   3. as target memory: a clock (4 x 8 bytes), a buffer header and its
 *      records.  A header that passes trace_buf_check is decoded (records
 *      past the input's end are what a failed process_vm_readv would be:
 *      skipped) and printed in all four views, to /dev/null, so the call
 *      tree builder and the printers meet streams no agent writes;
 *   4. as a memcached key (tools/common/keytext.c, what mctop and mcsnoop
 *      show): its text must be valid UTF-8 without a control, reverse to
 *      the exact bytes, and fit and pad within any width; the same bytes
 *      as a module's escaped key must give a text too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/common/common.h"
#include "../../tools/xprobes/xprobes.h"

static void fail(const char *why)
{
	fprintf(stderr, "fuzz_tool_readers: %s\n", why);
	abort();
}

static void buffers(const char *text)
{
	struct trace_buffers b;
	char why[TRACE_WHY_SIZE];
	if (trace_parse_buffers(text, &b, why, sizeof(why)) != 0) {
		if (!why[0] || b.bufs || b.n)
			fail("a refused buffers reply left no reason, or something to free");
		return;
	}
	for (size_t i = 0; i < b.n; i++) {
		const struct trace_buf_ref *r = &b.bufs[i];
		if (r->tid <= 0 || r->cap > XP_TRACE_MAX_RECS)
			fail("a buffer out of bounds was taken");
		for (size_t j = 0; j < i; j++)
			if (b.bufs[j].addr == r->addr)
				fail("one buffer was taken twice");
	}
	trace_buffers_free(&b);
}

static void objects(const char *text)
{
	struct trace_object *objs;
	size_t n;
	char why[TRACE_WHY_SIZE];
	if (trace_parse_objects(text, &objs, &n, why, sizeof(why)) != 0) {
		if (!why[0] || objs || n)
			fail("a refused objects reply left no reason, or something to free");
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (objs[i].nsites > TRACE_MAX_SITES || !objs[i].path[0] ||
		    strchr(objs[i].path, '\n'))
			fail("an object out of bounds was taken");
	trace_objects_free(objs, n);
}

static const char *name(void *ctx, uint64_t addr)
{
	(void)ctx;
	return addr & 1 ? "odd;name" : "even\"name\\";
}

static void print(const struct tf_thread *th, uint64_t min_ns)
{
	static FILE *null;
	if (!null && !(null = fopen("/dev/null", "w")))
		fail("cannot open /dev/null");
	struct tf_trace t = { .threads = th, .nthreads = 1, .pid = 1, .origin_ns = 0,
			      .names = { name, name, NULL, NULL } };
	struct tf_filter f = { .min_ns = min_ns };
	if (tf_graph(null, &t, &f) || tf_chrome(null, &t, &f) || tf_folded(null, &t, &f) ||
	    tf_stat(null, &t, &f, TF_SORT_SELF))
		fail("a printer failed on a decoded trace");
}

static void memory(const uint8_t *data, size_t size)
{
	struct tf_clock c;
	struct xp_trace_buf h;
	if (size < sizeof(c) + sizeof(h))
		return;
	memcpy(&c, data, sizeof(c));
	memcpy(&h, data + sizeof(c), sizeof(h));
	size_t have = (size - sizeof(c) - sizeof(h)) / sizeof(struct xp_trace_rec);
	uint64_t first, end;
	char why[TRACE_WHY_SIZE];
	/* Listed with the cap it says, the case that reaches the decoder. */
	if (trace_buf_check(&h, h.cap, &first, &end, why, sizeof(why)) != 0) {
		if (!why[0])
			fail("a refused header left no reason");
		return;
	}
	if (first > end || end - first > h.cap || h.cap > XP_TRACE_MAX_RECS)
		fail("a header out of bounds was taken");
	uint64_t head = end - first; /* the records copied, in order */
	if (head > have)
		return; /* the tool's copy would fail: the records are not there */
	/* An exact-sized copy, so that ASan sees a read past the records. */
	struct xp_trace_rec *rec = malloc(head ? head * sizeof(*rec) : 1);
	if (!rec)
		fail("out of memory");
	memcpy(rec, data + sizeof(c) + sizeof(h), head * sizeof(*rec));
	struct tf_thread th;
	if (trace_buf_decode(&h, rec, head, &c, &th) != 0)
		fail("decoding failed");
	for (size_t i = 0; i < th.n; i++)
		if (th.ev[i].kind > XP_TRACE_LOST)
			fail("an event of no kind");
	print(&th, c.start_ns & 0xffff);
	free((void *)th.ev);
	free(rec);
}

/* 4.: a key is at most 250 bytes; longer inputs are cut to that. */
static void key(const uint8_t *data, size_t size, const char *text)
{
	char kt[4 * 250 + 1], pad[2 * sizeof(kt)];
	unsigned char back[250];
	size_t len = size < 250 ? size : 250;
	int escaped = keytext_from_bytes(data, len, kt, sizeof(kt), 0);
	const unsigned char *p = (const unsigned char *)kt;
	for (size_t left = strlen(kt); left;) {
		uint32_t cp;
		int n = keytext_utf8(p, left, &cp);
		if (n <= 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
			fail("a key text holds a byte outside UTF-8 or a control");
		p += n;
		left -= (size_t)n;
	}
	ssize_t n = keytext_to_bytes(kt, back, sizeof(back));
	if (n != (ssize_t)len || memcmp(back, data, len) != 0)
		fail("a key text does not reverse to its bytes");
	if (escaped != (strlen(kt) != len || memcmp(kt, data, len) != 0))
		fail("key_escaped says the wrong thing");
	int w = keytext_width(kt), fw;
	size_t fit = keytext_fit(kt, w / 2, &fw);
	if (fit > strlen(kt) || fw > w / 2 || keytext_fit(kt, w, NULL) != strlen(kt))
		fail("a key text's fit is out of bounds");
	keytext_pad(pad, sizeof(pad), kt, w / 2 + 1);
	if (strlen(text) < sizeof(kt))
		keytext_from_module(text, kt, sizeof(kt), KEYTEXT_ASCII);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		fail("out of memory");
	memcpy(text, data, size);
	text[size] = '\0';
	buffers(text);
	objects(text);
	key(data, size, text);
	free(text);
	memory(data, size);
	return 0;
}
