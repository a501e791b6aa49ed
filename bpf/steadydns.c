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
#include "table.h"
#include "select.h"
#include "nsid.h"
#include "rrl.h"

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
	__u32 zero = 0, i = o;
	__u64 *c = bpf_map_lookup_elem(&counters, &zero);
	/* The empty asm makes clang bound and index the one register the
	 * verifier checks, not a copy it zero-extends again. */
	asm volatile("" : "+r"(i));
	if (c && i < OUT_MAX)
		c[i] += 1;
	if (o == OUT_RRL_DROPPED)
		return XDP_DROP;
	return o <= OUT_SERVFAIL || o == OUT_RRL_SLIPPED ? XDP_TX : XDP_PASS;
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
	/* client address: 4 bytes for IPv4. Aligned, so rate limiting reads
	 * its prefix in one load. */
	__u8 src[16] __attribute__((aligned(8)));
	__u32 dns_off;  /* offset of the DNS message from the frame start */
	__u32 dns_len;
	__u16 sport;    /* the client's port, host order */
	__u8 v6;
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
	f->sport = bpf_ntohs(udp->source);
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
 * a veth frame is often too small (adjust_tail fails on most). The headers
 * move to the new start 8 bytes at a time, in ascending order, which is
 * safe for a move towards lower addresses; the words past the headers land
 * in the DNS message, which the caller rewrites whole. */
