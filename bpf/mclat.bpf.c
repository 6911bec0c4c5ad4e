// SPDX-License-Identifier: GPL-2.0
/* mclat's kernel stages (issue 12): where one memcached read batch spent
 * its time between the wire and the worker, and between the worker's
 * reply and the device.
 *
 * Only tracepoints (this kernel has no kprobes and refuses fentry/fexit),
 * all tp_btf.  A request's path and the boundary each one marks:
 *
 *   net:netif_receive_skb(skb)      rx_ns    the stack takes the packet
 *   tcp:tcp_probe(sk, skb)          tcp_ns   TCP has it, on socket sk
 *   sock:sk_data_ready(sk)          ready_ns its data queued, epoll woken
 *   sys_exit epoll_wait/pwait/pwait2 epoll_ns the worker thread wakes
 *   sys_enter read/recvfrom/...     read_ns  it asks for the bytes (tid, fd)
 *   sock:sock_recv_length(sk, ret)  done_ns  the bytes copied out; inside
 *                                            that read, so (tid, fd) -> sk
 *                                            exactly, without walking the
 *                                            fd table
 *   sys_enter sendmsg/write/...     send_ns  the worker starts its reply
 *   net:net_dev_start_xmit(skb)     xmit_ns  the reply's first skb of sk
 *                                            reaches the device
 *
 * The packet is known by skb pointer until tcp_probe names its socket,
 * then everything is keyed by socket; syscalls are keyed by thread id and
 * filtered to memcached's process (target_tgid).  A socket's "pending"
 * boundaries are those of its oldest unread data: set by the first
 * sk_data_ready after a read, taken by the next read that returns bytes.
 * One event per read batch (a read that returned bytes: pipelined
 * requests share one) goes to the ring buffer when its reply reaches the
 * device, or, without a reply, when the next read on that socket starts
 * a new batch.  A full ring drops the event and counts it (lost): the
 * programs never wait.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "mclat.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 target_tgid; /* memcached's pid */
const volatile __u16 target_port; /* its TCP port, 0: every socket */

__u64 lost; /* events the full ring buffer refused */

/* x86-64 syscall numbers (the program is built for x86 only). */
#define NR_read 0
#define NR_write 1
#define NR_readv 19
#define NR_writev 20
#define NR_sendto 44
#define NR_recvfrom 45
#define NR_sendmsg 46
#define NR_recvmsg 47
#define NR_epoll_wait 232
#define NR_epoll_pwait 281
#define NR_epoll_pwait2 441
#define MSG_PEEK_FLAG 2

/* A worker thread's syscall boundaries. */
struct thread {
	__u64 epoll_ns; /* last epoll return */
	__u64 read_ns;  /* last read-family entry */
	__u64 send_ns;  /* last send-family entry */
	__s32 read_fd, send_fd;
};

/* A socket's oldest unread data; cand_* are its latest packet's, made
 * pending by the sk_data_ready that follows it. */
struct pending {
	__u64 cand_rx, cand_tcp;
	__u64 rx, tcp, ready;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* skb */
	__type(value, __u64);
} skb_rx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* sk */
	__type(value, struct pending);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* sk */
	__type(value, struct mclat_event);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tid */
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
	if (bpf_ringbuf_output(&events, e, sizeof(*e), 0))
		__sync_fetch_and_add(&lost, 1);
}

