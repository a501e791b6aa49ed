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
#include "sigs.h"
#include "sample.h"

/* Stage builds: the benchmark's breakdown by stage measures the program
 * cut after each stage, compiled from this file with STAGE defined
 * (bench/xdpprog's Stage* objects). A cut program returns the query to
 * its client as the bare reflector does (reflect.h), the reply waiting
 * for a value the stage produced, and does nothing after the stage. Each
 * stage includes the ones before it, so what a stage adds to the one
 * before is what it costs under load. Without STAGE, STAGE_END is
 * nothing: the program built is the one served. */
#define STAGE_PARSE 1  /* Ethernet, IP and UDP, then header, name, type, OPT */
#define STAGE_HASH 2   /* the name lowercased, hashed and summed */
#define STAGE_LOOKUP 3 /* the probe, and the set's slot */
#define STAGE_SELECT 4 /* health, the draw and the selection, the copy-out */
#define STAGE_GROW 5   /* the frame grown: at its tail, or at its head with the headers moved */
#ifdef STAGE
#include "reflect.h"

static __always_inline int stage_send(struct xdp_md *ctx, __u64 v)
{
	struct reflection r;
	if (reflect_find(ctx, &r))
		return XDP_PASS;
	/* v ANDed with a 0 clang cannot see, as in bench/xdpprog/tableread.c. */
	__u64 none = 0;
	asm volatile("" : "+r"(none));
	return reflect_send(&r, (__u16)(v & none));
}
#define STAGE_END(n, v)                                 \
	do {                                            \
		if (STAGE == (n))                       \
			return stage_send(ctx, (v));    \
	} while (0)
#else
#define STAGE_END(n, v) do { } while (0)
#endif

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

/* count_aborted ends a query whose frame was already changed when a bound
 * the verifier insists on failed, which the reply's sizing rules out: the
 * frame is no longer the query, so it cannot pass to the fallback. */
static __always_inline int count_aborted(void)
{
	count(OUT_NO_ROOM);
	return XDP_ABORTED;
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

/* The most of a query's frame its reply keeps in place: the headers, the
 * DNS header and the question; a power of two, so offsets are masked to it. */
#define KEEP_MAX 512
_Static_assert(L2L4_V6 + 12 + NAME_MAX_WIRE + 4 <= KEEP_MAX,
	       "KEEP_MAX holds the IPv6 headers and the longest question");

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
	__u32 ulen = sizeof(struct udphdr) + rlen;
	__u64 sum = psum;

	/* Every field is read before any is written, and the sums come
	 * from the values in registers: a load that reads back narrower
	 * stores waits for them (no store-to-load forwarding). */
	if ((void *)(eth + 1) > data_end)
		return -1;
	__u8 mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);

	struct udphdr *udp;
	if (!f->v6) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end)
			return -1;
		__u32 *w = (__u32 *)ip;
		__u32 sa = w[3], da = w[4];
		/* Version, IHL, TOS and the new total length; ID and
		 * fragment as they were; TTL, protocol, a zero checksum. */
		__u32 w0 = (w[0] & 0xffff) | (__u32)bpf_htons(sizeof(*ip) + ulen) << 16;
		__u32 w1 = w[1];
		__u32 w2 = (w[2] & 0xff00) | REPLY_TTL;
		w[0] = w0;
		w[2] = w2;
		w[3] = da;
		w[4] = sa;
		ip->check = ~csum_fold((__u64)w0 + w1 + w2 + sa + da);
		sum += (__u64)sa + da + bpf_htons(IPPROTO_UDP);
		udp = (void *)(ip + 1);
	} else {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			return -1;
		__u64 *a = (__u64 *)&ip6->saddr;
		__u64 s0 = a[0], s1 = a[1], d0 = a[2], d1 = a[3];
		a[0] = d0;
		a[1] = d1;
		a[2] = s0;
		a[3] = s1;
		ip6->payload_len = bpf_htons(ulen);
		ip6->hop_limit = REPLY_TTL;
		sum += (s0 & 0xffffffff) + (s0 >> 32) + (s1 & 0xffffffff) + (s1 >> 32) +
		       (d0 & 0xffffffff) + (d0 >> 32) + (d1 & 0xffffffff) + (d1 >> 32) +
		       bpf_htonl(IPPROTO_UDP);
		udp = (void *)(ip6 + 1);
	}
	if ((void *)(udp + 1) > data_end)
		return -1;
	__u32 ports = *(__u32 *)udp;
	__u32 len = bpf_htons(ulen);
	/* The ports swapped, the length; the length counts twice:
	 * pseudo-header and UDP header. */
	*(__u32 *)udp = ports >> 16 | ports << 16;
	udp->len = len;
	sum += (__u64)(ports & 0xffff) + (ports >> 16) + len + len;
	__u16 c = ~csum_fold(sum);
	udp->check = c ? c : 0xffff;
	return 0;
}

