/* SPDX-License-Identifier: GPL-2.0 */
/* Response rate limiting: every reply is accounted to its key (struct
 * rrl_key: the client's prefix and what it is answered) in the rrl map,
 * which the fallback accounts its replies in too (loader/rrl.go, the same
 * rules in Go). Over the limit, every slip-th reply goes out truncated and
 * the rest are dropped. Off, the verifier removes all of it: rrl_on is a
 * load-time constant. */
#ifndef STEADYDNS_RRL_H
#define STEADYDNS_RRL_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "types.h"
#include "maps.h"

#define NSEC_PER_SEC 1000000000ULL
#define RCODE_SERVFAIL 2

/* server.rrl, set at load time. */
volatile const __u32 rrl_on = 0;
volatile const __u64 rrl_interval_ns = 0; /* 1 s / rate */
volatile const __u64 rrl_window_ns = 0;   /* at least 1 s */
volatile const __u32 rrl_slip = 0;        /* 0: drop every reply over the limit */
/* The prefix masks, in network order as the address is in memory. */
volatile const __u32 rrl_mask4 = 0;
volatile const __u64 rrl_mask6 = 0;

/* rrl_account charges one reply to st at now and returns its verdict;
 * loader.RRLAccount is the same in Go. A CPU that accounts the key at the
 * same moment may overwrite this one's update: the limit then lets a
 * reply more through, which is as exact as limiting needs to be. */
static __always_inline enum rrl_verdict rrl_account(struct rrl_state *st, __u64 now)
{
	__u64 tat = st->tat > now ? st->tat : now;
	tat += rrl_interval_ns;
	int over = tat - now > NSEC_PER_SEC;
	if (tat - now > rrl_window_ns)
		tat = now + rrl_window_ns;
	st->tat = tat;
	if (!over)
		return RRL_SEND;
	__u32 n = ++st->limited;
	return rrl_slip && n % rrl_slip == 0 ? RRL_SLIP : RRL_DROP;
}

/* rrl_exempt_client looks the client up in the exempt prefixes. */
static __always_inline int rrl_exempt_client(const __u8 *src, int v6)
{
	struct geo_key6 k = { .prefixlen = 128 };
	if (v6) {
		__builtin_memcpy(k.addr, src, 16);
	} else {
		k.addr[10] = 0xff;
		k.addr[11] = 0xff;
		__builtin_memcpy(k.addr + 12, src, 4);
	}
	return bpf_map_lookup_elem(&rrl_exempt, &k) != 0;
}

/* rrl_check accounts one reply of kind resp (struct rrl_key) to the
 * client src. The clock is the timer's (struct rrl_clock): the helper
 * cost about 65 ns a query here (BenchmarkRRLCost), a map read nothing
 * measurable. The exempt prefixes are read only for a reply over the
 * limit. */
static __always_inline enum rrl_verdict rrl_check(const __u8 *src, int v6, __u64 resp)
{
	struct rrl_key k = {};
	if (v6) {
		__u64 a;
		__builtin_memcpy(&a, src, 8);
		a &= rrl_mask6;
		__builtin_memcpy(k.client, &a, 8);
		k.v6 = 1;
	} else {
		__u32 a;
		__builtin_memcpy(&a, src, 4);
		a &= rrl_mask4;
		__builtin_memcpy(k.client, &a, 4);
	}
	k.resp = resp;
	/* The timer's clock; the helper's until the timer first fires. */
	__u32 zero = 0;
	struct rrl_clock *c = bpf_map_lookup_elem(&rrl_clock, &zero);
	__u64 now = c ? c->now : 0;
	if (!now)
		now = bpf_ktime_get_boot_ns();
	struct rrl_state *st = bpf_map_lookup_elem(&rrl, &k);
	if (!st) {
		/* A first reply is always within the limit (rate >= 1). If
		 * another CPU or the fallback adds the key meanwhile, its
		 * entry stands. */
		struct rrl_state fresh = { .tat = now + rrl_interval_ns };
		bpf_map_update_elem(&rrl, &k, &fresh, BPF_NOEXIST);
		return RRL_SEND;
	}
	enum rrl_verdict v = rrl_account(st, now);
	if (v != RRL_SEND && rrl_exempt_client(src, v6))
		return RRL_SEND;
	return v;
}

/* rrl_tick keeps the clock: it writes the boot clock and fires again in
 * RRL_TICK_NS, for as long as the map lives. */
static int rrl_tick(void *map, __u32 *key, struct rrl_clock *c)
{
	c->now = bpf_ktime_get_boot_ns();
	bpf_timer_start(&c->t, RRL_TICK_NS, 0);
	return 0;
}

#endif
