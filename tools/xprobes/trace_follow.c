/* SPDX-License-Identifier: MIT */
/* Following a recording through the program's whole life (the run form
 * `xprobes trace -o DIR -- PROG`): its fork()ed children, daemon()s,
 * posix_spawn()ed and exec'd programs, each recorded into the same
 * directory as uftrace does (FORK, SESS and TASK lines, a TID.dat per
 * thread, a sid-SID.map per image).  The agent's side and the protocol:
 * lib/trace/trace_follow.c and struct xp_follow_msg.
 *
 * The tool listens on a SOCK_SEQPACKET socket in a directory of its own.
 * Every process tracing with --follow connects and sends each of its
 * rings as a memfd, which the tool maps: it drains them as the stream
 * does the others (trace_stream.c), but from its own mapping, so what a
 * process wrote is still there after it ended, however it ended.  A
 * fork()ed child connects from its fork handler and says which calls it
 * inherited open.  An executable started under XPROBES_TRACE_FOLLOW (an
 * exec) says EXEC and waits before main while the tool opens a session
 * to its agent, writes its SESS line, map and symbols, and starts tracing
 * it with the run's options: the only time a followed process waits for
 * the tool, as the program itself does before main.
 *
 * The tool becomes a child subreaper, so daemons stay its descendants:
 * the recording ends once the program and every descendant have ended
 * (or on SIGINT, SIGTERM or -d).  Everything a target sends is checked:
 * the pid is the kernel's (SO_PEERCRED), a ring is mapped only when it is
 * a memfd of a ring's size whose header is a ring's, and the number of
 * processes and rings is bounded. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 4096
#define MAX_RINGS 16384
#define CHUNK 32768
#define MSG_MAX (sizeof(struct xp_follow_msg) + XP_FOLLOW_MAX_FRAMES * sizeof(uint64_t))

struct fring {
	struct xp_trace_buf *map; /* NULL once its process ended and it was drained */
	size_t len;
	size_t proc;       /* the process that sent it (f->procs) */
	int pid, tid;      /* tid: 0 until a thread took it */
	int told;          /* its thread registered with the sink */
	uint64_t lost, marked, last_ns;
};

struct fproc {
	int pid, conn, pidfd;
	int gone;          /* its process has ended: its rings are final */
	int root;          /* the program's first image */
};

struct trace_follow {
	int lfd;
	char dir[64], path[108];
	struct fproc *procs;
	size_t nprocs;
	struct fring *rings;
	size_t nrings;
	uint64_t refused;  /* processes or rings past the bounds */
	uint64_t records;  /* drained */
	int root;
	struct trace_sink sink;
	struct uft_writer *w;
	const struct trace_opts *o;
	int timeout_ms;
	struct xp_trace_rec *rec;
	struct tf_event *ev;
	struct tf_clock clock; /* the tool's own TSC pairs: see own_clock */
};

static void clock_pair(uint64_t *tsc, uint64_t *ns);

/* Directories of followers that were killed (SIGKILL leaves them): ours,
 * with a socket nobody listens on any more. */
static void sweep_stale(void)
{
	DIR *d = opendir("/tmp");
	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));) {
		char dir[64], sock[96];
		struct stat st;
		if (strncmp(e->d_name, "xprobes-follow.", 15) != 0 || strlen(e->d_name) > 40)
			continue;
		/* Both fit (the name is at most 40 bytes); checked for the
		 * compiler, which cannot see that at -O1. */
		if (snprintf(dir, sizeof(dir), "/tmp/%s", e->d_name) >= (int)sizeof(dir) ||
		    snprintf(sock, sizeof(sock), "%s/follow.sock", dir) >= (int)sizeof(sock))
			continue;
		if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid())
			continue;
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		int stale = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 &&
			    (errno == ECONNREFUSED || errno == ENOENT);
		if (fd >= 0)
			close(fd);
		if (stale) {
			unlink(sock);
			rmdir(dir); /* only if that left it empty */
		}
	}
	closedir(d);
}