/* move_down moves the frame's first keep bytes (the headers, the DNS
 * header and the question) delta bytes towards its new start, after
 * bpf_xdp_adjust_head grew it by delta there: 32 bytes at a time, in
 * ascending order, which is safe for a move towards lower addresses, with
 * one pair of bounds checks per 32 bytes instead of per word. The last 32
 * bytes are loaded first, so that keep need not be a multiple of 32: they
 * are stored, overlapping the chunk before them, once the loop is done.
 * Returns 0, or -1 with the frame as it was, or -2 with the frame changed,
 * which the bounds checked first rule out. */
static __always_inline int move_down(struct xdp_md *ctx, __u32 keep, __u32 delta)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 d = delta & (MSG_MAX * 2 - 1);
	if (keep < 32 || keep > KEEP_MAX || data + d + keep > data_end) {
		bpf_xdp_adjust_head(ctx, delta);
		return -1;
	}
	const __u64 *ls = data + frame_at(d + keep - 32);
	if ((void *)(ls + 4) > data_end) {
		bpf_xdp_adjust_head(ctx, delta);
		return -1;
	}
	__u64 l0 = ls[0], l1 = ls[1], l2 = ls[2], l3 = ls[3];
	for (__u32 i = 0; i < KEEP_MAX / 32; i++) {
		if (i * 32 + 32 > keep)
			break;
		__u64 *dst = data + i * 32;
		const __u64 *src = data + frame_at(d + i * 32);
		if ((void *)(src + 4) > data_end || (void *)(dst + 4) > data_end)
			return -2;
		__u64 a = src[0], b = src[1], c = src[2], e = src[3];
		dst[0] = a;
		dst[1] = b;
		dst[2] = c;
		dst[3] = e;
	}
	__u64 *ld = data + frame_at(keep - 32);
	if ((void *)(ld + 4) > data_end)
		return -2;
	ld[0] = l0;
	ld[1] = l1;
	ld[2] = l2;
	ld[3] = l3;
	return 0;
}

/* The growth bpf_xdp_adjust_head allows at most: XDP_PACKET_HEADROOM, which
 * drivers and veth leave before every frame, less the kernel's struct
 * xdp_frame (40 bytes), which must stay in front. */
#define HEAD_GROWTH 216

/* resize makes the frame delta bytes longer or shorter, its first keep
 * bytes (everything the reply keeps of the query) at the same offsets from
 * its start. A growth that fits the frame's likely tailroom goes at the
 * tail, where nothing moves. The context does not say how much tailroom
 * a frame has, but a buffer sized to its frame rounded up to a cache line,
 * as veth's copy of a frame is, has (-len) mod 64 bytes, and a driver's
 * page more: enough for an answer or two. A wrong guess costs one refused
 * call before the head's; asking the tail first for every growth would be
 * refused on veth for most replies of four answers and more. Any other
 * growth goes at the head: drivers guarantee XDP_PACKET_HEADROOM there. A
 * growth past HEAD_GROWTH (8 AAAA answers, or 7 signed A) needs the tail
 * anyway, so the tail is asked for all of it first: a driver's page (or
 * BPF_PROG_RUN's) takes it in one call with nothing moved. veth's buffer
 * refuses, and the tail then takes the few bytes past HEAD_GROWTH and the
 * head HEAD_GROWTH. Returns 0, or -1 with the frame as it was, or -2 with
 * the frame changed. */
