/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the recorder's input (`trace record`): what a
 * target's agent lists in its `trace buffers` reply and what its rings
 * hold, drained by tools/xprobes/trace_stream.c into trace_uftrace.c's
 * writer (behind trace_minfilter.c's -t filter, when the input says so),
 * as a hostile target would send them.
 *
 * The input is split at its first NUL:
 *   - before it, the `trace buffers` reply, where "{R0}" and "{R1}" stand
 *     for the addresses of two rings of this harness (64 records each):
 *     "target memory" is those rings alone, read and written through the
 *     trace_vm_* functions defined here (anything else is EFAULT, as an
 *     unmapped address of a target would be), so ASan sees every access;
 *   - after it, a byte of flags (bit 0: the -t filter; bits 1-3: a pass is
 *     cut short after that many checks, 0 never; bit 4: a second pass),
 *     then for each ring its version, flags, head, lost and tail, then the
 *     records of both rings.
 * The recording is then closed and read back: it must load (uft_load),
 * and every TID.dat must nest as uftrace pairs records: an entry at the
 * depth of the calls open, its exit one less, never deeper than 1023. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../tools/common/common.h"
#include "../../tools/xprobes/xprobes.h"

#define CAP 64
#define RING_BYTES (sizeof(struct xp_trace_buf) + CAP * sizeof(struct xp_trace_rec))

static void fail(const char *why)
{
	fprintf(stdout, "fuzz_recorder: %s\n", why);
	abort();
}

/* ---- the target: two rings, and the agent's reply ---------------------- */

static unsigned char *rings[2];
static char *reply;

static int in_rings(uint64_t addr, size_t len, unsigned char **p)
{
	for (int r = 0; r < 2; r++) {
		uint64_t at = (uint64_t)(uintptr_t)rings[r];
		if (addr >= at && len <= RING_BYTES && addr - at <= RING_BYTES - len) {
			*p = rings[r] + (addr - at);
			return 0;
		}
	}
	errno = EFAULT;
	return -1;
}

int trace_vm_read(const struct session *s, uint64_t addr, void *buf, size_t len)
{
	unsigned char *p;
	(void)s;
	if (in_rings(addr, len, &p))
		return -1;
	memcpy(buf, p, len);
	return 0;
}

int trace_vm_write(const struct session *s, uint64_t addr, const void *buf, size_t len)
{
	unsigned char *p;
	(void)s;
	if (in_rings(addr, len, &p))
		return -1;
	memcpy(p, buf, len);
	return 0;
}

int trace_vm_read_str(const struct session *s, uint64_t addr, char *buf, size_t size)
{
	(void)s;
	(void)addr;
	(void)size;
	buf[0] = '\0';
	errno = EFAULT;
	return -1;
}

/* A read that failed here is never an exec. */
int session_mem_execd(const struct session *s)
{
	(void)s;
	return 0;
}

int session_call(struct session *s, const char *cmd, char **text)
{
	(void)s;
	*text = strdup(strcmp(cmd, "trace buffers") ? "unknown command\n" : reply);
	if (!*text)
		fail("out of memory");
	return strcmp(cmd, "trace buffers") ? 1 : 0;
}

/* "{R0}", "{R1}" made the rings' addresses. */
static char *substitute(const char *text)
{
	size_t len = strlen(text), cap = len * 4 + 64, n = 0;
	char *out = malloc(cap);
	if (!out)
		fail("out of memory");
	for (const char *p = text; *p;) {
		if (!strncmp(p, "{R0}", 4) || !strncmp(p, "{R1}", 4)) {
			n += (size_t)snprintf(out + n, cap - n, "%p", (void *)rings[p[2] - '0']);
			p += 4;
		} else {
			out[n++] = *p++;
		}
	}
	out[n] = '\0';
	return out;
}

struct cursor {
	const uint8_t *p;
	size_t left;
};

static uint64_t take(struct cursor *c, size_t len)
{
	uint64_t v = 0;
	for (size_t i = 0; i < len && c->left; i++, c->left--)
		v |= (uint64_t)*c->p++ << (8 * i);
	return v;
}

static void make_rings(struct cursor *c)
{
	for (int r = 0; r < 2; r++) {
		struct xp_trace_buf h = { .magic = XP_TRACE_BUF_MAGIC, .tid = 7 + r, .cap = CAP };
		h.version = (uint32_t)take(c, 1);
		h.flags = (uint32_t)take(c, 1);
		atomic_store(&h.head, take(c, 2));
		atomic_store(&h.lost, take(c, 2));
		atomic_store(&h.tail, take(c, 2));
		memset(rings[r], 0, RING_BYTES);
		memcpy(rings[r], &h, sizeof(h));
	}
	for (int r = 0; r < 2; r++)
		for (size_t i = 0; i < CAP && c->left; i++) {
			struct xp_trace_rec rec = { take(c, 8), take(c, 8) };
			memcpy(rings[r] + sizeof(struct xp_trace_buf) + i * sizeof(rec), &rec, sizeof(rec));
		}
}

/* ---- the recorder's sink, as trace_recorder.c's ------------------------ */

static int sink_thread(void *ctx, int tid, const char *name)
{
	return uft_thread(ctx, tid, name) == 0 ? 0 : -1;
}

static int sink_events(void *ctx, int tid, const struct tf_event *ev, size_t n)
{
	return uft_append(ctx, tid, ev, n) == 0 ? 0 : -1;
}

static const char *site_name(void *ctx, uint64_t addr)
{
	(void)ctx;
	return addr & 1 ? "prov:odd" : "even";
}

static int checks_left; /* before a pass is cut short; -1: never */

static int cut(void *ctx)
{
	(void)ctx;
	if (checks_left < 0)
		return 0;
	return checks_left ? (checks_left--, 0) : 1;
}

/* ---- the recording, checked -------------------------------------------- */

static char dir[64];

static void empty_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		fail("cannot read the recording's directory");
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

/* uftrace's pairing: by depth alone. */
static void check_nesting(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY);
	uint64_t rec[2];
	unsigned level = 0;
	if (fd < 0)
		fail("a TID.dat went");
	while (read(fd, rec, sizeof(rec)) == (ssize_t)sizeof(rec)) {
		unsigned type = rec[1] & 3, depth = (rec[1] >> 6) & 0x3ff;
		if (((rec[1] >> 3) & 7) != 5)
			fail("a record without uftrace's magic");
		if (type == 0 && depth != level++)
			fail("an entry not at the depth of the calls open");
		if (type == 1 && (!level || depth != --level))
			fail("an exit not at its entry's depth");
		if (level > 1024)
			fail("calls deeper than uftrace's depth field");
	}
	close(fd);
}

