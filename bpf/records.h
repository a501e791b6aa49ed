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
 * server.max_records over LOAD_MAX_PCT percent, which the loader sets:
 * 128 bytes a slot, about 150 a set at capacity. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 17);
	__type(key, __u32);
	__type(value, struct rec_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} records SEC(".maps");

/* The ext entries (struct rec_ext): the sets a slot cannot hold, whole,
 * with their names' tails. Memory-mappable, written in place as the
 * slots are; the loader sizes it for the configured sets that need one,
 * with room to spare. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct rec_ext);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rec_exts SEC(".maps");

/* The pools (struct rec_pool): the candidates of the sets of more than
 * MAX_CANDIDATES, so that the ext entry of every set stays the size of a
 * set of MAX_CANDIDATES. Memory-mappable, written in place as the slots
 * are; the loader sizes it for the configured pools, with room to spare. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct rec_pool);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rec_pools SEC(".maps");

/* The record table's live region: the sets sit in its first rec_size
 * slots, sized for a load of at most LOAD_MAX_PCT percent, so a small
 * zone's sets share few pages and the TLB holds them all. The loader
 * moves the sets and then rewrites this word when the count leaves the
 * region's range (loader/records.go). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rec_size SEC(".maps");

#endif