static __always_inline int resize(struct xdp_md *ctx, __u32 keep, __s32 delta)
{
	if (delta <= 0)
		return delta && bpf_xdp_adjust_tail(ctx, delta) ? -1 : 0;
	if (delta > MSG_MAX)
		return -1;
	__u32 len = ctx->data_end - ctx->data;
	if ((__u32)delta <= (-len & 63) && !bpf_xdp_adjust_tail(ctx, delta))
		return 0;
	if (delta <= HEAD_GROWTH) {
		if (bpf_xdp_adjust_head(ctx, -delta))
			return -1;
		return move_down(ctx, keep, delta);
	}
	if (!bpf_xdp_adjust_tail(ctx, delta))
		return 0;
	if (bpf_xdp_adjust_tail(ctx, delta - HEAD_GROWTH))
		return -1;
	if (!bpf_xdp_adjust_head(ctx, -HEAD_GROWTH))
		return move_down(ctx, keep, HEAD_GROWTH) ? -2 : 0;
	return bpf_xdp_adjust_tail(ctx, HEAD_GROWTH - delta) ? -2 : -1;
}

/* size_reply makes the query's frame as long as its reply, s->reply's
 * rlen, before a byte of it is written: the reply is then sure to go out
 * when its account is charged. It sets the reply's dns_len to match.
 * Returns resize's. */
static __always_inline int size_reply(struct xdp_md *ctx, struct scratch *s)
{
	if (!s)
		return -1;
	struct reply *rp = &s->reply;
	__u32 q_end = s->q.q_end, rlen = rp->rlen;
	if (q_end > KEEP_MAX)
		return -1;
	int r = resize(ctx, (rp->dns_off & 0x7f) + q_end, (__s32)rlen - (__s32)rp->dns_len);
	if (!r)
		rp->dns_len = rlen;
	return r;
}

/* shrink makes the frame -delta bytes shorter at its tail, as a slipped
 * reply needs once the frame is sized for the answer: what it keeps stays
 * where it is. A growth, which resize does, is refused. */
static __always_inline int shrink(struct xdp_md *ctx, __s32 delta)
{
	if (delta > 0)
		return -1;
	return delta && bpf_xdp_adjust_tail(ctx, delta) ? -1 : 0;
}

/* write_reply turns the frame, the query's headers and question followed
 * by rp->dns_len bytes of message in all, into the reply from s->q and
 * s->reply, in place: the headers, the DNS header and the question stay,
 * the answers (s->ans) and the OPT (with rp->opt) follow the question,
 * and the header fields, lengths and checksums are rewritten. The caller
 * has sized the frame for the answer already (size_reply), so that no
 * account is charged for a query passed for want of room: here it only
 * shrinks, to a slipped reply. Returns 0, or -1 with the frame no longer
 * the query, which the reply's sizing rules out. */