static void check_recording(void)
{
	struct uft_recording r;
	if (uft_load(dir, &r) != 0)
		fail("the recording does not read back");
	uft_free(&r);
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		fail("cannot read the recording's directory");
	while ((de = readdir(d)))
		if (strstr(de->d_name, ".dat") && strncmp(de->d_name, "perf", 4))
			check_nesting(dirfd(d), de->d_name);
	closedir(d);
}

static void remove_dir(void)
{
	empty_dir();
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/dev/shm/fuzz_recorder.XXXXXX"); /* memory: faster */
	if (!mkdtemp(dir)) {
		snprintf(dir, sizeof(dir), "/tmp/fuzz_recorder.XXXXXX");
		if (!mkdtemp(dir))
			fail("mkdtemp");
	}
	atexit(remove_dir);
	for (int r = 0; r < 2; r++)
		if (!(rings[r] = aligned_alloc(64, RING_BYTES)))
			fail("out of memory");
	/* The tool's messages about what it refuses: not the log's business
	 * (sanitizers write to fd 2 themselves). */
	FILE *null = fopen("/dev/null", "w");
	if (null)
		stderr = null;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	if (!nul)
		return 0;
	reply = substitute((const char *)data);
	struct cursor c = { nul + 1, size - (size_t)(nul + 1 - data) };
	unsigned flags = (unsigned)take(&c, 1);
	uint64_t min_ns = take(&c, 2);
	make_rings(&c);

	empty_dir();
	struct uft_session s = { .pid = getpid(), .exe = "/fuzz/prog", .cmdline = "prog",
				 .mono_ns = 5000, .real_ns = 1, .site_name = site_name };
	struct uft_writer *w = uft_open(dir, &s);
	if (!w)
		fail("uft_open failed");
	struct trace_sink sink = { sink_thread, sink_events, w };
	struct trace_minfilter *mf = flags & 1 ? trace_minfilter_new(min_ns + 1, &sink) : NULL;
	if (mf)
		sink = trace_minfilter_sink(mf);
	struct session ses = { .fd = -1, .pid = getpid() };
	struct trace_stream *t = trace_stream_new(&ses, &sink);
	struct trace_stream_stats st = { 0 };
	int busy, rc;
	if (!t)
		fail("out of memory");
	checks_left = (int)((flags >> 1) & 7) - 1;
	trace_stream_cut(t, cut, NULL);
	rc = trace_stream_pass(t, &st, &busy);
	if (rc == 0 && (flags & 16)) {
		checks_left = -1;
		rc = trace_stream_pass(t, &st, &busy);
	}
	if (rc == 0)
		trace_stream_finish(t);
	uint64_t dropped;
	if (mf)
		trace_minfilter_finish(mf, &dropped);
	trace_minfilter_free(mf);
	trace_stream_free(t);
	if (uft_close(w) != 0)
		fail("uft_close failed");
	check_recording();
	free(reply);
	return 0;
}