struct trace_follow *trace_follow_new(void)
{
	struct trace_follow *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->lfd = -1;
	sweep_stale();
	snprintf(f->dir, sizeof(f->dir), "/tmp/xprobes-follow.XXXXXX");
	if (!mkdtemp(f->dir)) {
		fprintf(stderr, "xprobes trace: cannot make a directory in /tmp: %s\n",
			strerror(errno));
		free(f);
		return NULL;
	}
	snprintf(f->path, sizeof(f->path), "%s/follow.sock", f->dir);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
	f->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(f->lfd, 128) != 0) {
		fprintf(stderr, "xprobes trace: cannot listen at %s: %s\n", f->path,
			strerror(errno));
		trace_follow_free(f);
		return NULL;
	}
	/* Orphans (a daemon) come to us rather than to init: still our
	 * descendants, so the recording knows to wait for them. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	clock_pair(&f->clock.start_tsc, &f->clock.start_ns);
	return f;
}

const char *trace_follow_path(const struct trace_follow *f)
{
	return f->path;
}

void trace_follow_bind(struct trace_follow *f, int root, struct uft_writer *w,
		       const struct trace_sink *sink, const struct trace_opts *o, int timeout_ms)
{
	f->root = root;
	f->w = w;
	f->sink = *sink;
	f->o = o;
	f->timeout_ms = timeout_ms;
}

void trace_follow_free(struct trace_follow *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nprocs; i++) {
		if (f->procs[i].conn >= 0)
			close(f->procs[i].conn);
		if (f->procs[i].pidfd >= 0)
			close(f->procs[i].pidfd);
	}
	for (size_t i = 0; i < f->nrings; i++)
		if (f->rings[i].map)
			munmap(f->rings[i].map, f->rings[i].len);
	if (f->lfd >= 0)
		close(f->lfd);
	unlink(f->path);
	rmdir(f->dir);
	free(f->procs);
	free(f->rings);
	free(f->rec);
	free(f->ev);
	free(f);
}

static int pidfd_of(int pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static struct fproc *add_proc(struct trace_follow *f, int pid, int conn)
{
	if (f->nprocs == MAX_PROCS) {
		f->refused++;
		return NULL;
	}
	struct fproc *grown = reallocarray(f->procs, f->nprocs + 1, sizeof(*grown));
	if (!grown)
		return NULL;
	f->procs = grown;
	struct fproc *p = &f->procs[f->nprocs++];
	*p = (struct fproc){ .pid = pid, .conn = conn, .pidfd = pidfd_of(pid),
			     .root = pid == f->root };
	if (p->pidfd < 0)
		p->gone = 1;
	return p;
}

/* A ring a process sent: mapped if it is one. */
static void add_ring(struct trace_follow *f, size_t proc, int fd)
{
	int pid = f->procs[proc].pid;
	struct stat st;
	size_t hdr = sizeof(struct xp_trace_buf);
	/* Only a memfd (seals are a memfd's): never a file of the target's
	 * choosing, which the tool would write a tail into. */
	if (f->nrings == MAX_RINGS || fcntl(fd, F_GET_SEALS) < 0 || fstat(fd, &st) != 0 ||
	    !S_ISREG(st.st_mode) ||
	    st.st_size < (off_t)hdr ||
	    (uint64_t)st.st_size > hdr + XP_TRACE_MAX_RECS * sizeof(struct xp_trace_rec) + 4096) {
		f->refused++;
		return;
	}
	struct fring *grown = reallocarray(f->rings, f->nrings + 1, sizeof(*grown));
	if (!grown)
		return;
	f->rings = grown;
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		f->refused++;
		return;
	}
	f->rings[f->nrings++] = (struct fring){ .map = m, .len = (size_t)st.st_size, .pid = pid,
						.proc = proc };
}

static uint64_t mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static char *proc_file(int pid, const char *what)
{
	char path[64], *text = NULL;
	size_t n = 0;
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
	FILE *in = fopen(path, "re"), *out = open_memstream(&text, &n);
	char buf[4096];
	size_t got;
	while (in && out && (got = fread(buf, 1, sizeof(buf), in)) > 0 && n < (16u << 20))
		fwrite(buf, 1, got, out);
	if (in)
		fclose(in);
	if (out)
		fclose(out);
	for (size_t i = 0; text && i + 1 < n; i++)
		if (text[i] == '\0')
			text[i] = ' ';
	return text;
}