static __always_inline int write_reply(struct xdp_md *ctx, struct scratch *s)
{
	if (!s)
		return -1;
	const struct query *q = &s->q;
	const struct reply *rp = &s->reply;
	__u32 an = rp->an, rlen = rp->rlen, nsid_n = rp->nsid_n;
	__u32 q_end = q->q_end, qtype = q->qtype, has_opt = rp->opt;
	__u32 rsize = qtype == TYPE_A ? 16 : 28;
	__u32 base = rp->dns_off & 0x7f;
	__u64 tail = rp->tail;
	if (an > MAX_ANSWERS || q_end > KEEP_MAX)
		return -1;
	if (shrink(ctx, (__s32)rlen - (__s32)rp->dns_len))
		return -1;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *h = data + base;
	if ((void *)(h + DNS_HDR) > data_end)
		return -1;
	/* The header's words as the sum reads them, from registers: ID,
	 * flags; QDCOUNT 1, ANCOUNT; NSCOUNT 0, ARCOUNT. */
	__u32 w0 = (__u32)bpf_htons(q->id) | (__u32)rp->flags2 << 16 | (__u32)rp->flags3 << 24;
	__u32 w1 = (__u32)bpf_htons(1) | (__u32)bpf_htons(an + rp->sig_n) << 16;
	__u32 w2 = (__u32)bpf_htons(has_opt) << 16;
	*(__u16 *)(h + 2) = w0 >> 16;
	*(__u32 *)(h + 4) = w1;
	*(__u32 *)(h + 8) = w2;
	__u64 psum = (__u64)w0 + w1 + w2;

	/* Every answer's first 12 bytes are the same: a pointer to the
	 * question's name (the client's spelling kept), type, class, TTL and
	 * the address's length. */
	__u32 off = base + q_end;
	__u32 ttl = bpf_htonl(rp->ttl);
	__u64 rec0 = (__u64)bpf_htons(0xc00c) | (__u64)bpf_htons(qtype) << 16 |
		     (__u64)bpf_htons(CLASS_IN) << 32 | (__u64)(ttl & 0xffff) << 48;
	__u32 rec1 = (ttl >> 16) | (__u32)bpf_htons(rsize - 12) << 16;
	if (qtype == TYPE_A) {
		for (__u32 i = 0; i < MAX_ANSWERS; i++) {
			if (i >= an)
				break;
			__u8 *p = data + frame_at(off);
			if ((void *)(p + 16) > data_end)
				return -1;
			*(__u64 *)p = rec0;
			*(__u32 *)(p + 8) = rec1;
			*(__u32 *)(p + 12) = *(const __u32 *)s->ans[i];
			off += 16;
		}
	} else {
		for (__u32 i = 0; i < MAX_ANSWERS; i++) {
			if (i >= an)
				break;
			__u8 *p = data + frame_at(off);
			if ((void *)(p + 28) > data_end)
				return -1;
			const __u64 *a = (const __u64 *)s->ans[i];
			*(__u64 *)p = rec0;
			*(__u32 *)(p + 8) = rec1;
			*(__u64 *)(p + 12) = a[0];
			*(__u64 *)(p + 20) = a[1];
			off += 28;
		}
	}
	/* The RRSIGs find_sig copied out: whole 32-byte blocks, one bounds
	 * check each, then whole words; the last word's bytes past them are
	 * the OPT's, written over next (a signed reply has one). Their length
	 * is read afresh for each step, so the verifier learns nothing from
	 * where a loop stopped. */
	__u32 w32 = 0;
	for (__u32 w = 0; w < SIG_BYTES_MAX / 32; w++) {
		if (w * 32 + 32 > *(volatile const __u32 *)&rp->sig_len)
			break;
		w32 = w + 1;
		__u64 *p = data + frame_at(off + w * 32);
		if ((void *)(p + 4) > data_end)
			return -1;
		const __u64 *g = (const __u64 *)(s->sig + w * 32);
		__u64 a = g[0], b = g[1], c = g[2], e = g[3];
		p[0] = a;
		p[1] = b;
		p[2] = c;
		p[3] = e;
	}
	for (__u32 w = 0; w < 4; w++) {
		__u32 o8 = (w32 & 31) * 32 + w * 8;
		if (o8 >= *(volatile const __u32 *)&rp->sig_len)
			break;
		__u8 *p = data + frame_at(off + o8);
		if ((void *)(p + 8) > data_end)
			return -1;
		*(__u64 *)p = *(const __u64 *)(s->sig + (o8 & 1023));
	}
	off += rp->sig_len & (MSG_MAX - 1);
	if (has_opt) {
		/* OPT: root, type 41, our size, version 0, DO copied, and
		 * NSID when asked for. Its 11 bytes as the sum reads them, in
		 * three words, the 12th byte 0: NSID's first byte, the code's
		 * high byte, or past the message. */
		__u64 w01 = (__u64)bpf_htons(TYPE_OPT) << 8 |
			    (__u64)bpf_htons(EDNS_UDP_SIZE) << 24 |
			    (__u64)(q->do_bit ? 0x80 : 0) << 56;
		__u32 w2 = (__u32)bpf_htons(nsid_n) << 8;
		__u8 *op = data + frame_at(off);
		if ((void *)(op + 11) > data_end)
			return -1;
		*(__u64 *)op = w01;
		op[8] = 0;
		*(__u16 *)(op + 9) = bpf_htons(nsid_n);
		__u64 opt_sum = (w01 & 0xffffffff) + (w01 >> 32) + w2;
		if (nsid_n) {
			if (write_nsid_frame(ctx, off + 11, nsid_n))
				return -1;
			opt_sum += nsid.sum;
		}
		/* After RRSIGs of an odd length, the OPT's bytes fall on the
		 * other halves of the sum's words. */
		__u16 os = csum_fold(opt_sum);
		tail += rp->sig_len & 1 ? (__u16)(os << 8 | os >> 8) : os;
	}

	/* The reply's sum from parts: the header, the name as summed while
	 * hashing it, and the tail, byte-swapped when it starts at an odd
	 * offset. The answers' sums came precomputed. */
	__u16 t = csum_fold(tail);
	if (q->name_len & 1)
		t = (t << 8) | (t >> 8);
	psum += q->name_sum + t;
	struct frame f = { .v6 = rp->v6 };
	return finish_frame(ctx, &f, rlen, psum) ? -1 : 0;
}

