/* SPDX-License-Identifier: GPL-2.0 */
/* Response rate limiting: every reply is accounted to its key (the
 * client's prefix and what it is answered, struct rrl_way) in the rrl
 * table, which the fallback accounts its replies in too (loader/rrl.go;
 * bpf/rrl.go is the same rules in Go). Over the limit, every slip-th
 * reply goes out truncated and the rest are dropped. Off, the verifier
 * removes all of it: rrl_on is a load-time constant. */
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

/* log2 of the rrl map's max_entries (its sets), set at load time. */
volatile const __u32 rrl_set_bits = 14;

/* The multiplier of rrl_hash, as of name_hash: 2^64 over the golden
 * ratio. */
#define RRL_HASH_MUL 0x9E3779B97F4A7C15ULL
/* The bits of a way's tag that count replies over the limit. */
#define RRL_COUNT_MASK 0xffffULL

/* rrl_hash is a key's hash under seed: its set is the top rrl_set_bits
 * bits, its tag the low 48. Each step is a bijection of the running
 * value, and the family goes in a step of its own, so that no IPv4 key
 * is an IPv6 key with a bit flipped. bpf.RRLHash is the same in Go. */
static __always_inline __u64 rrl_hash(__u64 seed, __u64 client, __u32 v6, __u64 resp)
{
	__u64 h = (seed ^ resp) * RRL_HASH_MUL;
	h ^= h >> 29;
	h = (h ^ client) * RRL_HASH_MUL;
	h ^= h >> 29;
	h = (h ^ v6) * RRL_HASH_MUL;
	return h ^ (h >> 32);
}

/* rrl_charge charges one reply of the key hashed h to its account in set
 * at now and returns its verdict; bpf.RRLRule.Charge is the same in Go.
 * A key without an account takes the way whose tat is earliest: an empty
 * or idle one if there is one (a tat that has passed holds nothing a new
 * account would not), else the key furthest under its limit, so that new
 * keys, however many, do not push out a key that is over its limit. A
 * CPU or the fallback charging the same set at the same moment may
 * overwrite this update or mix the two ways' words: the limit then lets
 * a reply more through, or one fewer, which is as exact as limiting
 * needs to be. */
static __always_inline enum rrl_verdict rrl_charge(struct rrl_set *set, __u64 h, __u64 now)
{
	__u64 fp = h << 16;
	__u32 w = 0;
	__u64 tag = 0, old = 0, least = ~0ULL;
	int found = 0;
	for (__u32 i = 0; i < RRL_WAYS; i++) {
		__u64 t = set->way[i].tag, a = set->way[i].tat;
		if (((t ^ fp) & ~RRL_COUNT_MASK) == 0) {
			w = i;
			tag = t;
			old = a;
			found = 1;
			break;
		}
		if (a < least) {
			least = a;
			w = i;
		}
	}
	if (!found)
		tag = fp;
	struct rrl_way *way = &set->way[w & (RRL_WAYS - 1)];

	__u64 tat = old > now ? old : now;
	tat += rrl_interval_ns;
	int over = tat - now > NSEC_PER_SEC;
	if (tat - now > rrl_window_ns)
		tat = now + rrl_window_ns;
	enum rrl_verdict v = RRL_SEND;
	if (over) {
		v = RRL_DROP;
		if (rrl_slip) {
			__u64 n = (tag & RRL_COUNT_MASK) + 1;
			if (n >= rrl_slip) {
				n = 0;
				v = RRL_SLIP;
			}
			tag = (tag & ~RRL_COUNT_MASK) | n;
		}
	}
	way->tag = tag;
	way->tat = tat;
	return v;
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

/* rrl_key is the hash of the key of a reply of kind resp to the client
 * src: its prefix together with resp, under the clock's seed. */
static __always_inline __u64 rrl_key(const __u8 *src, int v6, __u64 resp, __u64 seed)
{
	__u64 client;
	if (v6) {
		__builtin_memcpy(&client, src, 8);
		client &= rrl_mask6;
	} else {
		__u32 a;
		__builtin_memcpy(&a, src, 4);
		client = a & rrl_mask4;
	}
	return rrl_hash(seed, client, v6 != 0, resp);
}

/* rrl_set_of is the set of the key hashed h: the top rrl_set_bits bits. */
static __always_inline struct rrl_set *rrl_set_of(__u64 h)
{
	__u32 i = h >> (64 - rrl_set_bits);
	return bpf_map_lookup_elem(&rrl, &i);
}

/* rrl_touch returns the hash of the key of a reply of kind resp to src
 * (0 with no clock yet) and loads a word of its set without using it, as
 * touch_slot does for the record set. The caller calls it as soon as the
 * name's hash is known, before the record lookup: the CPU then fetches
 * the set's line (often on a page of its own, so a TLB miss too) while
 * the miss on the record slot is outstanding, instead of after the
 * answers are picked (BenchmarkRRLRotatingCost measures it over names in
 * turn; one name, always cached, gains nothing). The hash is kept for
 * rrl_check, which charges that same key for every reply but SERVFAIL. */
static __always_inline __u64 rrl_touch(const __u8 *src, int v6, __u64 resp)
{
	__u32 zero = 0;
	struct rrl_clock *c = bpf_map_lookup_elem(&rrl_clock, &zero);
	if (!c)
		return 0;
	__u64 h = rrl_key(src, v6, resp, c->seed);
	struct rrl_set *set = rrl_set_of(h);
	if (!set)
		return h;
	__u64 a = *(const volatile __u64 *)&set->way[0].tag;
	asm volatile("" : : "r"(a));
	return h;
}

/* rrl_check accounts one reply to the client src: of the key hashed h
 * (rrl_touch's), or, with servfail set, of SERVFAIL's key. The clock is
 * the timer's (struct rrl_clock): a helper call per query costs far more
 * than a map read (BenchmarkRRLCost). The exempt prefixes are read only
 * for a reply over the limit. */
static __always_inline enum rrl_verdict rrl_check(const __u8 *src, int v6, __u64 h, int servfail)
{
	/* The timer's clock; the helper's until the timer first fires. */
	__u32 zero = 0;
	struct rrl_clock *c = bpf_map_lookup_elem(&rrl_clock, &zero);
	if (!c)
		return RRL_SEND;
	__u64 now = c->now;
	if (!now)
		now = bpf_ktime_get_boot_ns();
	if (servfail)
		h = rrl_key(src, v6, RCODE_SERVFAIL, c->seed);
	struct rrl_set *set = rrl_set_of(h);
	if (!set)
		return RRL_SEND;
	enum rrl_verdict v = rrl_charge(set, h, now);
	if (v != RRL_SEND && rrl_exempt_client(src, v6))
		return RRL_SEND;
	return v;
}

/* rrl_tick keeps the clock: it writes the boot clock and fires again in
 * RRL_TICK_NS, for as long as the map lives. Unused in a program that
 * includes this header for its rules alone
 * (controlplane/selection/xdprules). */
static __attribute__((unused)) int rrl_tick(void *map, __u32 *key, struct rrl_clock *c)
{
	c->now = bpf_ktime_get_boot_ns();
	bpf_timer_start(&c->t, RRL_TICK_NS, 0);
	return 0;
}

#endif
