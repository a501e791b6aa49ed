/* SPDX-License-Identifier: GPL-2.0 */
/* Parsing the DNS query once it sits in the scratch buffer. Offsets are
 * message offsets; every read is masked to the buffer so the verifier can
 * bound it, and every read is checked against the message length first. */
#ifndef STEADYDNS_DNS_H
#define STEADYDNS_DNS_H

#include <linux/bpf.h>
#include <bpf/bpf_endian.h>
#include "types.h"
#include "maps.h"

#define DNS_HDR 12
#define TYPE_A 1
#define TYPE_AAAA 28
#define TYPE_OPT 41
#define CLASS_IN 1
#define MAX_OPTIONS 16
#define OPT_NSID 3
#define OPT_ECS 8


/* Mask a message offset for the verifier. The empty asm hides the value
 * from clang, which would otherwise drop the mask where it can prove the
 * bound from earlier length checks that the verifier does not link. */
static __always_inline __u32 at(__u32 off)
{
	asm volatile("" : "+r"(off));
	return off & MSG_MASK;
}

/* Mask a frame offset for the verifier, the same way: frames are at most
 * a page, so 2 KiB bounds every offset a reply is written at. */
static __always_inline __u32 frame_at(__u32 off)
{
	asm volatile("" : "+r"(off));
	return off & 0x7ff;
}

/* The DNS message in the frame: its start, masked so the verifier bounds
 * every offset from it, and the frame's end. The message is parsed where
 * it lies, with no copy: each read is checked against the frame's end (the
 * checks cannot fail for a message within its UDP length, which parse_l3
 * checked against the frame, but the verifier needs them). */
struct msg {
	const __u8 *data;
	const __u8 *end;
	__u32 base;      /* the message's offset in the frame */
};

static __always_inline struct msg msg_of(struct xdp_md *ctx, __u32 base)
{
	struct msg m = {
		.data = (const __u8 *)(long)ctx->data,
		.end = (const __u8 *)(long)ctx->data_end,
		.base = base & 0x7f,
	};
	return m;
}

/* The byte at message offset off, or -1 past the frame. */
static __always_inline int rd8(const struct msg *m, __u32 off)
{
	const __u8 *p = m->data + frame_at(m->base + off);
	if (p + 1 > m->end)
		return -1;
	return *p;
}

/* The 16-bit big-endian word at message offset off, or -1 past the frame. */
static __always_inline int rd16(const struct msg *m, __u32 off)
{
	const __u8 *p = m->data + frame_at(m->base + off);
	if (p + 2 > m->end)
		return -1;
	return bpf_ntohs(*(const __u16 *)p);
}

/* walk_name follows the question name label by label and returns the
 * offset of its root label, or minus the reason to pass the query. */
static __always_inline int walk_name(struct xdp_md *ctx, __u32 base, __u32 len)
{
	struct msg m = msg_of(ctx, base);
	__u32 pos = DNS_HDR;
	int done = 0;
	/* 128 labels of at least 2 bytes exceed the 255-byte limit. */
	for (int i = 0; i < 128; i++) {
		if (pos >= len)
			return -OUT_MALFORMED;
		int l = rd8(&m, pos);
		if (l < 0)
			return -OUT_MALFORMED;
		if (l == 0) {
			done = 1;
			break;
		}
		if ((l & 0xc0) == 0xc0)
			return -OUT_COMPRESSION;
		if (l > 63)
			return -OUT_MALFORMED;
		pos += l + 1;
		if (pos - DNS_HDR >= NAME_MAX_WIRE)
			return -OUT_MALFORMED;
	}
	return done ? (int)pos : -OUT_MALFORMED;
}

/* ecs_malformed reports whether the ECS option at o is one the fallback
 * refuses: shorter than its fixed part, an unknown family, or a prefix
 * length longer than its family's address. */
static __always_inline int ecs_malformed(const struct msg *m, __u32 o, __u32 end)
{
	if (rd16(m, o + 2) < 4 || o + 8 > end)
		return 1;
	int family = rd16(m, o + 4);
	int source = rd8(m, o + 6), scope = rd8(m, o + 7);
	if (source < 0 || scope < 0)
		return 1;
	switch (family) {
	case 0:
		return source != 0;
	case 1:
		return source > 32 || scope > 32;
	case 2:
		return source > 128 || scope > 128;
	}
	return 1;
}

/* parse_query checks the header, the question and the optional OPT
 * record of the message at frame offset base, len bytes long, and fills
 * s->q. It returns OUT_ANSWERED when the query is one XDP may answer, or
 * the reason to pass it on. */