/* slip_built cuts the reply built in the scratch buffer, len bytes, to
 * its header and question, TC set and no records (no OPT either), and
 * sends it over the frame, which is sized for the whole reply. */
static __always_inline int slip_built(struct xdp_md *ctx, const struct frame *f,
				      struct scratch *s, __u32 len)
{
	__u8 *m = s->buf + MSG_OFF;
	__u32 rlen = s->q.q_end, wlen = at(rlen);
	if (wlen < DNS_HDR || rlen > len || shrink(ctx, (__s32)rlen - (__s32)len))
		return count_aborted();
	m[2] |= 0x02;
	*(__u32 *)(m + 8) = 0;
	*(__u32 *)(m + wlen) = 0;
	__s64 sum = buf_sum(m, (rlen + 3) & ~3u);
	if (sum < 0 || bpf_xdp_store_bytes(ctx, f->dns_off, m, wlen) ||
	    finish_frame(ctx, f, rlen, (__u32)sum))
		return count_aborted();
	sample_reply(ctx, f->dns_off, rlen);
	return count(OUT_RRL_SLIPPED);
}

/* send_built sends the reply built in the scratch buffer (s->reply's
 * rlen bytes, summing to its tail) over the query's message, as outcome
 * o, once the frame is sized for it and its account (of the key hashed
 * h, or SERVFAIL's) is charged. */