static int drain(struct trace_follow *f, struct fring *r, const struct tf_clock *clk, int *busy);

/* What the image before an exec wrote: all of it, before the new image's
 * session begins (its thread is the same, and goes on at depth 0). */
static void drain_old_image(struct trace_follow *f, int pid)
{
	int busy = 0;
	for (size_t i = 0; i < f->nrings; i++)
		if (f->rings[i].map && f->rings[i].pid == pid && f->clock.now_tsc > f->clock.start_tsc)
			drain(f, &f->rings[i], &f->clock, &busy);
}

/* Process pid exec'd a traced executable, which waits before main: its
 * session in the directory, then tracing started there (its rings come
 * on its own connection).  The reply (any byte) lets it go; so does an
 * error here. */
static void start_exec(struct trace_follow *f, int pid, int conn)
{
	struct session s = { .fd = -1, .timeout_ms = f->timeout_ms };
	if (session_open(&s, pid, 1) != 0) {
		(void)!send(conn, "g", 1, MSG_NOSIGNAL);
		return;
	}
	struct trace_object *objs = NULL;
	size_t nobjs = 0;
	char exe[4096] = "", link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	char *cmdline = proc_file(pid, "cmdline"), *maps = proc_file(pid, "maps");
	struct uft_object *uo = NULL;
	struct trace_names *names = trace_names_new(&s);
	int *fds = NULL;
	if (names && trace_objects(&s, &objs, &nobjs) == 0 &&
	    (uo = calloc(nobjs ? nobjs : 1, sizeof(*uo))) &&
	    (fds = calloc(nobjs ? nobjs : 1, sizeof(*fds)))) {
		char (*files)[32] = calloc(nobjs ? nobjs : 1, sizeof(*files));
		for (size_t i = 0; files && i < nobjs; i++) {
			fds[i] = trace_names_open(names, objs[i].path);
			snprintf(files[i], sizeof(files[i]), "/proc/self/fd/%d", fds[i]);
			uo[i] = (struct uft_object){ .path = objs[i].path, .base = objs[i].base,
						     .file = fds[i] >= 0 ? files[i] : "/dev/null" };
		}
		struct uft_session us = {
			.pid = pid, .exe = exe, .cmdline = cmdline ? cmdline : exe,
			.mono_ns = mono_now(), .maps = maps, .objects = uo, .nobjects = nobjs,
		};
		drain_old_image(f, pid);
		if (files && uft_exec(f->w, &us) != 0)
			fprintf(stderr, "xprobes: trace record: %s\n", uft_error(f->w));
		for (size_t i = 0; files && i < nobjs; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		free(files);
		struct trace_opts started = *f->o;
		size_t len = strlen(started.agent_args);
		snprintf(started.agent_args + len, sizeof(started.agent_args) - len,
			 "%s%s --follow %s", strstr(started.agent_args, " -b ") ? "" : " -b 65536",
			 strstr(started.agent_args, " -B ") ? "" : " -B 1048576", f->path);
		FILE *quiet = fopen("/dev/null", "w");
		trace_start(&s, &started, quiet ? quiet : stderr);
		if (quiet)
			fclose(quiet);
	}
	free(fds);
	free(uo);
	trace_objects_free(objs, nobjs);
	trace_names_free(names);
	free(cmdline);
	free(maps);
	session_close(&s);
	(void)!send(conn, "g", 1, MSG_NOSIGNAL);
}

/* One message from p: 1, 0 when none is waiting, -1 when the connection
 * is done. */
static int take_msg(struct trace_follow *f, struct fproc *p)
{
	union {
		struct xp_follow_msg m;
		char space[MSG_MAX];
	} u;
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} c;
	struct iovec iov = { &u, sizeof(u) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
			     .msg_controllen = sizeof(c.buf) };
	ssize_t n = recvmsg(p->conn, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (mh.msg_flags & MSG_CTRUNC) { /* more descriptors than a message carries */
		f->refused++;
	}
	int fd = -1;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
			for (size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int got;
				memcpy(&got, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
				if (fd < 0)
					fd = got;
				else
					close(got); /* one a message */
			}
	if (n <= 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if ((size_t)n < sizeof(u.m)) {
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if (!memcmp(u.m.tag, "RING", 4) && fd >= 0) {
		add_ring(f, (size_t)(p - f->procs), fd);
	} else if (!memcmp(u.m.tag, "FORK", 4)) {
		uint32_t k = u.m.naddr;
		if (k > XP_FOLLOW_MAX_FRAMES || sizeof(u.m) + k * sizeof(uint64_t) > (size_t)n)
			k = 0;
		uint32_t depth = u.m.depth < k ? k : u.m.depth > 1023 ? 1023 : u.m.depth;
		/* A little before its records: times go through the TSC. */
		uint64_t ns = u.m.ns > 1000 ? u.m.ns - 1000 : u.m.ns;
		if (uft_fork(f->w, p->pid, u.m.ppid, ns, u.m.addr, k, depth) != 0)
			fprintf(stderr, "xprobes: trace record: %s\n", uft_error(f->w));
	} else if (!memcmp(u.m.tag, "EXEC", 4)) {
		start_exec(f, p->pid, p->conn);
	}
	if (fd >= 0)
		close(fd);
	return 1;
}

static void accept_all(struct trace_follow *f)
{
	for (;;) {
		int c = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0)
			return;
		struct ucred cr;
		socklen_t len = sizeof(cr);
		if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != getuid() ||
		    !add_proc(f, cr.pid, c))
			close(c);
	}
}

static int room(struct trace_follow *f)
{
	if (f->rec)
		return 0;
	f->rec = calloc(CHUNK, sizeof(*f->rec));
	f->ev = calloc(CHUNK, sizeof(*f->ev));
	return f->rec && f->ev ? 0 : -1;
}

static const char *comm_of(const struct fring *r, char name[64])
{
	char path[64];
	name[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", r->pid, r->tid);
	FILE *in = fopen(path, "re");
	if (in) {
		if (fgets(name, 64, in))
			name[strcspn(name, "\n")] = '\0';
		fclose(in);
	}
	if (!name[0]) {
		memcpy(name, r->map->comm, sizeof(r->map->comm));
		name[sizeof(r->map->comm) - 1] = '\0';
	}
	return sanitize_text(name);
}

/* Copy a ring's new records to the sink and give their room back. */
static int drain(struct trace_follow *f, struct fring *r, const struct tf_clock *clk, int *busy)
{
	struct xp_trace_buf h;
	char why[TRACE_WHY_SIZE], name[64];
	uint64_t first, head;
	memcpy(&h, r->map, sizeof(h));
	if (h.magic != XP_TRACE_BUF_MAGIC || !h.tid || !h.version)
		return 0; /* a spare no thread has taken yet, or is taking */
	if (h.tid <= 0 || (r->tid && h.tid != r->tid) ||
	    sizeof(h) + h.cap * sizeof(struct xp_trace_rec) > r->len ||
	    trace_buf_check(&h, h.cap, &first, &head, why, sizeof(why)) != 0) {
		if (!r->told)
			fprintf(stderr, "xprobes: trace record: a ring of process %d is not one; "
					"left out\n", r->pid);
		r->told = -1;
		return 0;
	}
	if (r->told < 0)
		return 0;
	if (!r->tid) {
		r->tid = h.tid;
		if (r->pid != f->root && uft_task(f->w, r->tid, r->pid, 0) != 0)
			return 1;
		if (f->sink.thread(f->sink.ctx, r->tid, comm_of(r, name)) != 0)
			return 1;
		r->told = 1;
	}
	uint64_t lost = h.lost;
	if (lost < r->lost)
		r->marked = 0;
	r->lost = lost;
	if (head - first >= h.cap / 4)
		*busy = 1;
	if (head > first && room(f) != 0)
		return 1;
	while (first < head) {
		uint64_t m = head - first < CHUNK ? head - first : CHUNK;
		uint64_t at = first % h.cap, one = m < h.cap - at ? m : h.cap - at;
		memcpy(f->rec, &r->map->rec[at], one * sizeof(*f->rec)); /* then from the start */
		memcpy(f->rec + one, r->map->rec, (m - one) * sizeof(*f->rec));
		tf_decode(f->rec, m, clk, f->ev);
		for (uint64_t i = 0; i < m; i++)
			if (f->ev[i].kind == XP_TRACE_LOST && !(f->ev[i].addr & XP_TRACE_LABEL))
				r->marked += f->ev[i].addr; /* not a label's or arguments' */
		r->last_ns = ta_last_ns(f->ev, m, r->last_ns);
		if (f->sink.events(f->sink.ctx, r->tid, f->ev, m) != 0)
			return 1;
		f->records += m;
		first += m;
		atomic_store_explicit(&r->map->tail, first, memory_order_release);
	}
	return 0;
}

/* The records' TSC to CLOCK_MONOTONIC through pairs the tool takes
 * itself (the TSC is the machine's, the same in every process): a
 * followed process may be gone, or exec'd, before its agent was ever
 * asked for its pairs. */
static void clock_pair(uint64_t *tsc, uint64_t *ns)
{
	/* The narrowest of a few tries: a pair whose clock read was
	 * preempted would put every time converted through it off by as
	 * much, and a call's two ends may be converted through two pairs. */
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 5; i++) {
		uint64_t a = __builtin_ia32_rdtsc();
		uint64_t n = mono_now();
		uint64_t b = __builtin_ia32_rdtsc();
		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = n;
		}
	}
}

int trace_follow_pass(struct trace_follow *f, const struct tf_clock *program_clock, int *busy)
{
	(void)program_clock;
	if (!f->clock.start_tsc)
		clock_pair(&f->clock.start_tsc, &f->clock.start_ns);
	clock_pair(&f->clock.now_tsc, &f->clock.now_ns);
	const struct tf_clock *clk = f->clock.now_tsc > f->clock.start_tsc ? &f->clock : NULL;
	accept_all(f);
	for (size_t i = 0; i < f->nprocs; i++) {
		struct fproc *p = &f->procs[i];
		int got;
		while (p->conn >= 0 && (got = take_msg(f, p)) != 0)
			if (got < 0) {
				close(p->conn);
				p->conn = -1;
			}
		if (!p->gone) {
			struct pollfd pf = { .fd = p->pidfd, .events = POLLIN };
			if (poll(&pf, 1, 0) == 1)
				p->gone = 1; /* what it sent before is in the queue: taken next pass */
		}
	}
	if (!clk)
		return 0;
	for (size_t i = 0; i < f->nrings; i++) {
		struct fring *r = &f->rings[i];
		if (!r->map)
			continue;
		/* Its process ended, and said all it had to (end of file on
		 * its connection, read before it was seen gone): drained now
		 * for the last time, its memory goes.  A long recording of a
		 * server that makes and ends children keeps no dead rings. */
		const struct fproc *p = &f->procs[r->proc];
		int last = p->gone && p->conn < 0;
		if (drain(f, r, clk, busy) != 0)
			return 1;
		if (last) {
			munmap(r->map, r->len);
			r->map = NULL;
		}
	}
	return 0;
}

/* A process of the tool's subtree (the program, its descendants, and
 * the orphans the subreaper took) that has not ended: ppid chains from
 * /proc, zombies aside. */
static int descendant_alive(void)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	size_t n = 0, cap = 0;
	struct { int pid, ppid; char state; } *t = NULL;
	for (struct dirent *e; (e = readdir(d));) {
		int pid = atoi(e->d_name), ppid;
		char path[64], comm_state[512], state;
		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		FILE *in = fopen(path, "re");
		if (!in)
			continue;
		size_t got = fread(comm_state, 1, sizeof(comm_state) - 1, in);
		fclose(in);
		comm_state[got] = '\0';
		char *close_paren = strrchr(comm_state, ')');
		if (!close_paren || sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2)
			continue;
		if (n == cap) {
			void *grown = reallocarray(t, cap = cap ? 2 * cap : 256, sizeof(*t));
			if (!grown)
				break;
			t = grown;
		}
		t[n].pid = pid;
		t[n].ppid = ppid;
		t[n++].state = state;
	}
	closedir(d);
	int me = getpid(), alive = 0;
	for (size_t i = 0; i < n && !alive; i++) {
		if (t[i].state == 'Z' || t[i].state == 'X')
			continue;
		int at = t[i].ppid;
		for (size_t hops = 0; at > 1 && hops < n && !alive; hops++) {
			if (at == me) {
				alive = 1;
				break;
			}
			size_t j = 0;
			while (j < n && t[j].pid != at)
				j++;
			at = j < n ? t[j].ppid : 0;
		}
	}
	free(t);
	return alive;
}

