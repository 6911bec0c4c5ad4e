/* The kernel side: bpf/mclat.bpf.c's CO-RE skeleton (built into this
 * program by bpftool gen skeleton), aimed at one memcached process, and
 * its ring buffer of read-batch events. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "mclat.h"
#include "mclat.skel.h"

struct kernel {
	struct mclat_bpf *skel;
	struct ring_buffer *rb;
	void (*cb)(const struct mclat_event *, void *);
	void *arg;
};

/* libbpf's own messages would be noise for a user without BPF rights:
 * the caller explains the failure once. */
static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level, (void)fmt, (void)ap;
	return 0;
}

static int on_sample(void *ctx, void *data, size_t size)
{
	struct kernel *k = ctx;
	if (size >= sizeof(struct mclat_event))
		k->cb(data, k->arg);
	return 0;
}

struct kernel *kernel_open(pid_t pid, uint16_t port, char *why, size_t whylen)
{
	libbpf_set_print(getenv("MCLAT_LIBBPF_DEBUG") ? NULL : quiet);
	struct kernel *k = calloc(1, sizeof(*k));
	if (!k) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	const char *step = "open";
	int err = 0;
	k->skel = mclat_bpf__open();
	if (!k->skel) {
		err = -errno;
		goto fail;
	}
	k->skel->rodata->target_tgid = (__u32)pid;
	k->skel->rodata->target_port = port;
	step = "load";
	if ((err = mclat_bpf__load(k->skel)) != 0)
		goto fail;
	step = "attach";
	if ((err = mclat_bpf__attach(k->skel)) != 0)
		goto fail;
	step = "ring buffer";
	k->rb = ring_buffer__new(bpf_map__fd(k->skel->maps.events), on_sample, k, NULL);
	if (!k->rb) {
		err = -errno;
		goto fail;
	}
	return k;
fail:
	snprintf(why, whylen, "BPF %s failed: %s%s", step, strerror(err < 0 ? -err : err),
		 err == -EPERM || err == -EACCES ? " (needs root, or CAP_BPF and CAP_PERFMON)" : "");
	kernel_close(k);
	return NULL;
}

int kernel_poll(struct kernel *k, void (*cb)(const struct mclat_event *, void *), void *arg)
{
	k->cb = cb;
	k->arg = arg;
	return ring_buffer__consume(k->rb) < 0 ? -1 : 0;
}

unsigned long long kernel_lost(struct kernel *k)
{
	return __atomic_load_n(&k->skel->bss->lost, __ATOMIC_RELAXED);
}

void kernel_close(struct kernel *k)
{
	if (!k)
		return;
	ring_buffer__free(k->rb);
	mclat_bpf__destroy(k->skel);
	free(k);
}

