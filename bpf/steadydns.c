//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* steadydns: answer A/AAAA queries from the records and health maps with
 * XDP_TX; pass everything else, untouched, to the userspace fallback. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "types.h"
#include "maps.h"
#include "csum.h"
#include "dns.h"
#include "select.h"

/* The IP TTL and hop limit of replies. */
#define REPLY_TTL 64

/* The addresses XDP answers for, set at load time. */
volatile const __u32 nr_server_v4 = 0;
volatile const __be32 server_v4[MAX_SERVER_ADDRS] = {};
volatile const __u32 nr_server_v6 = 0;
volatile const __u8 server_v6[MAX_SERVER_ADDRS][16] = {};


const struct enum_anchor enum_anchor __attribute__((unused));

static __always_inline int count(enum outcome o)
{
	__u32 k = o;
	__u64 *c = bpf_map_lookup_elem(&counters, &k);
	if (c)
		*c += 1;
	return o <= OUT_SERVFAIL ? XDP_TX : XDP_PASS;
}

static __always_inline int is_server_v4(__be32 a)
{
#pragma unroll
	for (int i = 0; i < MAX_SERVER_ADDRS; i++)
		if (i < nr_server_v4 && server_v4[i] == a)
			return 1;
	return 0;
}

static __always_inline int is_server_v6(const struct in6_addr *a)
{
	const __u64 *x = (const __u64 *)a;
#pragma unroll
	for (int i = 0; i < MAX_SERVER_ADDRS; i++) {
		const volatile __u64 *s = (const volatile __u64 *)server_v6[i];
		if (i < nr_server_v6 && s[0] == x[0] && s[1] == x[1])
			return 1;
	}
	return 0;
}

static __always_inline int is_ext_header(__u8 nh)
{
	return nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING ||
	       nh == IPPROTO_FRAGMENT || nh == IPPROTO_DSTOPTS ||
	       nh == IPPROTO_AH || nh == IPPROTO_ESP || nh == 135 /* MH */;
}

/* Ethernet, IP and UDP header lengths: options and extension headers are
 * passed, so these are the only two. */
#define L2L4_V4 (14 + 20 + 8)
#define L2L4_V6 (14 + 40 + 8)

struct frame {
	__u32 dns_off;  /* offset of the DNS message from the frame start */
	__u32 dns_len;
	__u8 v6;
	__u8 src[16];   /* client address: 4 bytes for IPv4 */
};

/* parse_l3 finds the DNS message of a UDP datagram to a server address on
 * port 53, or returns the reason to pass the frame. */
static __always_inline int parse_l3(void *data, void *data_end, struct frame *f)
{
	struct ethhdr *eth = data;
	struct udphdr *udp;
	__u32 l4_len;

	if ((void *)(eth + 1) > data_end)
		return OUT_NOT_DNS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end)
			return OUT_NOT_DNS;
		/* The stack drops another version; answering it would reflect
		 * a packet no host sent as IPv4. */
		if (ip->version != 4)
			return OUT_MALFORMED;
		if (ip->protocol != IPPROTO_UDP || !is_server_v4(ip->daddr))
			return OUT_NOT_DNS;
		if (ip->frag_off & bpf_htons(0x3fff))
			return OUT_FRAGMENT;
		if (ip->ihl != 5)
			return OUT_IP_OPTIONS;
		udp = (void *)(ip + 1);
		__builtin_memcpy(f->src, &ip->saddr, 4);
		l4_len = bpf_ntohs(ip->tot_len);
		if (l4_len < sizeof(*ip))
			return OUT_MALFORMED;
		l4_len -= sizeof(*ip);
		f->v6 = 0;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			return OUT_NOT_DNS;
		if (ip6->version != 6)
			return OUT_MALFORMED;
		if (!is_server_v6(&ip6->daddr))
			return OUT_NOT_DNS;
		if (ip6->nexthdr != IPPROTO_UDP)
			return is_ext_header(ip6->nexthdr) ? OUT_IPV6_EXT
							   : OUT_NOT_DNS;
		udp = (void *)(ip6 + 1);
		__builtin_memcpy(f->src, &ip6->saddr, 16);
		l4_len = bpf_ntohs(ip6->payload_len);
		f->v6 = 1;
	} else {
		return OUT_NOT_DNS;
	}
	if ((void *)(udp + 1) > data_end)
		return OUT_MALFORMED;
	if (udp->dest != bpf_htons(53))
		return OUT_NOT_DNS;
	/* The IP and UDP lengths must agree and fit the frame; a frame may
	 * be longer (Ethernet padding). */
	if (bpf_ntohs(udp->len) != l4_len || l4_len < sizeof(*udp) + DNS_HDR)
		return OUT_MALFORMED;
	if ((void *)udp + l4_len > data_end)
		return OUT_MALFORMED;
	f->dns_off = (void *)(udp + 1) - data;
	f->dns_len = l4_len - sizeof(*udp);
	if (f->dns_len > MSG_MAX)
		return OUT_TOO_LONG;
	return OUT_ANSWERED;
}