int trace_follow_live(struct trace_follow *f)
{
	for (size_t i = 0; i < f->nprocs; i++)
		if (!f->procs[i].gone)
			return 1;
	return descendant_alive();
}

int trace_follow_finish(struct trace_follow *f, uint64_t *refused)
{
	*refused = f->refused;
	for (size_t i = 0; i < f->nrings; i++) {
		struct fring *r = &f->rings[i];
		if (r->told <= 0 || r->lost <= r->marked)
			continue;
		struct tf_event ev = { r->last_ns, r->lost - r->marked, XP_TRACE_LOST };
		if (f->sink.events(f->sink.ctx, r->tid, &ev, 1) != 0)
			return 1;
		r->marked = r->lost;
	}
	return 0;
}

void trace_follow_stats(const struct trace_follow *f, uint64_t *records, unsigned *threads,
			uint64_t *lost)
{
	*records += f->records;
	for (size_t i = 0; i < f->nrings; i++) {
		const struct fring *r = &f->rings[i];
		if (r->told <= 0)
			continue;
		*lost += r->lost;
		size_t j = 0; /* a thread with two rings (a bigger one later) is one */
		while (j < i && !(f->rings[j].told > 0 && f->rings[j].tid == r->tid &&
				  f->rings[j].pid == r->pid))
			j++;
		*threads += j == i;
	}
}