static __always_inline int send_built(struct xdp_md *ctx, const struct frame *f,
				      struct scratch *s, __u64 h, int servfail, int o)
{
	__u8 *m = s->buf + MSG_OFF;
	const struct reply *rp = &s->reply;
	__u32 rlen = rp->rlen, wlen = at(rlen), q_end = s->q.q_end;
	if (rlen > MSG_MAX - 8 || wlen < DNS_HDR || q_end > KEEP_MAX)
		return count(OUT_MALFORMED);
	int r = resize(ctx, (rp->dns_off & 0x7f) + q_end, (__s32)rlen - (__s32)rp->dns_len);
	if (r == -1)
		return count(OUT_NO_ROOM);
	if (r)
		return count_aborted();
	if (rrl_on) {
		enum rrl_verdict v = rrl_check(f->src, f->v6, h, servfail);
		if (v == RRL_DROP)
			return count(OUT_RRL_DROPPED);
		if (v == RRL_SLIP) {
			reread_scratch();
			return slip_built(ctx, f, s, rlen);
		}
	}
	if (bpf_xdp_store_bytes(ctx, f->dns_off, m, wlen) ||
	    finish_frame(ctx, f, rlen, (__u32)rp->tail))
		return count_aborted();
	sample_reply(ctx, f->dns_off, rlen);
	return count(o);
}

/* reply_nodata_servfail answers NODATA, with the zone's SOA in authority
 * (RFC 2308), or SERVFAIL, with nothing but the question. Off the hot
 * path, the reply is built whole in the scratch buffer, summed by the
 * helper and stored over the frame's message (send_built), charged to
 * the key hashed h (rrl_touch's) or to SERVFAIL's. */
static __always_inline int reply_nodata_servfail(struct xdp_md *ctx, const struct frame *f,
						 struct scratch *s, __u32 action, __u32 zi, __u64 h)
{
	__u8 *m = s->buf + MSG_OFF;
	struct query q = s->q;
	__u32 len = f->dns_len & (MSG_MAX * 2 - 1);
	if (len > MSG_MAX || len < DNS_HDR)
		return count(OUT_MALFORMED);
	if (bpf_xdp_load_bytes(ctx, f->dns_off, m, len))
		return count(OUT_MALFORMED);
	__u32 nsid_n = nsid_len(&q);
	__u32 opt_len = q.has_opt ? 11 + nsid_n : 0;
	__u32 limit = q.has_opt ? q.udp_size : 512;
	__u32 off = q.q_end, ns = 0;
	__u8 flags3 = 2, aa = 0; /* SERVFAIL: not authoritative */
	enum outcome o = OUT_SERVFAIL;
	if (action == ACT_NODATA && s->reply.sig_len) {
		/* Signed: the authority section made ahead (sigs.h). */
		__u32 sig_len = s->reply.sig_len & (MSG_MAX - 1);
		if (q.q_end + sig_len + opt_len > limit)
			return count(OUT_TRUNCATED);
		if (copy_denial(m, off, s))
			return count(OUT_DNSSEC);
		off += sig_len;
		ns = s->reply.sig_n;
		flags3 = 0;
		aa = 0x04;
		o = OUT_NODATA;
	} else if (action == ACT_NODATA) {
		struct zone_soa *z = bpf_map_lookup_elem(&zones, &zi);
		if (!z || !z->rdlen || z->rdlen > SOA_RDATA_MAX || z->apex_len > q.name_len)
			return count(OUT_NO_SOA);
		if (q.q_end + 12 + z->rdlen + opt_len > limit)
			return count(OUT_TRUNCATED);
		off = write_soa(m, off, &q, z);
		ns = 1;
		flags3 = 0;
		aa = 0x04;
		o = OUT_NODATA;
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
		if (nsid_n)
			write_nsid(m, off + 11, nsid_n);
		off += 11 + nsid_n;
	}
	__u32 rlen = off;
	if (rlen > MSG_MAX - 8)
		return count(OUT_TRUNCATED);
	m[2] = 0x80 | aa | (m[2] & 0x01);
	m[3] = (m[3] & 0x10) | flags3;
	*(__u16 *)(m + 6) = 0;
	*(__u16 *)(m + 8) = bpf_htons(ns);
	*(__u16 *)(m + 10) = bpf_htons(q.has_opt);
	/* The helper sums the message, zero-padded to a multiple of 4. */
	*(__u32 *)(m + at(rlen)) = 0;
	__s64 sum = buf_sum(m, (rlen + 3) & ~3u);
	if (sum < 0)
		return count(OUT_NO_ROOM);
	/* The rest reads the reply's length and sum back from the scratch,
	 * as reread_scratch() describes: each way the reply was built then
	 * reaches the resize, and the charge, in one state. */
	struct reply *rp = &s->reply;
	rp->rlen = rlen;
	rp->tail = (__u32)sum;
	rp->dns_off = f->dns_off;
	rp->dns_len = f->dns_len;
	reread_scratch();
	return send_built(ctx, f, s, h, action == ACT_SERVFAIL, o);
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

