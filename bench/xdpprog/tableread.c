//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* The reflector plus one read of the record table, and nothing else: what
 * any answer from the table costs at the least. It picks a slot of the
 * table's live region by a multiply hash of the question's first 16 bytes,
 * so that each name asked has a slot of its own, as in the program, loads
 * the slot's hash, and makes the reply wait for it. The benchmark loads it
 * onto the program's own maps, so it reads the same table, at the same
 * size, in the same state of the caches and the TLB: its cost over the
 * reflector is what memory charges for a table of that size. */
#include "reflect.h"
#include "records.h"

/* The multipliers: 2^64 over the golden ratio, and MurmurHash3's fmix64
 * constant, so that names alike in their first bytes spread. */
#define READ_MUL1 0x9E3779B97F4A7C15ULL
#define READ_MUL2 0xFF51AFD7ED558CCDULL

SEC("xdp")
int table_read(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	struct reflection r;

	if (reflect_find(ctx, &r))
		return XDP_PASS;
	/* The question starts 12 bytes into the message, 10 past the flags. */
	const __u64 *q = (const __u64 *)((__u8 *)r.flags + 10);
	if ((void *)(q + 2) > data_end)
		return XDP_PASS;
	__u64 h = (q[0] ^ (q[1] * READ_MUL1)) * READ_MUL2;
	__u32 zero = 0;
	__u32 *live = bpf_map_lookup_elem(&rec_size, &zero);
	__u32 size = live ? *live : 0;
	__u32 idx = (__u32)(((h >> 32) * (__u64)size) >> 32);
	struct rec_slot *sl = bpf_map_lookup_elem(&records, &idx);
	if (!sl)
		return XDP_PASS;
	/* The slot's hash ANDed with 0: the AND waits for the load, and the
	 * empty asm hides the 0 from clang, which would fold the AND away. */
	__u64 v = *(volatile __u64 *)&sl->hash, none = 0;
	asm volatile("" : "+r"(none));
	return reflect_send(&r, (__u16)(v & none));
}

char LICENSE[] SEC("license") = "GPL";
