/* SPDX-License-Identifier: GPL-2.0 */
/* The bare reflector's two halves, shared by the benchmark's programs
 * (bench/xdpprog) and the stage builds of steadydns.c: find a UDP
 * datagram to port 53, then send it back with addresses and ports swapped
 * and QR set. It does nothing else a DNS server must do. */
#ifndef STEADYDNS_REFLECT_H
#define STEADYDNS_REFLECT_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct reflection {
	struct ethhdr *eth;
	struct iphdr *ip;     /* NULL for IPv6 */
	struct ipv6hdr *ip6;  /* NULL for IPv4 */
	struct udphdr *udp;
	__be16 *flags;        /* the DNS header's flags word */
};

/* reflect_find fills r for a UDP datagram to port 53 whose DNS flags are
 * in the frame, and returns 0; else -1. */
static __always_inline int reflect_find(struct xdp_md *ctx, struct reflection *r)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return -1;
	r->eth = eth;
	r->ip = 0;
	r->ip6 = 0;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
			return -1;
		r->ip = ip;
		r->udp = (void *)(ip + 1);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end || ip6->nexthdr != IPPROTO_UDP)
			return -1;
		r->ip6 = ip6;
		r->udp = (void *)(ip6 + 1);
	} else {
		return -1;
	}
	if ((void *)(r->udp + 1) > data_end || r->udp->dest != bpf_htons(53))
		return -1;
	r->flags = (__be16 *)((__u8 *)(r->udp + 1) + 2);
	if ((void *)(r->flags + 1) > data_end)
		return -1;
	return 0;
}

/* reflect_send turns the datagram r found into its reply, with extra ORed
 * into the flags word: 0, but it lets the reply wait for a value. */
static __always_inline int reflect_send(struct reflection *r, __u16 extra)
{
	if (r->ip) {
		__be32 a = r->ip->saddr;
		r->ip->saddr = r->ip->daddr;
		r->ip->daddr = a;
	} else if (r->ip6) {
		struct in6_addr a = r->ip6->saddr;
		r->ip6->saddr = r->ip6->daddr;
		r->ip6->daddr = a;
	}
	struct udphdr *udp = r->udp;
	/* Address and port swaps leave the checksums valid; setting QR
	 * changes one 16-bit word, patched in as RFC 1624 eqn. 3 says. */
	__be16 port = udp->source;
	udp->source = udp->dest;
	udp->dest = port;
	__u16 old = *r->flags;
	__u16 new = old | bpf_htons(0x8000) | extra;
	*r->flags = new;
	if (udp->check) {
		__u32 c = (__u16)~udp->check + (__u16)~old + new;
		c = (c & 0xffff) + (c >> 16);
		c = (c & 0xffff) + (c >> 16);
		udp->check = (__u16)~c ? (__u16)~c : 0xffff;
	}
	struct ethhdr *eth = r->eth;
	__u8 mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	return XDP_TX;
}

#endif
