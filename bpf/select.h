/* SPDX-License-Identifier: GPL-2.0 */
/* Answer selection (docs/design.md). One scan over all K candidates
 * computes every set the decision needs; the choice among them is made
 * at the end, so a record failing open costs what a healthy one costs.
 * controlplane/selection mirrors this file step for step in Go; its tests
 * run this very code through bpf/twin and require equal answers. */
#ifndef STEADYDNS_SELECT_H
#define STEADYDNS_SELECT_H

#include <bpf/bpf_helpers.h>
#include "types.h"
#include "maps.h"

#define K MAX_CANDIDATES

static __always_inline void set_add(volatile struct set_stats *s, __u32 bit,
				    __u32 prio, __u32 weight)
{
	if (!bit)
		return;
	s->mask |= bit;
	s->wsum += weight;
	if (prio < s->low_prio) {
		s->low_prio = prio;
		s->low_mask = bit;
	} else if (prio == s->low_prio) {
		s->low_mask |= bit;
	}
}

/* The index of the r-th (0-based) member of mask, or 0 if there is none. */
static __always_inline __u32 nth_member(__u32 mask, __u32 r)
{
	__u32 at = 0, seen = 0;
#pragma unroll
	for (__u32 i = 0; i < K; i++) {
		if (mask & (1u << i)) {
			if (seen == r)
				at = i;
			seen++;
		}
	}
	return at;
}

/* The member of mask that a weighted draw r < wsum lands on. */
static __always_inline __u32 weighted_member(const struct rrset *rr,
					     __u32 mask, __u32 r)
{
	__u32 at = 0, acc = 0, found = 0;
#pragma unroll
	for (__u32 i = 0; i < K; i++) {
		if (mask & (1u << i)) {
			acc += rr->cand[i].weight;
			if (!found && r < acc) {
				at = i;
				found = 1;
			}
		}
	}
	return at;
}

/* table_old reports whether a table is older than its stale_after at now,
 * CLOCK_BOOTTIME, the clock the control plane stamps arrival with. The
 * stale timer applies it and sets stale_mark; the subtraction wraps like
 * the Go twin's (selection.Open), so both agree on any input. */
static __always_inline __u32 table_old(const struct table_meta *tm, __u64 now)
{
	return tm->stale_after_ns && now - tm->arrived_ns > tm->stale_after_ns;
}

/* table_open reports whether a record answers as if every candidate were
 * healthy: no table yet (cold start, or no metadata at all), or a table
 * the stale timer found older than its stale_after, under stale policy
 * answer_all. It reads no clock: the timer did. */
static __always_inline __u32 table_open(const struct table_meta *tm, __u32 stale)
{
	if (!tm || !tm->version)
		return 1;
	return tm->stale_mark == tm->arrived_ns && stale == STALE_ANSWER_ALL;
}

/* The multiplier of query_draw, as of name_hash: 2^64 over the golden
 * ratio. */
#define DRAW_MUL 0x9E3779B97F4A7C15ULL

/* query_draw is a query's random draw, from what the query carries: its
 * source port and ID, which resolvers pick at random (RFC 5452), and its
 * name's hash, so one client's queries for different names draw apart.
 * No helper call per query. selection.Draw is the same in Go. */
static __always_inline __u32 query_draw(__u16 port, __u16 id, __u64 hash)
{
	__u64 x = (hash ^ ((__u64)port << 16 | id)) * DRAW_MUL;
	return x >> 32;
}

/* answer_ttl is the TTL of the answers: ttl_degraded, when set, while a
 * present candidate is down. */
static __always_inline __u32 answer_ttl(const struct rrset *rr, __u32 degraded)
{
	return degraded && rr->ttl_degraded ? rr->ttl_degraded : rr->ttl;
}

/* select_answers decides which candidates to answer and leaves the result
 * in s->pick. order ranks the candidates' regions for this client (NULL:
 * no geo). s->draw carries the rest of the query's inputs: open (answer as
 * if every candidate were healthy: no table yet, or stale with answer_all),
 * the random draw and the round-robin turn, taken on every query.
 *
 * It is a global function so the verifier checks it once, on its own,
 * instead of once for every path of the parser that leads to it. */
