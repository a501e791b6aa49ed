//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* An XDP program that passes everything. On a veth in native mode, XDP_TX
 * frames reach the peer only if the peer has an XDP program attached; the
 * test hosts attach this one to the client's veth. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