/* write_rr appends one answer at message offset off; its owner is a
 * pointer to the question name, so the client's spelling is kept. */
static __always_inline void write_rr(__u8 *m, __u32 off, __u16 qtype,
				     __u32 ttl, const __u8 *addr)
{
	__u8 *p = m + at(off);
	*(__u16 *)p = bpf_htons(0xc00c);
	*(__u16 *)(p + 2) = bpf_htons(qtype);
	*(__u16 *)(p + 4) = bpf_htons(CLASS_IN);
	*(__u32 *)(p + 6) = bpf_htonl(ttl);
	*(__u16 *)(p + 10) = bpf_htons(qtype == TYPE_A ? 4 : 16);
	/* All 16 address bytes, also for A: the next record or the end of
	 * the message covers the 12 that do not belong. */
	*(__u64 *)(p + 12) = *(const __u64 *)addr;
	*(__u64 *)(p + 20) = *(const __u64 *)(addr + 8);
}

/* write_soa appends the zone's SOA at message offset off and returns the
 * offset past it. Its owner points into the question name, where the
 * zone's name is the suffix of the query name. */
static __always_inline __u32 write_soa(__u8 *m, __u32 off,
				       const struct query *q,
				       const struct zone_soa *z)
{
	__u8 *p = m + at(off);
	__u32 rdlen = z->rdlen;
	*(__u16 *)p = bpf_htons(0xc000 | (DNS_HDR + q->name_len - z->apex_len));
	*(__u16 *)(p + 2) = bpf_htons(6); /* SOA */
	*(__u16 *)(p + 4) = bpf_htons(CLASS_IN);
	*(__u32 *)(p + 6) = bpf_htonl(z->ttl);
	*(__u16 *)(p + 10) = bpf_htons(rdlen);
	for (__u32 w = 0; w < SOA_RDATA_MAX / 8; w++) {
		if (w * 8 >= rdlen)
			break;
		*(__u64 *)(m + at(off + 12 + w * 8)) = *(const __u64 *)(z->rdata + w * 8);
	}
	return off + 12 + rdlen;
}

/* client_region maps the source address to its region through the LPM
 * tries; 0 when no prefix matches. */
static __always_inline __u32 client_region(const struct frame *f)
{
	struct geo_match *g;
	if (f->v6) {
		struct geo_key6 k = { .prefixlen = 128 };
		__builtin_memcpy(k.addr, f->src, 16);
		g = bpf_map_lookup_elem(&geo6, &k);
	} else {
		struct geo_key4 k = { .prefixlen = 32 };
		__builtin_memcpy(k.addr, f->src, 4);
		g = bpf_map_lookup_elem(&geo4, &k);
	}
	return g ? g->region : 0;
}

/* finish_frame turns the query frame into the reply: swaps addresses and
 * ports, sets lengths, and computes both checksums from scratch. psum is
 * the partial sum of the DNS reply. */
