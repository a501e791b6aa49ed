/* SPDX-License-Identifier: GPL-2.0 */
/* Finding a query's record set in the record table (struct rec_slot). */
#ifndef STEADYDNS_TABLE_H
#define STEADYDNS_TABLE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "types.h"
#include "maps.h"

/* seq_fence, set at load time, makes the record table's readers fence
 * their loads (slot_fence): 1 on a CPU that may reorder a load with an
 * earlier one, as arm64 and riscv64 may; 0 on x86, which does not. */
volatile const __u32 seq_fence = 0;

/* slot_fence orders every load before it before every load after it, as
 * a sequence lock's reader needs between its count and the slot's words,
 * and between those and the count again. clang-19 has no load-acquire
 * for BPF (the instruction needs a later clang and kernel 6.15), so the
 * fence is an atomic fetch on the stack: BPF's value-returning atomics
 * are fully ordered, as the kernel's (the interpreter runs them as
 * atomic64_fetch_*, and the JITs emit a locked instruction on x86 and an
 * acquire-release one, or a loop and a full barrier, on arm64). On x86
 * loads keep their order anyway, and the verifier drops the fence:
 * there the empty asm, which keeps clang from moving loads across it, is
 * all it takes. The writer's side is in loader/records.go (write). */
static __always_inline void slot_fence(void)
{
	if (seq_fence) {
		volatile __u64 x = 0;
		__u64 v = __sync_fetch_and_or(&x, 0);
		asm volatile("" : : "r"(v) : "memory");
	}
	asm volatile("" ::: "memory");
}

/* name_eq compares the first n bytes of the query's key, zero past the
 * name, with a slot's name, 8 bytes at a time: its head, then its tail.
 * Wire names delimit themselves, so equal first n bytes are equal names. */
static __always_inline int name_eq(const __u8 *key, const struct rec_slot *sl, __u32 n)
{
	const __u64 *a = (const __u64 *)key;
	const __u64 *h = (const __u64 *)sl->name_head;
	const __u64 *t = (const __u64 *)sl->name_tail;
	_Static_assert(NAME_HEAD % 8 == 0, "the name's head is whole words");
	for (__u32 w = 0; w < NAME_HEAD / 8; w++) {
		if (w * 8 >= n)
			return 1;
		if (a[w] != h[w])
			return 0;
	}
	for (__u32 w = 0; w < (NAME_MAX_WIRE + 1 - NAME_HEAD) / 8; w++) {
		if (NAME_HEAD + w * 8 >= n)
			break;
		if (a[NAME_HEAD / 8 + w] != t[w])
			return 0;
	}
	return 1;
}

/* touch_slot loads a word of the slot's second cache line (the set's
 * fields, its sums and its first candidate, or a static set's addresses)
 * without using it. The load does not wait for the comparisons before
 * it, so the CPU fetches that line while the miss on the slot's first
 * line (the hash and the name's head) is outstanding: one memory latency
 * per query instead of two in a row. The two lines are the pair the CPU
 * fetches together, and all a set of one candidate, or a static set of
 * up to eight A or two AAAA, reads. A larger set's further lines are
 * loaded by the scan, whose branches on the set's size are predicted, so
 * it need not wait for them either, and the touch stays one load. The
 * empty asm keeps the load, which clang would otherwise drop as unused. */
static __always_inline void touch_slot(const struct rec_slot *sl)
{
	__u64 a = *(const volatile __u64 *)&sl->rr;
	asm volatile("" : : "r"(a));
}

/* rec_tag is a set's entry in the hot index (rec_tags): its hash, never 0,
 * which marks an empty slot. recTag in loader/records.go is the same in Go. */
static __always_inline __u64 rec_tag(__u64 h)
{
	return h | 1;
}

/* find_slot probes from the query's home slot for its name and type and
 * returns the slot's index, or -1. It reads the hot index, eight slots'
 * tags to a cache line, and loads a slot only when its tag is the query's:
 * the slots a probe passes over cost no load of their own. An empty slot
 * (tag 0) ends the probe: Robin Hood placement leaves no gap before a set.
 * A tag is a hint that the slot decides: a stale one (the loader writes
 * the tag after the slot) meets a slot whose hash or name differs and the
 * probe goes on. It records the slot's sequence count in s->q.seq; the
 * caller compares it again once it has read the slot, and a slot being
 * written (odd count) is passed over. */
static __always_inline int find_slot(struct scratch *s)
{
	if (!s)
		return -1;
	struct query *q = &s->q;
	__u64 h = q->hash;
	__u64 want = rec_tag(h);
	__u32 n = q->name_len;
	__u32 zero = 0;
	__u32 *live = bpf_map_lookup_elem(&rec_bits, &zero);
	__u32 bits = live ? *live & 31 : 0;
	__u32 home = bits ? h >> (64 - bits) : 0;
	__u32 mask = (1u << bits) - 1;

	for (__u32 i = 0; i < PROBE_MAX; i++) {
		__u32 idx = (home + i) & mask;
		__u64 *t = bpf_map_lookup_elem(&rec_tags, &idx);
		if (!t)
			return -1;
		__u64 tag = *(volatile __u64 *)t;
		if (!tag)
			return -1;
		if (tag != want)
			continue;
		struct rec_slot *sl = bpf_map_lookup_elem(&records, &idx);
		if (!sl)
			return -1;
		__u32 seq = *(volatile __u32 *)&sl->seq;
		touch_slot(sl);
		slot_fence();
		if (seq & 1)
			continue;
		if (sl->state != SLOT_USED || sl->hash != h || sl->qtype != q->qtype)
			continue;
		if (!name_eq(s->key, sl, n))
			continue;
		q->seq = seq;
		return idx;
	}
	return -1;
}

/* slot_unchanged reports whether a slot still holds what find_slot found:
 * its sequence count has not moved since. */
static __always_inline int slot_unchanged(const struct rec_slot *sl, __u32 seq)
{
	/* Every read of the slot before this one happens first. */
	slot_fence();
	return *(volatile const __u32 *)&sl->seq == seq;
}

#endif