	o = parse_query(ctx, s, f.dns_off, f.dns_len);
	if (o != OUT_ANSWERED)
		return count(o);
	reread_scratch();
	struct query q = s->q;
	STAGE_END(STAGE_PARSE, q.q_end + q.qtype);

	if (hash_name(ctx, s, f.dns_off))
		return count(OUT_MALFORMED);
	/* An answer's account, fetched while the record slot is. */
	__u64 rrl_h = 0;
	if (rrl_on)
		rrl_h = rrl_touch(f.src, f.v6, s->q.hash);
	STAGE_END(STAGE_HASH, s->q.hash + rrl_h);
	if (find_slot(s))
		return count(OUT_NOT_FOUND);
	__u32 slot = s->q.slot;
	struct rec_slot *sl = bpf_map_lookup_elem(&records, &slot);
	if (!sl)
		return count(OUT_NOT_FOUND);
	/* The slot holds the set's fields whether or not the set is its
	 * own: an ext set's are there too, flagged RR_EXT. */
	const struct rrset *rr = (const struct rrset *)&sl->rr;
	STAGE_END(STAGE_LOOKUP, rr->flags);

	/* No table yet: fail open. A stale table: the record's policy. */
	struct table_meta *tm = bpf_map_lookup_elem(&health_meta, &zero);
	__u32 *turn = bpf_map_lookup_elem(&rr_counter, &zero);
	s->draw.open = table_open(tm, rr->stale);
	s->draw.rnd = query_draw(f.sport, q.id, s->q.hash);
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

	__u32 stride = q.qtype == TYPE_A ? STATIC_STRIDE_A : STATIC_STRIDE_AAAA;
	int sel;
	if (rr->flags & RR_EXT) {
		__u32 e = sl->rr.ext;
		const struct rec_ext *x = bpf_map_lookup_elem(&rec_exts, &e);
		if (!x)
			return count(OUT_NOT_FOUND);
		sel = select_answers(s, &x->rr, order, stride);
	} else {
		sel = select_head(s, &sl->rr, stride);
	}
	if (sel)
		return count(OUT_MALFORMED);
	reread_scratch();
	/* The pick's fields read one by one, each as wide as select_answers
	 * stored it: a wider load over the order's byte stores would wait
	 * for them to reach the cache (no store-to-load forwarding). */
	const struct pick *p = &s->pick;