static __always_inline int finish_frame(struct xdp_md *ctx, const struct frame *f,
					__u32 rlen, __u64 psum)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct udphdr *udp;
	__u8 mac[ETH_ALEN];
	__u32 ulen = sizeof(*udp) + rlen;
	__u64 sum = psum;

	if ((void *)(eth + 1) > data_end)
		return -1;
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);

	if (!f->v6) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end)
			return -1;
		__be32 a = ip->saddr;
		ip->saddr = ip->daddr;
		ip->daddr = a;
		ip->tot_len = bpf_htons(sizeof(*ip) + ulen);
		ip->ttl = REPLY_TTL;
		ip->check = ipv4_csum((const __u32 *)ip);
		sum += (__u64)ip->saddr + ip->daddr + bpf_htons(IPPROTO_UDP);
		udp = (void *)(ip + 1);
	} else {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			return -1;
		struct in6_addr a = ip6->saddr;
		ip6->saddr = ip6->daddr;
		ip6->daddr = a;
		ip6->payload_len = bpf_htons(ulen);
		ip6->hop_limit = REPLY_TTL;
		const __u32 *w = (const __u32 *)&ip6->saddr;
#pragma unroll
		for (int i = 0; i < 8; i++)
			sum += w[i];
		sum += bpf_htonl(IPPROTO_UDP);
		udp = (void *)(ip6 + 1);
	}
	if ((void *)(udp + 1) > data_end)
		return -1;
	__be16 port = udp->source;
	udp->source = udp->dest;
	udp->dest = port;
	udp->len = bpf_htons(ulen);
	/* The length counts twice: pseudo-header and UDP header. */
	sum += (__u64)udp->source + udp->dest + udp->len + udp->len;
	__u16 c = ~csum_fold(sum);
	udp->check = c ? c : 0xffff;
	return 0;
}

/* resize makes the frame delta bytes longer or shorter. Growth goes at the
 * head: drivers guarantee XDP_PACKET_HEADROOM there, while the tailroom of
 * a veth frame can be a few dozen bytes. The headers are saved and written
 * back at the new start; the DNS message is rewritten by the caller. On
 * failure the frame is unchanged. */
static __always_inline int resize(struct xdp_md *ctx, struct scratch *s,
				  const struct frame *f, __s32 delta)
{
	if (delta <= 0)
		return delta ? bpf_xdp_adjust_tail(ctx, delta) : 0;
	__u32 hlen = f->v6 ? L2L4_V6 : L2L4_V4;
	if (bpf_xdp_load_bytes(ctx, 0, s->hdr, hlen))
		return -1;
	if (bpf_xdp_adjust_head(ctx, -delta))
		return -1;
	return bpf_xdp_store_bytes(ctx, 0, s->hdr, hlen);
}

