//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* The benchmark's ceiling: a bare XDP reflector (bpf/reflect.h). */
#include "reflect.h"

SEC("xdp")
int reflector(struct xdp_md *ctx)
{
	struct reflection r;

	if (reflect_find(ctx, &r))
		return XDP_PASS;
	return reflect_send(&r, 0);
}

char LICENSE[] SEC("license") = "GPL";
