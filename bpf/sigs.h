/* SPDX-License-Identifier: GPL-2.0 */
/* Signed answers. For a set of a zone signed online, the control plane
 * signs every answer set the selection can produce at the health it
 * applies, ahead of any query, and writes each set's RRSIGs into sigs.
 * A DO=1 query then looks up the RRSIGs of exactly the answers it picked
 * and appends them; without an entry, it goes to the fallback, which
 * signs online. No cryptography runs here. */
#ifndef STEADYDNS_SIGS_H
#define STEADYDNS_SIGS_H

#include <bpf/bpf_helpers.h>
#include "types.h"

enum sig_limits {
	/* The entries sigs holds, created as written. */
	SIG_ENTRIES = 65536,
};

/* Which answers an entry signs: the set (its name and type), the RRset
 * the answers make, whatever their order, and its TTL. epoch is
 * sig_epoch's when the entry was written: the control plane writes
 * refreshed signatures under a new epoch and then moves sig_epoch on, so
 * an entry is never rewritten in place while a query may be reading it. */
struct sig_key {
	__u64 hash;     /* name_hash of the set's name and type */
	__u64 content;  /* answer_content of the answers, added up */
	__u32 ttl;
	__u32 epoch;
};

struct sig_value {
	__u16 len;    /* bytes of rr in use */
	__u16 count;  /* RRSIG records in rr */
	/* The ones-complement sum of rr[0..len), zero-padded to even, in
	 * little-endian 16-bit words from rr[0]: records after the answers
	 * start where the answers' tail sum does. */
	__u32 sum;
	/* The records, each: a pointer to the question's name (0xc00c),
	 * type RRSIG, class IN, TTL, RDLENGTH and RDATA. */
	__u8 rr[SIG_BYTES_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SIG_ENTRIES);
	__type(key, struct sig_key);
	__type(value, struct sig_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sigs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sig_epoch SEC(".maps");

#define SIG_MUL 0x9E3779B97F4A7C15ULL

/* answer_content is one answer's share of the key: a hash of its address
 * (an A's first 4 bytes), so that the sum over the answers names the
 * RRset whatever their order. loader.AnswerContent is the same in Go. */
static __always_inline __u64 answer_content(const __u8 *addr, __u32 v4)
{
	const __u64 *a = (const __u64 *)addr;
	__u64 lo = a[0] & (v4 ? 0xffffffffULL : ~0ULL);
	__u64 hi = v4 ? 0 : a[1];
	__u64 h = lo * SIG_MUL;
	h ^= h >> 29;
	h = (h ^ hi) * SIG_MUL;
	return h ^ (h >> 32);
}

/* find_sig looks up the RRSIGs of the n answers in s->ans, at ttl, for
 * the query's set, and copies them to s->sig, from where write_reply
 * writes them: every DO=1 query of a signed set makes the one lookup,
 * whatever the health. It keeps in s->reply what copy_denial needs to
 * find a NODATA's again. Returns their sum, or -1 with none. */
static __always_inline __s64 find_sig(struct scratch *s, __u32 n, __u32 ttl, __u32 v4)
{
	__u32 zero = 0;
	struct sig_key k = { .hash = s->q.hash, .ttl = ttl };
#pragma unroll
	for (__u32 i = 0; i < MAX_ANSWERS; i++) {
		if (i >= n)
			break;
		k.content += answer_content(s->ans[i], v4);
	}
	__u32 *epoch = bpf_map_lookup_elem(&sig_epoch, &zero);
	if (!epoch)
		return -1;
	k.epoch = *epoch;
	const struct sig_value *v = bpf_map_lookup_elem(&sigs, &k);
	if (!v)
		return -1;
	__u32 len = v->len;
	if (!len || len > SIG_BYTES_MAX)
		return -1;
	for (__u32 w = 0; w < SIG_BYTES_MAX / 8; w++) {
		if (w * 8 >= len)
			break;
		*(__u64 *)(s->sig + w * 8) = *(const __u64 *)(v->rr + w * 8);
	}
	struct reply *rp = &s->reply;
	rp->sig_len = len;
	rp->sig_n = v->count;
	rp->sig_content = k.content;
	rp->sig_epoch = k.epoch;
	return v->sum;
}

/* copy_denial writes at message offset off of m the authority section of
 * a signed NODATA that find_sig found under content and TTL 0 (no
 * answers): the SOA, the NSEC at the query's name, and their RRSIGs,
 * made ahead as the fallback makes them. The helper sums the message
 * afterwards. It reads the entry again, not s->sig: off the hot path,
 * and a copy from the scratch leaves the verifier far more states to
 * walk. The entry is still there: one no longer wanted stays for a
 * second (presign.Grace), and one is never rewritten in place. */
static __always_inline int copy_denial(__u8 *m, __u32 off, const struct scratch *s)
{
	const struct reply *rp = &s->reply;
	struct sig_key k = { .hash = s->q.hash, .epoch = rp->sig_epoch };
	const struct sig_value *v = bpf_map_lookup_elem(&sigs, &k);
	if (!v || v->len != rp->sig_len)
		return -1;
	__u32 len = v->len;
	for (__u32 w = 0; w < SIG_BYTES_MAX / 8; w++) {
		if (w * 8 >= len)
			break;
		*(__u64 *)(m + at(off + w * 8)) = *(const __u64 *)(v->rr + w * 8);
	}
	return 0;
}

#endif