pid_t trace_follow_read_line(int fd, char *buf, size_t size)
{
	size_t n = 0;
	pid_t from = 0;
	while (n + 1 < size) {
		char c;
		union {
			char buf[CMSG_SPACE(sizeof(struct ucred))];
			struct cmsghdr align;
		} u;
		struct iovec iov = { &c, 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
				     .msg_controllen = sizeof(u.buf) };
		ssize_t r = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
			if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_CREDENTIALS &&
			    h->cmsg_len >= CMSG_LEN(sizeof(struct ucred)) && !from) {
				struct ucred cr;
				memcpy(&cr, CMSG_DATA(h), sizeof(cr));
				from = cr.pid;
			} else if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
				/* nobody should send any: none kept */
				for (size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
					int got;
					memcpy(&got, CMSG_DATA(h) + i * sizeof(int), sizeof(got));
					close(got);
				}
			}
		if (c == '\n')
			break;
		buf[n++] = c;
	}
	buf[n] = '\0';
	return from;
}

void trace_follow_stop_all(struct trace_follow *f)
{
	for (size_t i = 0; i < f->nprocs; i++) {
		struct fproc *p = &f->procs[i];
		int again = 0;
		for (size_t j = 0; j < i && !again; j++) /* one stop a process */
			again = f->procs[j].pid == p->pid && !f->procs[j].gone;
		if (p->gone || again)
			continue;
		struct pollfd pf = { .fd = p->pidfd, .events = POLLIN };
		if (poll(&pf, 1, 0) == 1) {
			p->gone = 1;
			continue;
		}
		struct session s = { .fd = -1, .timeout_ms = f->timeout_ms };
		char *text = NULL;
		if (session_open(&s, p->pid, 1) == 0) {
			session_call(&s, "trace stop", &text);
			session_close(&s);
		}
		free(text);
	}
}
