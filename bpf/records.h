/* SPDX-License-Identifier: GPL-2.0 */
/* The record table's maps, apart from the other maps (maps.h includes
 * them) so that the benchmark's table read (bench/xdpprog/tableread.c)
 * reads the same table with the same definitions. */
#ifndef STEADYDNS_RECORDS_H
#define STEADYDNS_RECORDS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "types.h"

/* The record table (struct rec_slot). Memory-mappable so the control
 * plane writes slots in place under their sequence counts. max_entries is
 * twice server.max_records rounded up to a power of two, which the loader
 * sets: at most half the slots are in use, and every set then sits within
 * PROBE_MAX slots of its home. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 17);
	__type(key, __u32);
	__type(value, struct rec_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} records SEC(".maps");

/* The record table's hot index: for every slot, the name_hash of the set
 * it holds with its lowest bit set (rec_tag in table.h), or 0 while the
 * slot is empty. A query's probe reads these, eight to a cache line, and
 * loads a slot only when its tag is the query's; the slot's own hash and
 * name decide. The loader writes a slot's tag after its content, so a tag
 * never leads to a set that is not there yet, and sizes the map as the
 * record table. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 17);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rec_tags SEC(".maps");

/* The pools (struct rec_pool): the candidates of the sets of more than
 * MAX_CANDIDATES, so that the slot of every set stays the size of a set
 * of MAX_CANDIDATES. Memory-mappable, written in place as the slots are;
 * the loader sizes it for the configured pools, with room to spare. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct rec_pool);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rec_pools SEC(".maps");

/* log2 of the record table's live region: the sets sit in its first
 * 1 << bits slots, the smallest power of two that keeps them at a load of
 * at most one half, so a small zone's sets share few pages and the TLB
 * holds them all. The loader moves the sets and then rewrites this word
 * when the count crosses a power of two (loader/records.go). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rec_bits SEC(".maps");

#endif