static __always_inline int resize(struct xdp_md *ctx, const struct frame *f, __s32 delta)
{
	if (delta <= 0)
		return delta ? bpf_xdp_adjust_tail(ctx, delta) : 0;
	if (delta > MSG_MAX)
		return -1;
	/* The headroom left for growth is XDP_PACKET_HEADROOM less the
	 * kernel's xdp_frame, about 216 bytes: a longer growth (8 AAAA
	 * answers) takes the tailroom instead, where there is some. The
	 * message then stays where it is and the headers need no move. */
	if (bpf_xdp_adjust_head(ctx, -delta))
		return bpf_xdp_adjust_tail(ctx, delta);
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 *dst = data;
	const __u64 *src = data + (delta & (MSG_MAX * 2 - 1));
	/* 6 words cover the IPv4 headers (42 bytes), 8 the IPv6 ones (62);
	 * a query frame is longer than either. */
	if ((void *)(dst + 8) <= data_end && (void *)(src + 8) <= data_end) {
#pragma unroll
		for (int i = 0; i < 8; i++)
			dst[i] = src[i];
		return 0;
	}
	if (f->v6 || (void *)(dst + 6) > data_end || (void *)(src + 6) > data_end)
		return -1;
#pragma unroll
	for (int i = 0; i < 6; i++)
		dst[i] = src[i];
	return 0;
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

	if (hash_name(s))
		return count(OUT_MALFORMED);
	int si = find_slot(s);
	if (si < 0)
		return count(OUT_NOT_FOUND);
	__u32 slot = si;
	struct rec_slot *sl = bpf_map_lookup_elem(&records, &slot);
	if (!sl)
		return count(OUT_NOT_FOUND);
	const struct rrset *rr = &sl->rr;
	if ((rr->flags & RR_SIGNED) && q.do_bit)
		return count(OUT_DNSSEC);

	/* No table yet: fail open. A stale table: the record's policy. */
	struct table_meta *tm = bpf_map_lookup_elem(&health_meta, &zero);
	__u32 *turn = bpf_map_lookup_elem(&rr_counter, &zero);
	s->draw.open = table_open(tm, rr->stale);
	s->draw.rnd = query_draw(f.sport, ((__u16)m[0] << 8) | m[1], s->q.hash);
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

	/* Rate limiting: an answer or NODATA is keyed by its name and type,
	 * SERVFAIL by its rcode. A slipped reply keeps the rcode and carries
	 * no records, with TC set, so the client asks again over TCP. */
	int slip = 0;
	if (rrl_on) {
		enum rrl_verdict v = rrl_check(f.src, f.v6, p.action == ACT_SERVFAIL ? RCODE_SERVFAIL : s->q.hash);
		if (v == RRL_DROP)
			return count(OUT_RRL_DROPPED);
		slip = v == RRL_SLIP;
	}

	/* The checksum of the part from the question's type on, as if it
	 * started at an even offset; it starts at 12 + name_len. */
	__u64 tail = *(const __u32 *)(m + at(q.q_end - 4));
	__u32 nsid_n = nsid_len(&q);
	__u32 opt_len = q.has_opt ? 11 + nsid_n : 0;
	__u32 limit = q.has_opt ? q.udp_size : 512;
	__u32 off = q.q_end, an = 0, ns = 0;
	__u8 flags3 = 0; /* RA, Z, AD, CD, rcode */
	__u8 aa = 0x04;
	o = OUT_ANSWERED;
	if (slip) {
		if (p.action == ACT_SERVFAIL) {
			flags3 = 2;
			aa = 0;
		}
		o = OUT_RRL_SLIPPED;
	} else if (p.action == ACT_ANSWER) {
		__u32 rsize = q.qtype == TYPE_A ? 16 : 28;
		an = p.n > K ? K : p.n;
		if (q.q_end + an * rsize + opt_len > limit)
			return count(OUT_TRUNCATED);
		__u32 ttl = answer_ttl(rr, p.degraded);
		tail += (__u64)an * bpf_htonl(ttl);
		/* No branch per record but the loop exit, so the verifier sees
		 * one path per answer count instead of one per subset. */
		for (__u32 i = 0; i < K; i++) {
			if (i >= an)
				break;
			__u32 c = p.order[i] & (K - 1);
			write_rr(m, off, q.qtype, ttl, rr->cand[c].addr);
			tail += rr->rr_sum[c];
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
		/* OPT: root, type 41, our size, version 0, DO copied, and
		 * NSID when asked for. */
		__u8 *p8 = m + at(off);
		*(__u16 *)p8 = 0;
		*(__u16 *)(p8 + 1) = bpf_htons(TYPE_OPT);
		*(__u16 *)(p8 + 3) = bpf_htons(EDNS_UDP_SIZE);
		*(__u32 *)(p8 + 5) = q.do_bit ? bpf_htonl(0x8000) : 0;
		*(__u16 *)(p8 + 9) = bpf_htons(nsid_n);
		/* Zeroed past its 11 bytes, for the sum's 12th; NSID's first
		 * byte, the code's high byte, is 0 too. */
		*(__u32 *)(p8 + 11) = 0;
		if (nsid_n)
			tail += write_nsid(m, off + 11, nsid_n);
		tail += (__u64)*(__u32 *)p8 + *(__u32 *)(p8 + 4) + *(__u32 *)(p8 + 8);
		off += 11 + nsid_n;
	}
	__u32 rlen = off;
	if (rlen > MSG_MAX - 8)
		return count(OUT_TRUNCATED);

	/* Header: QR and AA; ID, RD and CD copied; TC set only when slipped;
	 * RA, AD, Z cleared. */
	m[2] = 0x80 | aa | (slip ? 0x02 : 0) | (m[2] & 0x01);
	m[3] = (m[3] & 0x10) | flags3;
	*(__u16 *)(m + 6) = bpf_htons(an);
	*(__u16 *)(m + 8) = bpf_htons(ns);
	*(__u16 *)(m + 10) = bpf_htons(q.has_opt);

	__u64 psum;
	if (p.action == ACT_ANSWER || slip) {
		/* The reply's sum from parts: the header, the name as summed
		 * while hashing it, and the tail, byte-swapped when it starts
		 * at an odd offset. The answers' sums came precomputed. */
		__u16 t = csum_fold(tail);
		if (q.name_len & 1)
			t = (t << 8) | (t >> 8);
		psum = (__u64)*(__u32 *)m + *(__u32 *)(m + 4) + *(__u32 *)(m + 8) +
		       s->q.name_sum + t;
	} else {
		/* NODATA and SERVFAIL, off the hot path: the helper sums the
		 * message, zero-padded to a multiple of 4. */
		*(__u32 *)(m + at(rlen)) = 0;
		__s64 sum = buf_sum(m, (rlen + 3) & ~3u);
		if (sum < 0)
			return count(OUT_NO_ROOM);
		psum = (__u32)sum;
	}

	/* Everything read from the slot is in the reply now: if the control
	 * plane rewrote it meanwhile, the reply may mix two versions, and
	 * the fallback answers instead. */
	if (!slot_unchanged(sl, s->q.seq))
		return count(OUT_NOT_FOUND);

	__u32 wlen = at(rlen);
	if (wlen < DNS_HDR)
		return count(OUT_MALFORMED);
	if (resize(ctx, &f, (__s32)(f.dns_off + rlen) - (__s32)(data_end - data)))
		return count(OUT_NO_ROOM);
	if (bpf_xdp_store_bytes(ctx, f.dns_off, m, wlen))
		return count(OUT_NO_ROOM);
	if (finish_frame(ctx, &f, rlen, psum))
		return count(OUT_NO_ROOM);
	return count(o);
}

/* From the kernel's uapi (time.h, bpf.h since 6.7), which the build's
 * headers may predate. */
#ifndef CLOCK_BOOTTIME
#define CLOCK_BOOTTIME 7
#endif
#define TIMER_ABS 1 /* BPF_F_TIMER_ABS */

/* mark_stale sets stale_mark once the table is older than its
 * stale_after, or arms the timer for the first nanosecond it will be. The
 * table is read once, so a push that lands meanwhile is never marked with
 * the old table's arrival. */
static __always_inline void mark_stale(struct table_meta *tm, struct stale_timer *st)
{
	struct table_meta now_tm = *tm;
	if (!now_tm.version || !now_tm.stale_after_ns)
		return;
	if (table_old(&now_tm, bpf_ktime_get_boot_ns())) {
		tm->stale_mark = now_tm.arrived_ns;
		return;
	}
	bpf_timer_start(&st->t, now_tm.arrived_ns + now_tm.stale_after_ns + 1, TIMER_ABS);
}

static int stale_fired(void *map, __u32 *key, struct stale_timer *st)
{
	__u32 zero = 0;
	struct table_meta *tm = bpf_map_lookup_elem(&health_meta, &zero);
	if (tm)
		mark_stale(tm, st);
	return 0;
}

/* arm_stale runs once per health push, through BPF_PROG_RUN from the
 * loader, never on an interface: it marks the new table stale at once or
 * (re)arms the timer for when it will be. A timer armed by an earlier
 * program keeps running, now with this program's callback. */
SEC("xdp")
int arm_stale(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct stale_timer *st = bpf_map_lookup_elem(&stale_timer, &zero);
	struct table_meta *tm = bpf_map_lookup_elem(&health_meta, &zero);
	if (!st || !tm)
		return XDP_ABORTED;
	/* -EBUSY once initialised, by this load or an earlier one. */
	bpf_timer_init(&st->t, &stale_timer, CLOCK_BOOTTIME);
	if (bpf_timer_set_callback(&st->t, stale_fired))
		return XDP_ABORTED;
	mark_stale(tm, st);
	return XDP_PASS;
}

/* arm_rrl_clock starts the clock of rate limiting (rrl.h); the loader runs
 * it through BPF_PROG_RUN once after loading with rate limiting on. A
 * clock an earlier load started keeps running, now with this program's
 * callback. */
SEC("xdp")
int arm_rrl_clock(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct rrl_clock *c = bpf_map_lookup_elem(&rrl_clock, &zero);
	if (!c)
		return XDP_ABORTED;
	/* -EBUSY once initialised, by this load or an earlier one. */
	bpf_timer_init(&c->t, &rrl_clock, CLOCK_BOOTTIME);
	if (bpf_timer_set_callback(&c->t, rrl_tick))
		return XDP_ABORTED;
	c->now = bpf_ktime_get_boot_ns();
	bpf_timer_start(&c->t, RRL_TICK_NS, 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
