//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* The benchmark's ceiling: a bare XDP reflector. It sends every UDP datagram
 * to port 53 back with addresses and ports swapped and QR set, and does
 * nothing else a DNS server must do. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int reflector(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct udphdr *udp;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
			return XDP_PASS;
		udp = (void *)(ip + 1);
		if ((void *)(udp + 1) > data_end || udp->dest != bpf_htons(53))
			return XDP_PASS;
		__be32 a = ip->saddr;
		ip->saddr = ip->daddr;
		ip->daddr = a;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end || ip6->nexthdr != IPPROTO_UDP)
			return XDP_PASS;
		udp = (void *)(ip6 + 1);
		if ((void *)(udp + 1) > data_end || udp->dest != bpf_htons(53))
			return XDP_PASS;
		struct in6_addr a = ip6->saddr;
		ip6->saddr = ip6->daddr;
		ip6->daddr = a;
	} else {
		return XDP_PASS;
	}
	__be16 *flags = (__be16 *)((__u8 *)(udp + 1) + 2);
	if ((void *)(flags + 1) > data_end)
		return XDP_PASS;
	/* Address and port swaps leave the checksums valid; setting QR
	 * changes one 16-bit word, patched in as RFC 1624 eqn. 3 says. */
	__be16 port = udp->source;
	udp->source = udp->dest;
	udp->dest = port;
	__u16 old = *flags;
	__u16 new = old | bpf_htons(0x8000);
	*flags = new;
	if (udp->check) {
		__u32 c = (__u16)~udp->check + (__u16)~old + new;
		c = (c & 0xffff) + (c >> 16);
		c = (c & 0xffff) + (c >> 16);
		udp->check = (__u16)~c ? (__u16)~c : 0xffff;
	}
	__u8 mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
