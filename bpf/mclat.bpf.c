/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* mclat's kernel stages: where one memcached read batch spent
 * its time between the wire and the worker, and between the worker's
 * reply and the device.
 *
 * Only tracepoints (this kernel has no kprobes and refuses fentry/fexit):
 * tp_btf, and for the syscall boundaries the syscalls:* trace events when
 * tracefs names them (see ev_read).  A request's path and the boundary
 * each one marks:
 *
 *   net:netif_receive_skb(skb)       rx_ns    the stack takes the packet
 *   tcp:tcp_probe(sk, skb)           tcp_ns   TCP has it, on socket sk
 *   sock:sk_data_ready(sk)           ready_ns its data queued, epoll woken
 *   exit of epoll_wait/pwait/pwait2  epoll_ns the worker thread wakes
 *   entry of read/recvfrom/...       read_ns  it asks for the bytes (tid, fd)
 *   sock:sock_recv_length(sk, ret)   done_ns  the bytes copied out; inside
 *                                             that read, so (tid, fd) -> sk
 *                                             exactly, without walking the
 *                                             fd table
 *   tcp:tcp_sendmsg_locked(sk)       send_ns  the reply reaches TCP
 *   net:net_dev_start_xmit(skb)      xmit_ns  the reply's first skb of sk
 *                                             reaches the device
 *
 * A packet is known by skb pointer until tcp_probe names its socket (a
 * per-CPU slot: both run in one softirq); then everything is kept in the
 * socket's local storage, and the syscall boundaries in the thread's,
 * filtered to memcached's process (target_tgid) and port (target_port).
 * A socket's "pending" boundaries are those of its oldest unread data:
 * set by the first sk_data_ready after a read, taken by the next read
 * that returns bytes.  One event per read batch (a read that returned
 * bytes: pipelined requests share one) goes to the ring buffer when its
 * reply reaches the device, or, without a reply, when the next read on
 * that socket starts a new batch.  A full ring drops the event and counts
 * it (lost): the programs never wait.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "mclat.h"

/* MIT, declared dual with the GPL: the kernel lets only a GPL-compatible
 * program call its GPL-only helpers (bpf_probe_read_kernel and others). */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile __u32 target_tgid; /* memcached's pid */
const volatile __u16 target_port; /* its TCP port, 0: every socket */

__u64 lost; /* events the full ring buffer refused */

/* 1 while a sampling window is open (--all: always), written by mclat
 * through the mmapped .bss.  Every program tests it first: the links are
 * attached before a window opens and destroyed after it closes (each
 * takes milliseconds, one grace period after another), and outside the
 * window a program that runs returns after one load instead of
 * recording boundaries nobody will use. */
volatile __u32 sampling;

/* Replies sent (events complete with their tx), for mclat's batch budget
 * (a window closes once it holds enough).  A plain increment: two CPUs
 * may lose one now and then, and a budget needs no more. */
__u64 replies;

/* x86-64 syscall numbers (the program is built for x86 only). */
#define NR_read 0
#define NR_readv 19
#define NR_recvfrom 45
#define NR_recvmsg 47
#define NR_epoll_wait 232
#define NR_epoll_pwait 281
#define NR_epoll_pwait2 441
#define MSG_PEEK_FLAG 2

/* A worker thread's syscall boundaries. */
struct thread {
	__u64 epoll_ns; /* last epoll return */
	__u64 read_ns;  /* last read-family entry, 0 once used */
	__s32 read_fd;
};

/* A socket's oldest unread data; cand_* are its latest packet's, made
 * pending by the sk_data_ready that follows it. */
struct pending {
	__u64 cand_rx, cand_tcp;
	__u64 rx, tcp, ready;
};

/* The packet netif_receive_skb saw last on this CPU.  tcp_probe of the
 * same skb follows on the same CPU in the same softirq, unless the socket
 * was busy and the packet went to its backlog (then rx is not known and
 * the batch is reported as partial): a per-CPU slot costs a fraction of
 * a hash map update per packet. */
struct rx_slot {
	__u64 skb, ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rx_slot);
} rx_slot SEC(".maps");

