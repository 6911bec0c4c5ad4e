/* SPDX-License-Identifier: MIT */
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
#include <limits.h>
#include <linux/perf_event.h>
#include <mntent.h>
#include <pthread.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <time.h>

#include <bpf/libbpf.h>

#include "mclat.h"
#include "mclat.skel.h"

/* The syscall boundaries' programs of the syscalls:* trace events, and
 * whether each must exist for that way to be taken. */
#define NSYSEV 7

struct kernel {
	struct mclat_bpf *skel;
	struct ring_buffer *rb;
	void (*cb)(const struct mclat_event *, void *);
	void *arg;
	struct bpf_link *sysev[NSYSEV];
	long sysev_id[NSYSEV];    /* their trace event ids; < 0: not attached */
	struct bpf_link *raw[2];  /* on_enter, on_exit, when they are used */
	int attached;
	/* kernel_detach's thread, while it destroys the links; detach_ns
	 * what it took, for the next kernel_detached. */
	pthread_t detacher;
	int detaching;
	uint64_t detach_ns;
	const char *raw_because; /* why the raw programs; NULL: the events */
	char raw_why[96];
};

/* Those programs into PROGS and, unless NULL, whether each is needed into
 * REQUIRED. */
static void sysev_programs(struct mclat_bpf *skel, struct bpf_program **progs, int *required)
{
	struct bpf_program *p[NSYSEV] = { skel->progs.ev_read,	     skel->progs.ev_readv,
					  skel->progs.ev_recvfrom,   skel->progs.ev_recvmsg,
					  skel->progs.ev_epoll_wait, skel->progs.ev_epoll_pwait,
					  skel->progs.ev_epoll_pwait2 };
	/* memcached reads with read() and waits in epoll_wait() (libevent);
	 * the others are there for builds that use them, when the kernel
	 * has them. */
	static const int must[NSYSEV] = { 1, 0, 0, 0, 1, 0, 0 };
	memcpy(progs, p, sizeof(p));
	if (required)
		memcpy(required, must, sizeof(must));
}

/* The trace event id of a program's section "tracepoint/CATEGORY/NAME" in
 * tracefs at DIR; a negative errno if it cannot be read (-ENOENT: no such
 * event, -EACCES: tracefs is root's). */
static long event_id(const char *dir, const struct bpf_program *prog)
{
	const char *sec = bpf_program__section_name(prog);
	if (strncmp(sec, "tracepoint/", 11) != 0)
		return -EINVAL;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/events/%s/id", dir, sec + 11);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	long id = -1;
	if (fscanf(f, "%ld", &id) != 1 || id < 0)
		id = -EINVAL;
	fclose(f);
	return id;
}

/* Where tracefs is mounted, from /proc/self/mounts (not by looking into
 * /sys/kernel/debug/tracing, which would make debugfs mount it there for
 * good), else mounted on its usual place for the moment (as trace-cmd and
 * libtracefs do): *mounted says so, and the caller unmounts it once the
 * events are open.  DIR (PATH_MAX) empty when there is none. */