	/* Everything the reply takes from the slot is copied out before the
	 * slot's sequence count is read again: if the control plane rewrote
	 * the set meanwhile, the fallback answers instead, and the frame is
	 * still untouched. */
	__u32 an = 0, ttl = 0, zi = rr->zone;
	/* The checksum of the part from the question's type on, as if it
	 * started at an even offset; it starts at 12 + name_len. */
	__u64 tail = (__u32)bpf_htons(q.qtype) | (__u32)bpf_htons(CLASS_IN) << 16;
	if (p->action == ACT_ANSWER) {
		/* The selection copied the answers' addresses out as it
		 * picked them, and added up their sums. */
		an = p->n > MAX_ANSWERS ? MAX_ANSWERS : p->n;
		ttl = answer_ttl(rr, p->degraded);
		tail += p->sum + (__u64)an * bpf_htonl(ttl);
	}
	/* A signed set's DO=1 answer carries the RRSIGs of exactly its
	 * answers, and its NODATA the signed SOA and NSEC, all made ahead
	 * of the query (a NODATA's under content and TTL 0); without them
	 * the fallback signs. SERVFAIL needs none. */
	struct reply *rp = &s->reply;
	rp->sig_len = 0;
	rp->sig_n = 0;
	if ((rr->flags & RR_SIGNED) && q.do_bit) {
		if (p->action == ACT_NODATA && find_sig(s, 0, 0, 1) < 0)
			return count(OUT_DNSSEC);
		if (p->action == ACT_ANSWER) {
			__s64 sum = find_sig(s, an, ttl, q.qtype == TYPE_A);
			if (sum < 0)
				return count(OUT_DNSSEC);
			tail += sum;
		}
	}
	/* Signed or not, one state from here on. */
	reread_scratch();
	__u32 sig_len = rp->sig_len & (MSG_MAX - 1);
	if (!slot_unchanged(sl, s->q.seq))
		return count(OUT_NOT_FOUND);
	STAGE_END(STAGE_SELECT, tail + an + ttl);
	/* From here on the query gets a reply or passes to the fallback:
	 * dnstap's sample is decided while the query is still in the frame. */
	sample_query(ctx, f.dns_off, f.dns_len, f.src, f.sport, f.v6);
	/* Rate limiting: an answer or NODATA is keyed by its name and type,
	 * SERVFAIL by its rcode. A query is charged only once the reply
	 * that goes out is settled, as the query is then no longer passed
	 * to the fallback, which charges what it answers. */
	if (p->action != ACT_ANSWER)
		return reply_nodata_servfail(ctx, &f, s, p->action, zi, rrl_h);

	__u32 nsid_n = nsid_len(&q);
	__u32 opt_len = q.has_opt ? 11 + nsid_n : 0;
	__u32 limit = q.has_opt ? q.udp_size : 512;
	__u32 rsize = q.qtype == TYPE_A ? 16 : 28;
	__u32 rlen = q.q_end + an * rsize + sig_len + opt_len;
	if (rlen > limit || rlen > MSG_MAX)
		return count(OUT_TRUNCATED);

	/* Header: QR and AA; ID, RD and CD copied; RA, AD, Z cleared. */
	rp->tail = tail;
	rp->an = an;
	rp->ttl = ttl;
	rp->rlen = rlen;
	rp->nsid_n = nsid_n;
	rp->opt = q.has_opt;
	rp->flags2 = 0x84 | (q.flags2 & 0x01);
	rp->flags3 = q.flags3 & 0x10;
	rp->dns_off = f.dns_off;
	rp->dns_len = f.dns_len;
	rp->v6 = f.v6;
	reread_scratch();
	int r = size_reply(ctx, s);
	STAGE_END(STAGE_GROW, r);
	if (r == -1)
		return count(OUT_NO_ROOM);
	if (r)
		return count_aborted();
	o = OUT_ANSWERED;
	if (rrl_on) {
		enum rrl_verdict v = rrl_check(f.src, f.v6, rrl_h, 0);
		if (v == RRL_DROP)
			return count(OUT_RRL_DROPPED);
		if (v == RRL_SLIP) {
			/* The header, TC set, and the question alone: no
			 * records, no OPT, so never larger than the query, and
			 * the client asks again over TCP. */
			rp->tail = (__u32)bpf_htons(s->q.qtype) | (__u32)bpf_htons(CLASS_IN) << 16;
			rp->an = 0;
			rp->rlen = s->q.q_end;
			rp->nsid_n = 0;
			rp->opt = 0;
			rp->sig_len = 0;
			rp->sig_n = 0;
			rp->flags2 |= 0x02;
			o = OUT_RRL_SLIPPED;
		}
	}
	reread_scratch();
	if (write_reply(ctx, s))
		return count_aborted();
	sample_reply(ctx, f.dns_off, s->reply.rlen);
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
