/* SPDX-License-Identifier: GPL-2.0 */
/* Internet checksums, computed from scratch. A query sent from a socket on
 * a veth carries CHECKSUM_PARTIAL (only the pseudo-header sum), so an
 * incremental update of the query's checksum would be wrong.
 * Sums are taken over raw memory words in host order; folding makes the
 * result right to store as is. */
#ifndef STEADYDNS_CSUM_H
#define STEADYDNS_CSUM_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

static __always_inline __u16 csum_fold(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

/* Partial sum of len bytes (a multiple of 4, at most 1024) of a buffer
 * that bpf_csum_diff can read; the helper takes 512 bytes per call. */
static __always_inline __s64 buf_sum(__u8 *buf, __u32 len)
{
	__u32 first = len > 512 ? 512 : len;
	__s64 s = bpf_csum_diff(0, 0, (__be32 *)buf, first & 0x3fc, 0);
	if (s < 0 || len <= 512)
		return s;
	return bpf_csum_diff(0, 0, (__be32 *)(buf + 512), (len - 512) & 0x1fc,
			     (__u32)s);
}

#endif
