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
 * name, with a slot's name, 8 bytes at a time: its head, then, for a name
 * longer than NAME_HEAD, its tail in the set's ext entry, which the
 * control plane gives every such set. Wire names delimit themselves, so
 * equal first n bytes are equal names. */
static __always_inline int name_eq(const __u8 *key, const struct rec_slot *sl, __u32 n)
{
	const __u64 *a = (const __u64 *)key;
	const __u64 *h = (const __u64 *)sl->name_head;
	_Static_assert(NAME_HEAD % 8 == 0, "the name's head is whole words");
	for (__u32 w = 0; w < NAME_HEAD / 8; w++) {
		if (w * 8 >= n)
			return 1;
		if (a[w] != h[w])
			return 0;
	}
	if (n <= NAME_HEAD)
		return 1;
	if (!(sl->rr.flags & RR_EXT))
		return 0;
	__u32 e = sl->rr.ext;
	const struct rec_ext *x = bpf_map_lookup_elem(&rec_exts, &e);
	if (!x)
		return 0;
	const __u64 *t = (const __u64 *)x->name_tail;
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
 * per query instead of two in a row. The empty asm keeps the load, which
 * clang would otherwise drop as unused. */
static __always_inline void touch_slot(const struct rec_slot *sl)
{
	__u64 a = *(const volatile __u64 *)&sl->rr;
	asm volatile("" : : "r"(a));
}

/* home_slot is the slot a hash starts its probe at in a live region of
 * size slots: the hash's top 32 bits scaled to the size, so that the
 * region may have any size, not only a power of two. homeSlot in
 * loader/records.go is the same in Go. */
static __always_inline __u32 home_slot(__u64 h, __u32 size)
{
	return (__u32)(((h >> 32) * (__u64)size) >> 32);
}

/* probe_slot probes from the home slot of hash h for a set of qtype and
 * returns the slot's sequence count and index, count in the upper half,
 * or -1. Each probe reads a slot's first cache line; slots lie back to
 * back, so the next probe's line is the next in memory. An empty slot,
 * or one nearer its home than the probe has come, ends the probe: Robin
 * Hood placement puts a set before both. A slot being written (odd
 * count) is passed over. It is the program's one function of its own,
 * which the verifier checks once, alone: inlined, every probe the loop
 * may end at would have the rest of the program checked after it again,
 * PROBE_MAX times over the verifier's limit. */
__attribute__((noinline)) __s64 probe_slot(__u64 h, __u32 qtype)
{
	__u32 zero = 0;
	__u32 *live = bpf_map_lookup_elem(&rec_size, &zero);
	if (!live)
		return -1;
	__u32 size = *live;
	if (!size)
		return -1;
	__u32 idx = home_slot(h, size);
#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < PROBE_MAX; i++) {
		struct rec_slot *sl = bpf_map_lookup_elem(&records, &idx);
		if (!sl)
			return -1;
		__u32 seq = *(volatile __u32 *)&sl->seq;
		touch_slot(sl);
		slot_fence();
		if (!(seq & 1)) {
			if (sl->state != SLOT_USED || sl->dist < i)
				return -1;
			if (sl->hash == h && sl->qtype == qtype)
				return (__s64)((__u64)seq << 32 | idx);
		}
		idx = idx + 1 < size ? idx + 1 : 0;
	}
	return -1;
}

/* find_slot finds the query's set: the slot probe_slot finds, whose name
 * must then match too (a query whose 64-bit hash meets another name's
 * goes to the fallback). It leaves the slot's index in s->q.slot and its
 * sequence count in s->q.seq, which the caller compares again once it
 * has read the slot, or returns -1. */
static __always_inline int find_slot(struct scratch *s)
{
	if (!s)
		return -1;
	struct query *q = &s->q;
	__s64 r = probe_slot(q->hash, q->qtype);
	if (r < 0)
		return -1;
	__u32 slot = (__u32)r;
	const struct rec_slot *sl = bpf_map_lookup_elem(&records, &slot);
	if (!sl || !name_eq(s->key, sl, q->name_len))
		return -1;
	q->seq = (__u64)r >> 32;
	q->slot = slot;
	return 0;
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
