/* SPDX-License-Identifier: GPL-2.0 */
/* NSID (RFC 5001): the option that tells a client which server answered,
 * as an anycast operator asks of each edge. */
#ifndef STEADYDNS_NSID_H
#define STEADYDNS_NSID_H

#include <linux/bpf.h>
#include "types.h"
#include "dns.h"

/* Set at load time (loader.Options.NSID). Read-only data the verifier
 * sees as constants: with NSID off, the branches that would add it are
 * dead code it removes, so a query pays nothing for it. */
volatile const struct nsid_option nsid = {};

/* nsid_len is the bytes of the NSID option a reply to q carries: the
 * option when the query's OPT asked for it and NSID is set, else 0. */
static __always_inline __u32 nsid_len(const struct query *q)
{
	__u32 n = nsid.len;
	if (!q->has_opt || !q->nsid || n > sizeof(nsid.opt))
		return 0;
	return n;
}

/* write_nsid writes the NSID option, n bytes (nsid_len), at message
 * offset off, right after the OPT's 11 bytes, and returns its part of
 * the reply's sum (struct nsid_option). Whole words are written: what
 * lies past the option is zero, or past the message. */
static __always_inline __u32 write_nsid(__u8 *m, __u32 off, __u32 n)
{
	for (__u32 w = 0; w < sizeof(nsid.opt) / 8; w++) {
		if (w * 8 >= n)
			break;
		*(__u64 *)(m + at(off + w * 8)) = *(const volatile __u64 *)(nsid.opt + w * 8);
	}
	return nsid.sum;
}

/* write_nsid_frame writes the option, n bytes (nsid_len), at frame
 * offset off, where the reply ends: whole words, then the rest in 4, 2
 * and 1 bytes, since no store may pass the frame's end. Returns -1 when
 * one would, which the caller's sizing of the frame rules out. */
static __always_inline int write_nsid_frame(struct xdp_md *ctx, __u32 off, __u32 n)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 w = 0;
	for (; w < sizeof(nsid.opt) / 8; w++) {
		if (w * 8 + 8 > n)
			break;
		__u64 *d = data + frame_at(off + w * 8);
		if ((void *)(d + 1) > data_end)
			return -1;
		*d = *(const volatile __u64 *)(nsid.opt + w * 8);
	}
	__u32 at = w * 8;
	if (at > sizeof(nsid.opt) - 8)
		return -1;
	/* The option is zero-filled past its n bytes. */
	__u64 v = *(const volatile __u64 *)(nsid.opt + at);
	__u32 left = n - at;
	__u8 *d = data + frame_at(off + at);
	if (left & 4) {
		if ((void *)(d + 4) > data_end)
			return -1;
		*(__u32 *)d = v;
		d += 4;
		v >>= 32;
	}
	if (left & 2) {
		if ((void *)(d + 2) > data_end)
			return -1;
		*(__u16 *)d = v;
		d += 2;
		v >>= 16;
	}
	if (left & 1) {
		if ((void *)(d + 1) > data_end)
			return -1;
		*d = v;
	}
	return 0;
}

#endif
