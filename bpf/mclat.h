/* SPDX-License-Identifier: MIT */
/* mclat's kernel event: one read batch of one memcached
 * connection, as bpf/mclat.bpf.c sends it through its ring buffer and
 * tools/mclat reads it.  Shared by the BPF program (vmlinux.h types) and
 * the tool (<stdint.h>), so it uses only the __u32/__u64 names both have.
 *
 * Every time is bpf_ktime_get_ns(): CLOCK_MONOTONIC, the clock the probe
 * module's clock_gettime() reads, so the two sides join. */
#ifndef MCLAT_BPF_H
#define MCLAT_BPF_H

/* Which of the boundaries below were seen (the others are 0). */
#define MCLAT_HAVE_RX 1u    /* rx_ns and tcp_ns: the first unread packet */
#define MCLAT_HAVE_READY 2u /* ready_ns: sk_data_ready for it */
#define MCLAT_HAVE_EPOLL 4u /* epoll_ns: the worker's last epoll return */
#define MCLAT_HAVE_TX 8u    /* send_ns and xmit_ns: the reply left */

struct mclat_event {
	__u64 rx_ns;    /* net:netif_receive_skb of the batch's first packet */
	__u64 tcp_ns;   /* tcp:tcp_probe of that packet (TCP took it) */
	__u64 ready_ns; /* sock:sk_data_ready: its data queued, waiters woken */
	__u64 epoll_ns; /* the worker's last epoll_wait/epoll_pwait(2) return */
	__u64 read_ns;  /* the worker's read/recvfrom/recvmsg/readv entry */
	__u64 done_ns;  /* sock:sock_recv_length in it: the bytes copied out */
	__u64 send_ns;  /* tcp:tcp_sendmsg_locked: the reply reaches TCP */
	__u64 xmit_ns;  /* net:net_dev_start_xmit of the reply's first skb */
	__u32 tid;      /* the worker's thread id */
	__s32 fd;       /* the read's descriptor: memcached's connid */
	__u32 bytes;    /* bytes the read returned */
	__u32 flags;    /* MCLAT_HAVE_* */
};

#endif