/* A socket's state lives with the socket (freed with it). */
struct sock_state {
	struct pending pending;
	struct mclat_event inflight; /* inflight.tid == 0: none */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sock_state);
} socks SEC(".maps");

/* A thread's, with the thread. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

static __always_inline int ours(void)
{
	return (__u32)(bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

static __always_inline int port_ok(const struct sock *sk)
{
	return !target_port || BPF_CORE_READ(sk, __sk_common.skc_num) == target_port;
}

static __always_inline void emit(struct mclat_event *e)
{
	/* No wakeup: mclat polls the ring; a wakeup per event would cost an
	 * irq_work on memcached's CPU. */
	if (bpf_ringbuf_output(&events, e, sizeof(*e), BPF_RB_NO_WAKEUP))
		__sync_fetch_and_add(&lost, 1);
}

static __always_inline struct thread *current_thread(void)
{
	return bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(on_rx, struct sk_buff *skb)
{
	if (!sampling)
		return 0;
	__u32 zero = 0;
	struct rx_slot *r = bpf_map_lookup_elem(&rx_slot, &zero);
	if (r) {
		r->skb = (__u64)skb;
		r->ns = bpf_ktime_get_ns();
	}
	return 0;
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(on_tcp, struct sock *sk, const struct sk_buff *skb)
{
	if (!sampling)
		return 0;
	if (!port_ok(sk))
		return 0;
	__u32 zero = 0;
	struct rx_slot *r = bpf_map_lookup_elem(&rx_slot, &zero);
	struct sock_state *st = bpf_sk_storage_get(&socks, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return 0;
	st->pending.cand_rx = r && r->skb == (__u64)skb ? r->ns : 0;
	st->pending.cand_tcp = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sk_data_ready")
int BPF_PROG(on_ready, const struct sock *sk)
{
	if (!sampling)
		return 0;
	if (!port_ok(sk))
		return 0;
	struct sock_state *st = bpf_sk_storage_get(&socks, (struct sock *)sk, 0, 0);
	if (!st || st->pending.ready)
		return 0; /* no packet seen (attached mid-way), or older data waits */
	st->pending.rx = st->pending.cand_rx;
	st->pending.tcp = st->pending.cand_tcp;
	st->pending.ready = bpf_ktime_get_ns();
	return 0;
}

/* The worker asks for bytes (a read-family syscall's entry on fd). */
static __always_inline int read_entered(long fd)
{
	if (!sampling || !ours())
		return 0;
	struct thread *t = current_thread();
	if (t) {
		t->read_ns = bpf_ktime_get_ns();
		t->read_fd = (__s32)fd;
	}
	return 0;
}

/* The worker's epoll_wait (or pwait, pwait2) returns. */
static __always_inline int epoll_returned(void)
{
	if (!sampling || !ours())
		return 0;
	struct thread *t = current_thread();
	if (t)
		t->epoll_ns = bpf_ktime_get_ns();
	return 0;
}

/* The syscall boundaries come one of two ways (both are loaded;
 * tools/mclat/kernel.c attaches one):
 *   - the syscalls:* trace events of the syscalls watched (ev_*): their
 *     programs run only for those syscalls; tracefs must name them;
 *   - the raw sys_enter/sys_exit tracepoints (on_enter, on_exit), which
 *     run for every system call on the machine, filtered here. */
SEC("tracepoint/syscalls/sys_enter_read")
int ev_read(struct trace_event_raw_sys_enter *ctx)
{
	return read_entered((long)ctx->args[0]);
}

SEC("tracepoint/syscalls/sys_enter_readv")
int ev_readv(struct trace_event_raw_sys_enter *ctx)
{
	return read_entered((long)ctx->args[0]);
}

SEC("tracepoint/syscalls/sys_enter_recvfrom")
int ev_recvfrom(struct trace_event_raw_sys_enter *ctx)
{
	return read_entered((long)ctx->args[0]);
}

SEC("tracepoint/syscalls/sys_enter_recvmsg")
int ev_recvmsg(struct trace_event_raw_sys_enter *ctx)
{
	return read_entered((long)ctx->args[0]);
}

SEC("tracepoint/syscalls/sys_exit_epoll_wait")
int ev_epoll_wait(void *ctx)
{
	return epoll_returned();
}

SEC("tracepoint/syscalls/sys_exit_epoll_pwait")
int ev_epoll_pwait(void *ctx)
{
	return epoll_returned();
}

SEC("tracepoint/syscalls/sys_exit_epoll_pwait2")
int ev_epoll_pwait2(void *ctx)
{
	return epoll_returned();
}

SEC("tp_btf/sys_enter")
int BPF_PROG(on_enter, struct pt_regs *regs, long id)
{
	if (!sampling)
		return 0;
	if (id != NR_read && id != NR_readv && id != NR_recvfrom && id != NR_recvmsg)
		return 0;
	return read_entered((long)BPF_CORE_READ(regs, di));
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_exit, struct pt_regs *regs, long ret)
{
	if (!sampling)
		return 0;
	if (!ours())
		return 0;
	long id = BPF_CORE_READ(regs, orig_ax);
	if (id != NR_epoll_wait && id != NR_epoll_pwait && id != NR_epoll_pwait2)
		return 0;
	return epoll_returned();
}

/* Inside the worker's read: the socket the (tid, fd) read is on. */
SEC("tp_btf/sock_recv_length")
int BPF_PROG(on_recv, struct sock *sk, int ret, int flags)
{
	if (!sampling)
		return 0;
	/* The port also keeps out the agent's own UNIX socket (port 0). */
	if (ret <= 0 || (flags & MSG_PEEK_FLAG) || !ours() || !port_ok(sk))
		return 0;
	struct thread *t = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);
	if (!t || !t->read_ns)
		return 0;
	struct sock_state *st = bpf_sk_storage_get(&socks, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return 0;
	struct mclat_event *e = &st->inflight;
	if (e->tid)
		emit(e); /* its batch had no reply */
	e->read_ns = t->read_ns;
	e->done_ns = bpf_ktime_get_ns();
	e->tid = (__u32)bpf_get_current_pid_tgid();
	e->fd = t->read_fd;
	e->bytes = (__u32)ret;
	e->flags = 0;
	e->send_ns = e->xmit_ns = 0;
	t->read_ns = 0;
	e->epoll_ns = t->epoll_ns;
	if (t->epoll_ns)
		e->flags |= MCLAT_HAVE_EPOLL;
	e->rx_ns = e->tcp_ns = e->ready_ns = 0;
	struct pending *p = &st->pending;
	if (p->ready) {
		e->ready_ns = p->ready;
		e->flags |= MCLAT_HAVE_READY;
		if (p->rx && p->tcp) {
			e->rx_ns = p->rx;
			e->tcp_ns = p->tcp;
			e->flags |= MCLAT_HAVE_RX;
		}
		p->ready = 0; /* the next data is the next batch's */
	}
	return 0;
}

/* The worker starts its reply: TCP takes the bytes (after the
 * sendmsg/write syscall's entry, on that socket: no fd to resolve). */
SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(on_send, struct sock *sk)
{
	if (!sampling)
		return 0;
	if (!port_ok(sk))
		return 0;
	struct sock_state *st = bpf_sk_storage_get(&socks, sk, 0, 0);
	if (st && st->inflight.tid && !st->inflight.send_ns)
		st->inflight.send_ns = bpf_ktime_get_ns();
	return 0;
}

/* The reply leaves: the batch's event is complete. */
SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(on_xmit, const struct sk_buff *skb, const struct net_device *dev)
{
	if (!sampling)
		return 0;
	struct sock *sk = skb->sk;
	if (!sk)
		return 0;
	struct sock_state *st = bpf_sk_storage_get(&socks, sk, 0, 0);
	/* An ACK sent by the read itself comes before any reply: wait for
	 * the worker's send. */
	if (!st || !st->inflight.tid || !st->inflight.send_ns)
		return 0;
	struct mclat_event *e = &st->inflight;
	e->xmit_ns = bpf_ktime_get_ns();
	e->flags |= MCLAT_HAVE_TX;
	emit(e);
	replies++;
	e->tid = 0;
	return 0;
}