__attribute__((noinline)) int select_answers(struct scratch *s,
					     const struct rrset *rr,
					     const struct geo_order *order)
{
	if (!s || !rr)
		return -1;
	__u32 open = s->draw.open, rnd = s->draw.rnd, rr_turn = s->draw.turn;
	/* The sets live in map memory and are read back through volatile:
	 * the verifier then sees unknown numbers instead of one constant
	 * per combination of healthy candidates, and its states converge. */
	volatile struct set_stats *sets = &s->sets[0][0];
	volatile __u32 *down = &s->down;
	struct pick *p = &s->pick;

#pragma unroll
	for (int i = 0; i < 3 * GEO_RANKS; i++) {
		sets[i].mask = 0;
		sets[i].low_mask = 0;
		sets[i].low_prio = ~0u;
		sets[i].wsum = 0;
	}
	*down = 0;

	/* The scan: health, backup and geo rank of every slot, once. */
#pragma unroll
	for (__u32 i = 0; i < K; i++) {
		const struct candidate *c = &rr->cand[i];
		__u32 idx = c->check, word = idx / 64;
		__u64 *w = bpf_map_lookup_elem(&health_bits, &word);
		__u32 healthy = (w && ((*w >> (idx & 63)) & 1)) || open;
		__u32 bit = i < rr->n ? 1u << i : 0;
		__u32 backup = c->flags & CAND_BACKUP;
		__u32 rank = order ? order->rank[c->region & (MAX_REGIONS - 1)] : 0;
		if (rank >= GEO_RANKS)
			rank = GEO_RANKS - 1;

		*down |= healthy ? 0 : bit;
		set_add(&sets[2 * GEO_RANKS + rank], backup ? 0 : bit, c->priority, c->weight);
		set_add(&sets[rank], backup || !healthy ? 0 : bit, c->priority, c->weight);
		set_add(&sets[GEO_RANKS + rank], backup && healthy ? bit : 0, c->priority, c->weight);
	}

	/* Geo: the nearest rank with a healthy candidate; with none, the
	 * nearest with any primary, to fail open there. */
	__u32 rh = GEO_RANKS, ra = GEO_RANKS;
#pragma unroll
	for (__u32 r = 0; r < GEO_RANKS; r++) {
		if (rh == GEO_RANKS && (sets[r].mask | sets[GEO_RANKS + r].mask))
			rh = r;
		if (ra == GEO_RANKS && sets[2 * GEO_RANKS + r].mask)
			ra = r;
	}
	__u32 r = rh < GEO_RANKS ? rh : ra < GEO_RANKS ? ra : 0;
	r &= GEO_RANKS - 1;
	volatile struct set_stats *up = &sets[r];                 /* healthy primaries */
	volatile struct set_stats *bup = &sets[GEO_RANKS + r];    /* healthy backups */
	volatile struct set_stats *all = &sets[2 * GEO_RANKS + r]; /* every primary */

	/* Backups are eligible only while no primary is healthy. */
	volatile struct set_stats *e = up->mask ? up : bup;
	p->action = ACT_ANSWER;
	if (__builtin_popcount(up->mask) < rr->min_healthy) {
		e = all;
	} else if (!e->mask) {
		if (rr->when_all_down == WHEN_DOWN_NODATA)
			p->action = ACT_NODATA;
		else if (rr->when_all_down == WHEN_DOWN_SERVFAIL)
			p->action = ACT_SERVFAIL;
		e = all;
	}
	p->degraded = *down != 0;

	__u32 pc = __builtin_popcount(e->mask);
	__u32 mask = e->mask, start = 0, limit = rr->max_answers;
	switch (rr->policy) {
	case POLICY_FAILOVER:
		mask = e->low_mask;
		break;
	case POLICY_WEIGHTED:
		limit = 1;
		if (e->wsum)
			start = weighted_member(rr, mask, rnd % e->wsum);
		else if (pc)
			start = nth_member(mask, rnd % pc);
		break;
	case POLICY_ROUND_ROBIN:
		if (pc)
			start = nth_member(mask, rr_turn % pc);
		break;
	default: /* POLICY_MULTIVALUE */
		if (pc > limit)
			start = nth_member(mask, rnd % pc);
		break;
	}

	/* The answer order: members of mask from start on, wrapping. */
	__u32 n = 0;
#pragma unroll
	for (__u32 i = 0; i < K; i++) {
		__u32 j = (start + i) & (K - 1);
		if ((mask & (1u << j)) && n < limit) {
			p->order[n & (K - 1)] = j;
			n++;
		}
	}
	p->n = n;
	return 0;
}

#endif