static __always_inline int parse_query(struct xdp_md *ctx, struct scratch *s,
					  __u32 base, __u32 len)
{
	if (!s || len > MSG_MAX || len < DNS_HDR)
		return OUT_MALFORMED;
	struct msg m = msg_of(ctx, base);
	struct query *q = &s->q;

	/* QR=0 and opcode 0; QDCOUNT=1, ANCOUNT=NSCOUNT=0, ARCOUNT<=1. */
	const __u8 *h = m.data + m.base;
	if (h + DNS_HDR > m.end)
		return OUT_MALFORMED;
	if (h[2] & 0xf8)
		return OUT_NOT_QUERY;
	/* The four counts in one load, little-endian: QDCOUNT's low byte
	 * (h[5]) is bits 8..15, ARCOUNT's (h[11]) bits 56..63, which may be
	 * 0 or 1. */
	if ((*(const __u64 *)(h + 4) & ~(1ULL << 56)) != 0x100)
		return OUT_NOT_QUERY;
	q->id = ((__u16)h[0] << 8) | h[1];
	q->flags2 = h[2];
	q->flags3 = h[3];
	__u8 arcount = h[11];

	int end_of_name = walk_name(ctx, base, len);
	if (end_of_name < 0)
		return -end_of_name;
	__u32 pos = end_of_name;
	if (pos > DNS_HDR + NAME_MAX_WIRE)
		return OUT_MALFORMED;
	q->name_len = pos - DNS_HDR + 1;
	q->q_end = pos + 5;
	if (q->q_end > len)
		return OUT_MALFORMED;
	if (rd16(&m, pos + 3) != CLASS_IN)
		return OUT_QCLASS;
	int qtype = rd16(&m, pos + 1);
	if (qtype != TYPE_A && qtype != TYPE_AAAA)
		return OUT_QTYPE;
	q->qtype = qtype;

	q->has_opt = 0;
	q->do_bit = 0;
	q->has_ecs = 0;
	q->nsid = 0;
	q->udp_size = 512;
	if (!arcount)
		return q->q_end == len ? OUT_ANSWERED : OUT_MALFORMED;

	/* The additional record must be OPT: root, type 41. */
	__u32 o = q->q_end;
	if (o + 11 > len)
		return OUT_MALFORMED;
	if (rd8(&m, o) != 0 || rd16(&m, o + 1) != TYPE_OPT)
		return OUT_ADDITIONAL;
	if (rd8(&m, o + 6) != 0)
		return OUT_EDNS_VERSION;
	int rdlen = rd16(&m, o + 9);
	if (rdlen < 0)
		return OUT_MALFORMED;
	__u32 end = o + 11 + rdlen;
	if (end != len)
		return OUT_OPT_MALFORMED;
	/* Options are length-checked; ECS and NSID are noted, the rest
	 * ignored (COOKIE too). */
	o += 11;
	for (int i = 0; i < MAX_OPTIONS; i++) {
		if (o >= end)
			break;
		if (o + 4 > end)
			return OUT_OPT_MALFORMED;
		int code = rd16(&m, o), olen = rd16(&m, o + 2);
		if (code < 0 || olen < 0)
			return OUT_MALFORMED;
		if (code == OPT_ECS) {
			/* A malformed ECS is the fallback's to refuse with
			 * FORMERR (RFC 7871 §6), even for a record ECS does
			 * not steer: family, source and scope prefix lengths
			 * as the fallback checks them. */
			if (ecs_malformed(&m, o, end))
				return OUT_OPT_MALFORMED;
			q->has_ecs = 1;
		}
		/* An NSID option asks for ours; its payload, which a client
		 * sends empty, is ignored (RFC 5001 §2.1). */
		if (code == OPT_NSID)
			q->nsid = 1;
		o += 4 + olen;
	}
	if (o != end)
		return OUT_OPT_MALFORMED;

	int size = rd16(&m, q->q_end + 3), flags = rd8(&m, q->q_end + 7);
	if (size < 0 || flags < 0)
		return OUT_MALFORMED;
	q->udp_size = size < 512 ? 512 : size;
	q->do_bit = flags >> 7;
	q->has_opt = 1;
	return OUT_ANSWERED;
}

/* Lowercase ASCII letters in 8 bytes at once. Label lengths (0..63) are
 * below 'A', so the whole wire name can be folded without parsing it. */
static __always_inline __u64 lower8(__u64 v)
{
	const __u64 ones = 0x0101010101010101ULL;
	__u64 heptets = v & (0x7f * ones);
	__u64 ge_a = heptets + (0x80 - 'A') * ones;
	__u64 gt_z = heptets + (0x7f - 'Z') * ones;
	__u64 upper = ~v & (ge_a ^ gt_z) & (0x80 * ones);
	return v | (upper >> 2);
}

/* The multiplier of name_hash: 2^64 divided by the golden ratio. */
#define HASH_MUL 0x9E3779B97F4A7C15ULL

/* hash_name copies the lowercased name of the message at frame offset
 * base into s->key, 8 bytes at a time, sums it as sent for the reply's
 * checksum, and hashes it on the way: name_hash, which loader.NameHash
 * computes the same way for the slots it fills. The table picks a slot by
 * the hash's top bits, which depend on every bit of the input; the low
 * bits of a multiply do not. */
static __always_inline int hash_name(struct xdp_md *ctx, struct scratch *s, __u32 base)
{
	if (!s)
		return -1;
	struct msg m = msg_of(ctx, base);
	__u64 *dst = (__u64 *)s->key;
	struct query *q = &s->q;
	__u32 n = q->name_len;
	if (n > NAME_MAX_WIRE)
		return -1;
	__u64 h = n, sum = 0;

	for (__u32 w = 0; w < (NAME_MAX_WIRE + 1) / 8; w++) {
		__u32 at = w * 8;
		if (at >= n)
			break;
		const __u8 *p = m.data + frame_at(m.base + DNS_HDR + at);
		__u64 v;
		/* The question's type and class follow the name, so a last
		 * word of up to 4 bytes has 4 more, and a longer one 8. */
		if (p + 8 <= m.end)
			v = *(const __u64 *)p;
		else if (n - at <= 4 && p + 4 <= m.end)
			v = *(const __u32 *)p;
		else
			return -1;
		if (n - at < 8)
			v &= (1ULL << ((n - at) * 8)) - 1;
		sum += (v & 0xffffffff) + (v >> 32);
		v = lower8(v);
		dst[w] = v;
		h = (h ^ v) * HASH_MUL;
		h ^= h >> 29;
	}
	h = (h ^ q->qtype) * HASH_MUL;
	q->hash = h ^ (h >> 32);
	q->name_sum = sum;
	return 0;
}

#endif
