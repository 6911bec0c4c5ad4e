/* SPDX-License-Identifier: MIT OR GPL-2.0-only */
/* bpf_floor.bpf.c -- the cost floor of mclat's kernel stages:
 * programs that do nothing, on every hook mclat's programs use
 * (bpf/mclat.bpf.c), so that bench/mclat_bench.py can measure what
 * merely running a BPF program at each of those points costs memcached.
 * Whatever mclat does inside its programs comes on top of this. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

/* MIT, declared dual with the GPL: the kernel lets only a GPL-compatible
 * program call its GPL-only helpers (bpf_probe_read_kernel and others). */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define NOTHING(sec, name)              \
	SEC(sec) int name(void *ctx)    \
	{                               \
		(void)ctx;              \
		return 0;               \
	}

NOTHING("tp_btf/netif_receive_skb", on_rx)
NOTHING("tp_btf/tcp_probe", on_tcp)
NOTHING("tp_btf/sk_data_ready", on_ready)
NOTHING("tracepoint/syscalls/sys_enter_read", ev_read)
NOTHING("tracepoint/syscalls/sys_enter_readv", ev_readv)
NOTHING("tracepoint/syscalls/sys_enter_recvfrom", ev_recvfrom)
NOTHING("tracepoint/syscalls/sys_enter_recvmsg", ev_recvmsg)
NOTHING("tracepoint/syscalls/sys_exit_epoll_wait", ev_epoll_wait)
NOTHING("tracepoint/syscalls/sys_exit_epoll_pwait", ev_epoll_pwait)
NOTHING("tracepoint/syscalls/sys_exit_epoll_pwait2", ev_epoll_pwait2)
NOTHING("tp_btf/sock_recv_length", on_recv)
NOTHING("tp_btf/tcp_sendmsg_locked", on_send)
NOTHING("tp_btf/net_dev_start_xmit", on_xmit)
