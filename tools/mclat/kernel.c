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

/* Whether pid holds the socket with this inode. */
static int has_socket(pid_t pid, unsigned long inode)
{
	char dir[64], link[64], want[64];
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int found = 0;
	for (struct dirent *de; !found && (de = readdir(d));) {
		ssize_t n = readlinkat(dirfd(d), de->d_name, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = '\0';
			found = strcmp(link, want) == 0;
		}
	}
	closedir(d);
	return found;
}

/* The first listening (state 0A) TCP socket of pid, IPv4 then IPv6: the
 * kernel programs keep state only for sockets on that port. */
uint16_t listen_port(pid_t pid)
{
	static const char *const files[] = { "tcp", "tcp6" };
	for (unsigned f = 0; f < 2; f++) {
		char path[64], line[512];
		snprintf(path, sizeof(path), "/proc/%d/net/%s", (int)pid, files[f]);
		FILE *in = fopen(path, "r");
		if (!in)
			continue;
		while (fgets(line, sizeof(line), in)) {
			char local[80];
			unsigned st;
			unsigned long inode;
			if (sscanf(line, " %*d: %79s %*s %x %*s %*s %*s %*s %*s %lu", local, &st,
				   &inode) != 3 || st != 0x0a)
				continue;
			char *colon = strrchr(local, ':');
			if (colon && has_socket(pid, inode)) {
				fclose(in);
				return (uint16_t)strtoul(colon + 1, NULL, 16);
			}
		}
		fclose(in);
	}
	return 0;
}
