/* SPDX-License-Identifier: GPL-2.0 */
/* Parsing the DNS query once it sits in the scratch buffer. Offsets are
 * message offsets; every read is masked to the buffer so the verifier can
 * bound it, and every read is checked against the message length first. */
#ifndef STEADYDNS_DNS_H
#define STEADYDNS_DNS_H

#include <linux/bpf.h>
#include "types.h"
#include "maps.h"

#define DNS_HDR 12
#define TYPE_A 1
#define TYPE_AAAA 28
#define TYPE_OPT 41
#define CLASS_IN 1
#define MAX_OPTIONS 16
#define OPT_ECS 8


/* Mask a message offset for the verifier. The empty asm hides the value
 * from clang, which would otherwise drop the mask where it can prove the
 * bound from earlier length checks that the verifier does not link. */
static __always_inline __u32 at(__u32 off)
{
	asm volatile("" : "+r"(off));
	return off & MSG_MASK;
}

static __always_inline __u16 rd16(const __u8 *m, __u32 off)
{
	return ((__u16)m[at(off)] << 8) | m[at(off + 1)];
}

/* walk_name follows the question name label by label and returns the
 * offset of its root label, or minus the reason to pass the query.
 *
 * Parsing is split into global functions: the verifier checks each once
 * on its own, and sees its result as an unknown number, so the states of
 * one label walk do not multiply those of the next step. */
__attribute__((noinline)) int walk_name(struct scratch *s, __u32 len)
{
	if (!s)
		return -OUT_MALFORMED;
	const __u8 *m = s->buf + MSG_OFF;
	__u32 pos = DNS_HDR;
	int done = 0;
	/* 128 labels of at least 2 bytes exceed the 255-byte limit. */
	for (int i = 0; i < 128; i++) {
		if (pos >= len)
			return -OUT_MALFORMED;
		__u8 l = m[at(pos)];
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
static __always_inline int ecs_malformed(const __u8 *m, __u32 o, __u32 end)
{
	if (rd16(m, o + 2) < 4 || o + 8 > end)
		return 1;
	__u16 family = rd16(m, o + 4);
	__u8 source = m[at(o + 6)], scope = m[at(o + 7)];
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
 * record, and fills s->q. It returns OUT_ANSWERED when the query is one
 * XDP may answer, or the reason to pass it on. */
__attribute__((noinline)) int parse_query(struct scratch *s, __u32 len)
{
	if (!s || len > MSG_MAX)
		return OUT_MALFORMED;
	const __u8 *m = s->buf + MSG_OFF;
	struct query *q = &s->q;

	/* QR=0 and opcode 0; QDCOUNT=1, ANCOUNT=NSCOUNT=0, ARCOUNT<=1. */
	if (m[2] & 0xf8)
		return OUT_NOT_QUERY;
	if (rd16(m, 4) != 1 || rd16(m, 6) || rd16(m, 8) || rd16(m, 10) > 1)
		return OUT_NOT_QUERY;

	int end_of_name = walk_name(s, len);
	if (end_of_name < 0)
		return -end_of_name;
	__u32 pos = end_of_name;
	if (pos > DNS_HDR + NAME_MAX_WIRE)
		return OUT_MALFORMED;
	q->name_len = pos - DNS_HDR + 1;
	q->q_end = pos + 5;
	if (q->q_end > len)
		return OUT_MALFORMED;
	if (rd16(m, pos + 3) != CLASS_IN)
		return OUT_QCLASS;
	q->qtype = rd16(m, pos + 1);
	if (q->qtype != TYPE_A && q->qtype != TYPE_AAAA)
		return OUT_QTYPE;

	q->has_opt = 0;
	q->do_bit = 0;
	q->has_ecs = 0;
	q->udp_size = 512;
	if (!m[11])
		return q->q_end == len ? OUT_ANSWERED : OUT_MALFORMED;

	/* The additional record must be OPT: root owner, type 41. */
	__u32 o = q->q_end;
	if (o + 11 > len)
		return OUT_MALFORMED;
	if (m[at(o)] != 0 || rd16(m, o + 1) != TYPE_OPT)
		return OUT_ADDITIONAL;
	if (m[at(o + 6)] != 0)
		return OUT_EDNS_VERSION;
	__u32 end = o + 11 + rd16(m, o + 9);
	if (end != len)
		return OUT_OPT_MALFORMED;
	/* Options are length-checked and otherwise ignored (COOKIE too). */
	o += 11;
	for (int i = 0; i < MAX_OPTIONS; i++) {
		if (o >= end)
			break;
		if (o + 4 > end)
			return OUT_OPT_MALFORMED;
		if (rd16(m, o) == OPT_ECS) {
			/* A malformed ECS is the fallback's to refuse with
			 * FORMERR (RFC 7871 §6), even for a record ECS does
			 * not steer: family, source and scope prefix lengths
			 * as the fallback checks them. */
			if (ecs_malformed(m, o, end))
				return OUT_OPT_MALFORMED;
			q->has_ecs = 1;
		}
		o += 4 + rd16(m, o + 2);
	}
	if (o != end)
		return OUT_OPT_MALFORMED;

	__u16 size = rd16(m, q->q_end + 3);
	q->udp_size = size < 512 ? 512 : size;
	q->do_bit = m[at(q->q_end + 7)] >> 7;
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

/* build_key copies the lowercased name into s->key, zero-filled up to its
 * bucket size, with the qtype after it in host order. Returns the bucket
 * size: the name size of the smallest key type the name fits, which the
 * loader's RecordClass computes from the same types. */
__attribute__((noinline)) int build_key(struct scratch *s)
{
	if (!s)
		return 0;
	const __u8 *m = s->buf + MSG_OFF;
	__u8 *key = s->key;
	const struct query *q = &s->q;
	__u32 n = q->name_len;
	if (n > NAME_MAX_WIRE)
		return 0;
	__u32 bucket = n <= KEY_NAME(name_key32)    ? KEY_NAME(name_key32)
		       : n <= KEY_NAME(name_key64)  ? KEY_NAME(name_key64)
		       : n <= KEY_NAME(name_key128) ? KEY_NAME(name_key128)
						    : KEY_NAME(name_key256);
	const __u64 *src = (const __u64 *)(m + DNS_HDR);
	__u64 *dst = (__u64 *)key;

	for (__u32 w = 0; w < KEY_NAME(name_key256) / 8; w++) {
		__u32 at = w * 8;
		if (at >= bucket)
			break;
		__u64 v = 0;
		if (at < n) {
			v = lower8(src[w]);
			if (n - at < 8)
				v &= (1ULL << ((n - at) * 8)) - 1;
		}
		dst[w] = v;
	}
	*(__u16 *)(key + (bucket & 0x1ff)) = q->qtype;
	return bucket;
}

#endif