static __always_inline struct thread *thread_of(__u32 tid)
{
	struct thread *t = bpf_map_lookup_elem(&threads, &tid);
	if (t)
		return t;
	struct thread zero = { .read_fd = -1, .send_fd = -1 };
	bpf_map_update_elem(&threads, &tid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&threads, &tid);
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(on_rx, struct sk_buff *skb)
{
	__u64 key = (__u64)skb, now = bpf_ktime_get_ns();
	bpf_map_update_elem(&skb_rx, &key, &now, BPF_ANY);
	return 0;
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(on_tcp, struct sock *sk, const struct sk_buff *skb)
{
	if (!port_ok(sk))
		return 0;
	__u64 skey = (__u64)skb, key = (__u64)sk, now = bpf_ktime_get_ns();
	__u64 *rx = bpf_map_lookup_elem(&skb_rx, &skey);
	__u64 rx_ns = rx ? *rx : 0;
	if (rx)
		bpf_map_delete_elem(&skb_rx, &skey);
	struct pending *p = bpf_map_lookup_elem(&pending, &key);
	if (p) {
		p->cand_rx = rx_ns;
		p->cand_tcp = now;
	} else {
		struct pending n = { .cand_rx = rx_ns, .cand_tcp = now };
		bpf_map_update_elem(&pending, &key, &n, BPF_ANY);
	}
	return 0;
}

SEC("tp_btf/sk_data_ready")
int BPF_PROG(on_ready, const struct sock *sk)
{
	if (!port_ok(sk))
		return 0;
	__u64 key = (__u64)sk;
	struct pending *p = bpf_map_lookup_elem(&pending, &key);
	if (!p || p->ready)
		return 0; /* no packet seen (attached mid-way), or older data waits */
	p->rx = p->cand_rx;
	p->tcp = p->cand_tcp;
	p->ready = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(on_enter, struct pt_regs *regs, long id)
{
	if (!ours())
		return 0;
	int reading = id == NR_read || id == NR_readv || id == NR_recvfrom || id == NR_recvmsg;
	int sending = id == NR_write || id == NR_writev || id == NR_sendto || id == NR_sendmsg;
	if (!reading && !sending)
		return 0;
	struct thread *t = thread_of((__u32)bpf_get_current_pid_tgid());
	if (!t)
		return 0;
	__s32 fd = (__s32)BPF_CORE_READ(regs, di);
	if (reading) {
		t->read_ns = bpf_ktime_get_ns();
		t->read_fd = fd;
	} else {
		t->send_ns = bpf_ktime_get_ns();
		t->send_fd = fd;
	}
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_exit, struct pt_regs *regs, long ret)
{
	if (!ours())
		return 0;
	long id = BPF_CORE_READ(regs, orig_ax);
	if (id != NR_epoll_wait && id != NR_epoll_pwait && id != NR_epoll_pwait2)
		return 0;
	struct thread *t = thread_of((__u32)bpf_get_current_pid_tgid());
	if (t)
		t->epoll_ns = bpf_ktime_get_ns();
	return 0;
}

/* Inside the worker's read: the socket the (tid, fd) read is on. */
SEC("tp_btf/sock_recv_length")
int BPF_PROG(on_recv, struct sock *sk, int ret, int flags)
{
	/* The port also keeps out the agent's own UNIX socket (port 0). */
	if (ret <= 0 || (flags & MSG_PEEK_FLAG) || !ours() || !port_ok(sk))
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct thread *t = bpf_map_lookup_elem(&threads, &tid);
	if (!t || !t->read_ns)
		return 0;
	__u64 key = (__u64)sk;
	struct mclat_event *old = bpf_map_lookup_elem(&inflight, &key);
	if (old)
		emit(old); /* its batch had no reply */
	struct mclat_event e = {
		.read_ns = t->read_ns,
		.done_ns = bpf_ktime_get_ns(),
		.tid = tid,
		.fd = t->read_fd,
		.bytes = (__u32)ret,
	};
	t->read_ns = 0;
	if (t->epoll_ns) {
		e.epoll_ns = t->epoll_ns;
		e.flags |= MCLAT_HAVE_EPOLL;
	}
	struct pending *p = bpf_map_lookup_elem(&pending, &key);
	if (p && p->ready) {
		e.ready_ns = p->ready;
		e.flags |= MCLAT_HAVE_READY;
		if (p->rx && p->tcp) {
			e.rx_ns = p->rx;
			e.tcp_ns = p->tcp;
			e.flags |= MCLAT_HAVE_RX;
		}
		p->ready = 0; /* the next data is the next batch's */
	}
	bpf_map_update_elem(&inflight, &key, &e, BPF_ANY);
	return 0;
}

/* The reply leaves: the batch's event is complete. */
SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(on_xmit, const struct sk_buff *skb, const struct net_device *dev)
{
	__u64 key = (__u64)BPF_CORE_READ(skb, sk);
	if (!key)
		return 0;
	struct mclat_event *e = bpf_map_lookup_elem(&inflight, &key);
	if (!e)
		return 0;
	__u32 tid = e->tid;
	struct thread *t = bpf_map_lookup_elem(&threads, &tid);
	/* An ACK sent by the read itself comes before any reply: wait for
	 * the worker's send on this descriptor. */
	if (!t || t->send_fd != e->fd || t->send_ns < e->done_ns)
		return 0;
	e->send_ns = t->send_ns;
	e->xmit_ns = bpf_ktime_get_ns();
	e->flags |= MCLAT_HAVE_TX;
	emit(e);
	bpf_map_delete_elem(&inflight, &key);
	return 0;
}