SEC("xdp")
int steadydns(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct frame f = {};
	__u32 zero = 0;
	int o;

	o = parse_l3(data, data_end, &f);
	if (o != OUT_ANSWERED)
		return count(o);

	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return count(OUT_MALFORMED);
	__u8 *m = s->buf + MSG_OFF;
	__u32 len = f.dns_len & (MSG_MAX * 2 - 1);
	if (len > MSG_MAX || len < DNS_HDR)
		return count(OUT_MALFORMED);
	if (bpf_xdp_load_bytes(ctx, f.dns_off, m, len))
		return count(OUT_MALFORMED);

	o = parse_query(s, len);
	if (o != OUT_ANSWERED)
		return count(o);
	struct query q = s->q;

	struct rrset *rr;
	__u32 bucket = build_key(s);
	if (bucket == KEY_NAME(name_key32))
		rr = bpf_map_lookup_elem(&rr32, s->key);
	else if (bucket == KEY_NAME(name_key64))
		rr = bpf_map_lookup_elem(&rr64, s->key);
	else if (bucket == KEY_NAME(name_key128))
		rr = bpf_map_lookup_elem(&rr128, s->key);
	else
		rr = bpf_map_lookup_elem(&rr256, s->key);
	if (!rr)
		return count(OUT_NOT_FOUND);
	if ((rr->flags & RR_SIGNED) && q.do_bit)
		return count(OUT_DNSSEC);

	/* No table yet: fail open. A stale table: the record's policy. */
	struct table_meta *tm = bpf_map_lookup_elem(&health_meta, &zero);
	__u32 *turn = bpf_map_lookup_elem(&rr_counter, &zero);
	s->draw.open = table_open(tm, rr->stale, bpf_ktime_get_boot_ns());
	s->draw.rnd = bpf_get_prandom_u32();
	s->draw.turn = turn ? (*turn)++ : 0;

	/* Geo: steer by the source address. A query with ECS asks to be
	 * steered by another address, which the fallback does. */
	const struct geo_order *order = 0;
	if (rr->flags & RR_GEO) {
		if (q.has_ecs)
			return count(OUT_ECS);
		__u32 region = client_region(&f);
		order = bpf_map_lookup_elem(&geo_rank, &region);
	}

	if (select_answers(s, rr, order))
		return count(OUT_MALFORMED);
	struct pick p = s->pick;

	__u32 opt_len = q.has_opt ? 11 : 0;
	__u32 limit = q.has_opt ? q.udp_size : 512;
	__u32 off = q.q_end, an = 0, ns = 0;
	__u8 flags3 = 0; /* RA, Z, AD, CD, rcode */
	__u8 aa = 0x04;
	o = OUT_ANSWERED;
	if (p.action == ACT_ANSWER) {
		__u32 rsize = q.qtype == TYPE_A ? 16 : 28;
		an = p.n > K ? K : p.n;
		if (q.q_end + an * rsize + opt_len > limit)
			return count(OUT_TRUNCATED);
		__u32 ttl = answer_ttl(rr, p.degraded);
		/* No branch per record but the loop exit, so the verifier sees
		 * one path per answer count instead of one per subset. */
		for (__u32 i = 0; i < K; i++) {
			if (i >= an)
				break;
			write_rr(m, off, q.qtype, ttl, rr->cand[p.order[i] & (K - 1)].addr);
			off += rsize;
		}
	} else if (p.action == ACT_NODATA) {
		/* NODATA: no answer, the zone's SOA in authority (RFC 2308). */
		__u32 zi = rr->zone;
		struct zone_soa *z = bpf_map_lookup_elem(&zones, &zi);
		if (!z || !z->rdlen || z->rdlen > SOA_RDATA_MAX || z->apex_len > q.name_len)
			return count(OUT_NO_SOA);
		if (q.q_end + 12 + z->rdlen + opt_len > limit)
			return count(OUT_TRUNCATED);
		off = write_soa(m, off, &q, z);
		ns = 1;
		o = OUT_NODATA;
	} else {
		/* SERVFAIL: not authoritative, nothing but the question. */
		flags3 = 2;
		aa = 0;
		o = OUT_SERVFAIL;
	}
	if (q.has_opt) {
		/* OPT: root, type 41, our size, version 0, DO copied. */
		__u8 *p8 = m + at(off);
		*(__u16 *)p8 = 0;
		*(__u16 *)(p8 + 1) = bpf_htons(TYPE_OPT);
		*(__u16 *)(p8 + 3) = bpf_htons(EDNS_UDP_SIZE);
		*(__u32 *)(p8 + 5) = q.do_bit ? bpf_htonl(0x8000) : 0;
		*(__u16 *)(p8 + 9) = 0;
		off += 11;
	}
	__u32 rlen = off;
	if (rlen > MSG_MAX - 8)
		return count(OUT_TRUNCATED);

	/* Header: QR and AA; ID, RD and CD copied; TC, RA, AD, Z cleared. */
	m[2] = 0x80 | aa | (m[2] & 0x01);
	m[3] = (m[3] & 0x10) | flags3;
	*(__u16 *)(m + 6) = bpf_htons(an);
	*(__u16 *)(m + 8) = bpf_htons(ns);
	*(__u16 *)(m + 10) = bpf_htons(q.has_opt);

	/* Zero-pad to a multiple of 4 for the checksum helper. */
	*(__u32 *)(m + at(rlen)) = 0;
	__s64 psum = buf_sum(m, (rlen + 3) & ~3u);
	if (psum < 0)
		return count(OUT_NO_ROOM);

	__u32 wlen = at(rlen);
	if (wlen < DNS_HDR)
		return count(OUT_MALFORMED);
	if (resize(ctx, s, &f, (__s32)(f.dns_off + rlen) - (__s32)(data_end - data)))
		return count(OUT_NO_ROOM);
	if (bpf_xdp_store_bytes(ctx, f.dns_off, m, wlen))
		return count(OUT_NO_ROOM);
	if (finish_frame(ctx, &f, rlen, (__u32)psum))
		return count(OUT_NO_ROOM);
	return count(o);
}

char LICENSE[] SEC("license") = "GPL";