static void tracefs(char *dir, size_t len, int *mounted)
{
	*mounted = 0;
	dir[0] = '\0';
	FILE *f = setmntent("/proc/self/mounts", "re");
	struct mntent *e;
	while (f && (e = getmntent(f)))
		if (strcmp(e->mnt_type, "tracefs") == 0) {
			snprintf(dir, len, "%s", e->mnt_dir);
			break;
		}
	if (f)
		endmntent(f);
	if (dir[0])
		return;
	if (mount("tracefs", "/sys/kernel/tracing", "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL) == 0) {
		*mounted = 1;
		snprintf(dir, len, "/sys/kernel/tracing");
	}
}

/* The syscall programs' trace event ids, from tracefs at dir, kept so
 * that each sampling window attaches them again without tracefs. */
static int sysev_ids(struct kernel *k, const char *dir)
{
	struct bpf_program *progs[NSYSEV];
	int required[NSYSEV];
	sysev_programs(k->skel, progs, required);
	for (int i = 0; i < NSYSEV; i++) {
		long id = event_id(dir, progs[i]);
		k->sysev_id[i] = id;
		if (id == -ENOENT && !required[i])
			continue; /* a syscall this kernel has no event for */
		if (id < 0)
			return (int)id;
	}
	return 0;
}

/* Attach the syscall programs to their trace events, one perf event each
 * (for a tracepoint, one on CPU 0 runs the program on every CPU). */
static int sysev_attach(struct kernel *k)
{
	struct bpf_program *progs[NSYSEV];
	sysev_programs(k->skel, progs, NULL);
	/* Tests make the kernel refuse the Nth event opened
	 * (MCLAT_TEST_REFUSE_EVENTS=N): the ones before it stay attached
	 * until the fallback takes them away. */
	const char *refuse = getenv("MCLAT_TEST_REFUSE_EVENTS");
	int opened = 0;
	for (int i = 0; i < NSYSEV; i++) {
		if (k->sysev_id[i] < 0)
			continue;
		if (refuse && ++opened == atoi(refuse))
			return -EACCES;
		struct perf_event_attr attr = {
			.type = PERF_TYPE_TRACEPOINT,
			.size = sizeof(attr),
			.config = (unsigned long long)k->sysev_id[i],
			.sample_period = 1,
			.wakeup_events = 1,
		};
		int fd = (int)syscall(__NR_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0)
			return -errno;
		k->sysev[i] = bpf_program__attach_perf_event(progs[i], fd);
		if (!k->sysev[i]) {
			int err = -errno;
			close(fd);
			return err;
		}
	}
	return 0;
}

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
	/* Both ways of taking the syscall boundaries are loaded, neither
	 * attached with the rest: the trace events are tried first, the raw
	 * tracepoints are the fallback. */
	struct bpf_program *progs[NSYSEV];
	sysev_programs(k->skel, progs, NULL);
	for (int i = 0; i < NSYSEV; i++)
		bpf_program__set_autoattach(progs[i], false);
	bpf_program__set_autoattach(k->skel->progs.on_enter, false);
	bpf_program__set_autoattach(k->skel->progs.on_exit, false);
	step = "load";
	if ((err = mclat_bpf__load(k->skel)) != 0)
		goto fail;
	step = "attach";
	if ((err = mclat_bpf__attach(k->skel)) != 0)
		goto fail;
	const char *force = getenv("MCLAT_RAW_SYSCALLS");
	if (force && strcmp(force, "0") != 0) {
		k->raw_because = "MCLAT_RAW_SYSCALLS is set";
	} else {
		char dir[PATH_MAX];
		int mounted;
		tracefs(dir, sizeof(dir), &mounted);
		int e = dir[0] ? sysev_ids(k, dir) : -ENOENT;
		if (!e)
			e = sysev_attach(k);
		if (!dir[0]) {
			k->raw_because = "no tracefs";
		} else if (e) {
			snprintf(k->raw_why, sizeof(k->raw_why), "syscall trace events: %s",
				 strerror(-e));
			k->raw_because = k->raw_why;
		}
		if (mounted)
			umount2(dir, MNT_DETACH); /* the events stay open without it */
	}
	if (k->raw_because) {
		for (int i = 0; i < NSYSEV; i++) {
			bpf_link__destroy(k->sysev[i]);
			k->sysev[i] = NULL;
		}
		if (!(k->raw[0] = bpf_program__attach(k->skel->progs.on_enter)) ||
		    !(k->raw[1] = bpf_program__attach(k->skel->progs.on_exit))) {
			err = -errno;
			goto fail;
		}
	}
	k->attached = 1;
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

static void *destroy_link(void *link)
{
	bpf_link__destroy(link);
	return NULL;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Every link away, now.
 *
 * Detaching a program waits for a grace period (a perf event's close
 * ~50 ms, a tp_btf link's a few ms here under load; 300 ms for all of
 * them one after another, measured): they are destroyed on threads of
 * their own, all at once, so the waits overlap. */
static void detach_now(struct kernel *k)
{
	struct bpf_link **all[64];
	int n = 0;
	const struct bpf_object_skeleton *sk = k->skel->skeleton;
	for (int i = 0; i < sk->prog_cnt && n < 64; i++) {
		const struct bpf_prog_skeleton *p =
			(const void *)((const char *)sk->progs + (size_t)i * (size_t)sk->prog_skel_sz);
		if (p->link && *p->link)
			all[n++] = p->link;
	}
	for (int i = 0; i < NSYSEV && n < 64; i++)
		if (k->sysev[i])
			all[n++] = &k->sysev[i];
	for (int i = 0; i < 2 && n < 64; i++)
		if (k->raw[i])
			all[n++] = &k->raw[i];
	pthread_t th[64];
	int started[64];
	for (int i = 0; i < n; i++)
		started[i] = pthread_create(&th[i], NULL, destroy_link, *all[i]) == 0;
	for (int i = 0; i < n; i++) {
		if (started[i])
			pthread_join(th[i], NULL);
		else
			bpf_link__destroy(*all[i]);
		*all[i] = NULL;
	}
	k->attached = 0;
}

static void *detacher(void *arg)
{
	struct kernel *k = arg;
	uint64_t t0 = mono_ns();
	detach_now(k);
	k->detach_ns = mono_ns() - t0;
	return NULL;
}

void kernel_sampling(struct kernel *k, int on)
{
	__atomic_store_n(&k->skel->bss->sampling, on ? 1u : 0u, __ATOMIC_RELEASE);
}

/* The programs stop at once (kernel_sampling 0); the links, which take
 * a grace period or more each to destroy, go on a thread of their own,
 * so that mclat's loop (its polls, the interval's line) is not held up
 * for ~300 ms each window.  The maps and the ring buffer stay (events
 * already sent are still read). */
void kernel_detach(struct kernel *k)
{
	kernel_sampling(k, 0);
	if (k->detaching || !k->attached) /* attached is the thread's until joined */
		return;
	if (pthread_create(&k->detacher, NULL, detacher, k) == 0) {
		k->detaching = 1;
	} else {
		uint64_t t0 = mono_ns();
		detach_now(k);
		k->detach_ns = mono_ns() - t0;
	}
}

uint64_t kernel_detached(struct kernel *k)
{
	if (k->detaching) {
		pthread_join(k->detacher, NULL);
		k->detaching = 0;
	}
	uint64_t ns = k->detach_ns;
	k->detach_ns = 0;
	return ns;
}

/* The links again, the way kernel_open found to work (after the last
 * detach has finished); -errno, detached, if one fails.  The programs
 * do nothing until kernel_sampling(k, 1). */
int kernel_attach(struct kernel *k)
{
	kernel_detached(k);
	if (k->attached)
		return 0;
	int err = mclat_bpf__attach(k->skel);
	if (!err && !k->raw_because)
		err = sysev_attach(k);
	if (!err && k->raw_because &&
	    (!(k->raw[0] = bpf_program__attach(k->skel->progs.on_enter)) ||
	     !(k->raw[1] = bpf_program__attach(k->skel->progs.on_exit))))
		err = -errno;
	if (err) {
		detach_now(k);
		return err;
	}
	k->attached = 1;
	return 0;
}

int kernel_poll(struct kernel *k, void (*cb)(const struct mclat_event *, void *), void *arg)
{
	k->cb = cb;
	k->arg = arg;
	return ring_buffer__consume(k->rb) < 0 ? -1 : 0;
}

unsigned long long kernel_replies(struct kernel *k)
{
	return __atomic_load_n(&k->skel->bss->replies, __ATOMIC_RELAXED);
}

unsigned long long kernel_lost(struct kernel *k)
{
	return __atomic_load_n(&k->skel->bss->lost, __ATOMIC_RELAXED);
}

void kernel_close(struct kernel *k)
{
	if (!k)
		return;
	kernel_detached(k);
	ring_buffer__free(k->rb);
	for (int i = 0; i < NSYSEV; i++)
		bpf_link__destroy(k->sysev[i]);
	bpf_link__destroy(k->raw[0]);
	bpf_link__destroy(k->raw[1]);
	mclat_bpf__destroy(k->skel);
	free(k);
}

const char *kernel_raw_syscalls(const struct kernel *k)
{
	return k->raw_because;
}
