/* SPDX-License-Identifier: GPL-2.0 */
/* Answer selection (docs/design.md). One scan over all K candidates
 * computes every set the decision needs; the choice among them is made
 * at the end, so a record failing open costs what a healthy one costs.
 * controlplane/selection has the same rules in Go; its tests run this
 * very code through controlplane/selection/xdprules and require equal
 * answers. */
#ifndef STEADYDNS_SELECT_H
#define STEADYDNS_SELECT_H

#include <bpf/bpf_helpers.h>
#include "types.h"
#include "maps.h"

#define K MAX_CANDIDATES

/* What the decision reads of health is computed without a branch: BPF has
 * no conditional move, so clang turns a comparison it recognises into a
 * jump, and a jump on health mispredicts as often as health differs from
 * one query to the next, so a half-failed table would cost more than a
 * healthy one. These helpers take their operands through an empty asm,
 * which hides the comparison from clang, and their results too, so that
 * clang cannot tell a result is 0 or 1 and turn what uses it into a jump:
 * the arithmetic stays arithmetic. */
static __always_inline __u64 opaque(__u64 x)
{
	asm volatile("" : "+r"(x));
	return x;
}

/* is_below is 1 if a < b, else 0: the sign of their 64-bit difference,
 * for a and b below 2^63. */
static __always_inline __u64 is_below(__u64 a, __u64 b)
{
	return opaque(opaque(a - b) >> 63);
}

/* is_set is 1 if x is not 0, else 0: x or its negation has the top bit
 * set unless x is 0. */
static __always_inline __u64 is_set(__u64 x)
{
	return opaque(opaque(x | (0 - x)) >> 63);
}

/* choose is c ? a : b, for c 0 or 1. */
static __always_inline __u64 choose(__u64 c, __u64 a, __u64 b)
{
	return b ^ ((a ^ b) & -opaque(c));
}

static __always_inline void set_add(volatile struct set_stats *s, __u64 bit,
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

/* The loops over a set's candidates are unrolled eight turns at a time:
 * a set in its slot whole, a pool in rounds of eight. Unrolled further,
 * a pool's loops keep more values live than the BPF stack holds. */
#define SET_UNROLL _Pragma("clang loop unroll_count(8)")
_Static_assert(MAX_CANDIDATES <= 8, "SET_UNROLL unrolls a set in its slot whole");

/* past reports whether a loop over a set's candidates stops before
 * candidate i, of n. The test is made at every step-th candidate only, a
 * constant once unrolled, so that a pool, step POOL_BLOCK, gives the
 * verifier a path per block it may end at, not one per candidate.
 * Candidates past n up to there are visited, and every mask keeps to the
 * present ones. */
static __always_inline int past(__u32 i, __u32 n, __u32 step)
{
	return i % step == 0 && i >= n;
}

/* The index of the r-th (0-based) member of mask, or 0 if there is none;
 * mask holds candidates below n only. Without a branch on mask, which
 * follows health: no branch to mispredict, and one path for the verifier
 * through a pool's 64 turns. weighted_member is the same. */
static __always_inline __u32 nth_member(__u64 mask, __u32 r, const volatile __u32 *np,
					const __u32 kk, const __u32 step)
{
	__u32 n = *np;
	__u64 at = 0, seen = 0;
SET_UNROLL
	for (__u32 i = 0; i < kk; i++) {
		if (past(i, n, step))
			break;
		__u64 in = (mask >> i) & 1;
		at = choose(in & (1 - is_set(seen ^ r)), i, at);
		seen += in;
	}
	return at;
}

/* The member of mask that a weighted draw r < wsum lands on. */
static __always_inline __u32 weighted_member(const struct candidate *cand,
					     __u64 mask, __u32 r, const volatile __u32 *np,
					     const __u32 kk, const __u32 step)
{
	__u32 n = *np;
	__u64 at = 0, acc = 0, found = 0;
SET_UNROLL
	for (__u32 i = 0; i < kk; i++) {
		if (past(i, n, step))
			break;
		__u64 in = (mask >> i) & 1;
		acc += cand[i].weight & -in;
		__u64 hit = in & (1 - found) & is_below(r, acc);
		at = choose(hit, i, at);
		found |= hit;
	}
	return at;
}

/* table_old reports whether a table is older than its stale_after at now,
 * CLOCK_BOOTTIME, the clock the control plane stamps arrival with. The
 * stale timer applies it and sets stale_mark; the subtraction wraps like
 * the Go copy's (selection.Open), so both agree on any input. */
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
 * present candidate is down (degraded is 0 or 1). */
static __always_inline __u32 answer_ttl(const struct rrset *rr, __u32 degraded)
{
	__u32 td = rr->ttl_degraded;
	return choose(degraded & is_set(td), td, rr->ttl);
}

/* eligible decides the pick's action and returns the set the policy picks
 * from, of up (the healthy primaries), bup (the healthy backups) and all
 * (every primary): up, if it reaches min_healthy; else up and bup
 * together, if they reach it; else all, failing open, with the action
 * when_all_down says once nothing is healthy and min_healthy is 0. An
 * empty set never reaches it. */
static __always_inline __u64 eligible(struct pick *p, const struct rrset *rr,
				      __u64 up, __u64 bup, __u64 all)
{
	_Static_assert((int)ACT_ANSWER == (int)WHEN_DOWN_ANSWER_ALL &&
		       (int)ACT_NODATA == (int)WHEN_DOWN_NODATA &&
		       (int)ACT_SERVFAIL == (int)WHEN_DOWN_SERVFAIL, "when_all_down is its action");
	__u64 both = up | bup;
	__u64 mh = rr->min_healthy;
	__u64 ok_up = is_set(up) & (1 - is_below(__builtin_popcountll(up), mh));
	__u64 ok_both = is_set(both) & (1 - is_below(__builtin_popcountll(both), mh));
	p->action = rr->when_all_down & -((1 - is_set(both)) & (1 - is_set(mh)));
	return choose(ok_up, up, choose(ok_both, both, all));
}

/* pick_answer copies candidate c's address into the answers, at place o
 * of the answer order, as it is picked: the reply is written from there,
 * once the slot's sequence count shows the set was not rewritten while it
 * was read. */
static __always_inline void pick_answer(struct scratch *s, const struct candidate *cand,
					__u32 o, __u32 c, const __u32 kk)
{
	__u64 *d = (__u64 *)s->ans[o & (PICK_PLACES - 1)];
	const __u64 *a = (const __u64 *)cand[c & (kk - 1)].addr;
	d[0] = a[0];
	d[1] = a[1];
}

/* health_bit is entry idx's state in the bitmap, 1 while up. An index
 * past the bitmap is down, as the Go copy has it; the bitmap's words past
 * the table's entries are zero. */
static __always_inline __u32 health_bit(const __u64 *bits, __u32 wmask, __u32 idx)
{
	__u32 word = idx / 64;
	return (bits[word & wmask] >> (idx & 63)) & (1 - is_below(wmask, word));
}

/* select_one is select_answers for a set of at most one candidate, by the
 * same rules with every step that a single candidate makes trivial left
 * out: geo ranks cannot exclude it (its own rank is the nearest that has
 * it, healthy or not), every policy starts at it and the failover's
 * lowest priority is its own. It still reads the candidate's health on
 * every query, so the work is the same at every health level. */
static __always_inline int select_one(struct scratch *s, const struct rrset *rr,
				      __u32 n, __u32 open, const __u64 *bits, __u32 wmask)
{
	struct pick *p = &s->pick;
	__u32 h = 0, b = 0;
	if (n) {
		const struct candidate *c = &rr->cand[0];
		h = health_bit(bits, wmask, c->check) | open;
		b = c->flags & CAND_BACKUP;
	}
	/* up and bup are never both 1: the candidate is a backup or not. */
	__u32 up = h & ~b & n, bup = h & b, all = ~b & n & 1;
	__u32 e = eligible(p, rr, up, bup, all);
	p->degraded = n & ~h & 1;
	__u32 limit = rr->policy == POLICY_WEIGHTED ? 1 : rr->max_answers;
	__u32 an = is_set(e) & is_set(limit);
	p->order[0] = 0;
	p->n = an;
	pick_answer(s, rr->cand, 0, 0, K);
	p->sum = rr->rr_sum[0] & -(__u64)an;
	return 0;
}

/* select_static is select_answers for a set flagged RR_STATIC: every
 * candidate is up (check 0) and primary, so the eligible set is all of
 * them and multivalue, answering as many as there are, answers each in
 * order from the first. The branch that takes this path is on the set's
 * configuration, never on health: such a set has no health to visit. Its
 * addresses are packed at packed, stride bytes apart, their sums at sums:
 * struct rrset's, up to K, or a slot's (struct rrset_head), whose 32
 * bytes hold up to K A and aaaa_max = 2 AAAA. Each address is copied at
 * its own size, so neither reads past its packed bytes. */
static __always_inline int select_static(struct scratch *s, const __u16 *sums,
					 const __u8 *packed, __u32 n, __u32 stride,
					 const __u32 aaaa_max)
{
	struct pick *p = &s->pick;
	__u64 sum = 0;
	p->action = ACT_ANSWER;
	p->degraded = 0;
	if (stride == STATIC_STRIDE_A) {
#pragma unroll
		for (__u32 i = 0; i < K; i++) {
			if (i >= n)
				break;
			p->order[i] = i;
			*(__u64 *)s->ans[i] = *(const __u32 *)(packed + i * STATIC_STRIDE_A);
			sum += sums[i];
		}
	} else {
#pragma unroll
		for (__u32 i = 0; i < aaaa_max; i++) {
			if (i >= n)
				break;
			p->order[i] = i;
			__u64 *d = (__u64 *)s->ans[i];
			const __u64 *a = (const __u64 *)(packed + i * STATIC_STRIDE_AAAA);
			d[0] = a[0];
			d[1] = a[1];
			sum += sums[i];
		}
	}
	p->n = n;
	p->sum = sum;
	return 0;
}

/* select_set is select_answers for a set of n candidates at cand, their
 * sums at sums: the set's own (K of them, step 1) or a pool's
 * (POOL_CANDIDATES, step POOL_BLOCK). kk and step are constants, so each
 * size has its code unrolled for it.
 *
 * The scan builds bitmasks without a branch per candidate: healthy,
 * backup, present, and the geo rank as two bit planes. Every set the
 * decision needs is then an AND of them; only the chosen set's lowest
 * priority and weight sum take a second pass, in map memory. */
static __always_inline int select_set(struct scratch *s, const struct rrset *rr,
				      const struct candidate *cand, const __u16 *sums,
				      __u32 n, const struct geo_order *order,
				      const __u64 *bits, __u32 wmask,
				      const __u32 kk, const __u32 step)
{
	__u32 open = s->draw.open, rnd = s->draw.rnd, rr_turn = s->draw.turn;
	struct pick *p = &s->pick;
	volatile __u32 *np = &s->draw.n;
	*np = n;
	/* Bits 0..n-1, for n up to 64 and without a branch. */
	__u64 present = ((1ULL << (n & 63)) - 1) | -(__u64)(n >> 6);

	/* The scan: health and backup of every candidate, once. The work
	 * depends on the set's size, never on health: the slots past n hold
	 * no candidate, and every mask below keeps to present. It carries no
	 * more than the two masks, so that they stay in registers: BPF has
	 * ten, and every value past them goes through the stack. */
	__u64 healthy = 0, backup = 0;
SET_UNROLL
	for (__u32 i = 0, m = *np; i < kk; i++) {
		if (past(i, m, step))
			break;
		const struct candidate *c = &cand[i];
		healthy |= (__u64)health_bit(bits, wmask, c->check) << i;
		backup |= (__u64)(c->flags & CAND_BACKUP) << i;
	}
	/* Open: every candidate counts as healthy. */
	healthy |= present & -(__u64)open;
	__u64 up_all = present & healthy & ~backup;   /* healthy primaries */
	__u64 bup_all = present & healthy & backup;   /* healthy backups */
	__u64 prim_all = present & ~backup;           /* every primary */

	/* Geo: every candidate's rank, as two bit planes, then the nearest
	 * rank with a healthy primary; with none in any rank, the nearest
	 * with a healthy backup; with neither, the nearest with a primary, to
	 * fail open there. Each pass runs from the farthest rank to the
	 * nearest and keeps the last that has its kind, with choose, not a
	 * branch on health; a later pass overrides an earlier one. Without
	 * geo every candidate ranks 0: the branch is on the set's
	 * configuration, never on health, so the work stays the same at
	 * every health level. */
	__u64 rmask = ~0ULL;
	if (order) {
		__u64 rb0 = 0, rb1 = 0;
SET_UNROLL
		for (__u32 i = 0, m = *np; i < kk; i++) {
			if (past(i, m, step))
				break;
			/* The rank, clamped to GEO_RANKS - 1 = 3 without a branch. */
			__u64 r = order->rank[cand[i].region & (MAX_REGIONS - 1)];
			__u64 far = ((r >> 2) + 63) >> 6;
			r = (r & 3) | (far * 3);
			rb0 |= (r & 1) << i;
			rb1 |= ((r >> 1) & 1) << i;
		}
		_Static_assert(GEO_RANKS == 4, "the rank is kept as two bit planes");
		__u64 rank[GEO_RANKS] = {~rb0 & ~rb1, rb0 & ~rb1, ~rb0 & rb1, rb0 & rb1};
		__u64 kinds[3] = {prim_all, bup_all, up_all};
		rmask = rank[0];
#pragma unroll
		for (__u32 k = 0; k < 3; k++) {
#pragma unroll
			for (__u32 r = GEO_RANKS; r-- > 0;)
				rmask = choose(is_set(kinds[k] & rank[r]), rank[r], rmask);
		}
	}
	__u64 up = up_all & rmask, bup = bup_all & rmask, all = prim_all & rmask;

	__u64 e = eligible(p, rr, up, bup, all);
	p->degraded = is_set(present & ~healthy);

	/* The chosen set's lowest priority and weight sum, for the policies
	 * that use them: the work depends on the policy, never on health.
	 * The statistics live in map memory, read back through volatile: the
	 * verifier then sees unknown numbers instead of one constant per
	 * subset, and its states converge. */
	volatile struct set_stats *st = &s->chosen;
	if (rr->policy == POLICY_FAILOVER || rr->policy == POLICY_WEIGHTED) {
		st->mask = 0;
		st->low_mask = 0;
		st->low_prio = ~0u;
		st->wsum = 0;
SET_UNROLL
		for (__u32 i = 0, m = *np; i < kk; i++) {
			if (past(i, m, step))
				break;
			set_add(st, e & (1ULL << i), cand[i].priority, cand[i].weight);
		}
	}

	/* The start, for each policy the same work at any health: a draw
	 * is taken even where it goes unused (a count or weight sum of 0
	 * draws modulo 1, from an empty set), and chosen or not without a
	 * branch. */
	__u32 pc = __builtin_popcountll(e);
	__u32 pc1 = pc | (1 - is_set(pc));
	__u64 mask = e;
	__u32 start = 0, limit = choose(is_below(MAX_ANSWERS, rr->max_answers),
					MAX_ANSWERS, rr->max_answers);
	switch (rr->policy) {
	case POLICY_FAILOVER:
		mask = st->low_mask;
		break;
	case POLICY_WEIGHTED: {
		/* Set above for this policy only. */
		__u32 wsum = st->wsum;
		__u32 by_weight = weighted_member(cand, mask, rnd % (wsum | (1 - is_set(wsum))), np, kk, step);
		__u32 by_count = nth_member(mask, rnd % pc1, np, kk, step);
		limit = 1;
		start = choose(is_set(wsum), by_weight, by_count);
		break;
	}
	case POLICY_ROUND_ROBIN:
		start = nth_member(mask, rr_turn % pc1, np, kk, step);
		break;
	default: /* POLICY_MULTIVALUE */
		/* A set no larger than its limit always starts at its first:
		 * the branch is on the set's configuration. */
		if (n > limit)
			start = choose(is_below(limit, pc), nth_member(mask, rnd % pc1, np, kk, step), 0);
		break;
	}

	/* The answer order: the first limit members of mask from start on,
	 * wrapping at n, past which mask has no member. rot is mask turned
	 * so that its bit i is the i-th candidate visited, and lmask has a
	 * bit for each place below the limit. No branch on either: each step
	 * stores its candidate at the next place, taken or not, and only a
	 * taken one moves the place on, so that a place is written over
	 * until a member holds it, and the places past the last are never
	 * read. */
	start &= kk - 1;
	__u64 rot = ((mask >> start) | (mask << ((n - start) & (kk - 1)))) & present;
	__u64 lmask = (1ULL << limit) - 1;
	__u64 j = start, cnt = 0, sum = 0;
SET_UNROLL
	for (__u32 i = 0, m = *np; i < kk; i++) {
		if (past(i, m, step))
			break;
		__u64 take = (rot >> i) & (lmask >> cnt) & 1;
		__u32 o = cnt & (PICK_PLACES - 1), c = j & (kk - 1);
		p->order[o] = c;
		pick_answer(s, cand, o, c, kk);
		sum += sums[c] & -take;
		cnt += take;
		/* The next candidate: j + 1, or 0 past the last. */
		__u64 next = j + 1;
		j = next & -is_below(next, n);
	}
	p->n = cnt;
	p->sum = sum;
	return 0;
}

/* select_answers decides which candidates to answer and leaves the result
 * in s->pick. order ranks the candidates' regions for this client (NULL:
 * no geo); stride is a static set's bytes per address, STATIC_STRIDE_A or
 * STATIC_STRIDE_AAAA by the query's type. s->draw carries the rest of the
 * query's inputs: open (answer as if every candidate were healthy: no
 * table yet, or stale with answer_all), the random draw and the
 * round-robin turn, taken on every query. The branches here are on the
 * set's configuration: its size, whether it is static or a pool. */
static __always_inline int select_answers(struct scratch *s,
					     const struct rrset *rr,
					     const struct geo_order *order, __u32 stride)
{
	if (!s || !rr)
		return -1;
	__u32 zero = 0, wmask = health_word_mask;
	const __u64 *bits = bpf_map_lookup_elem(&health_bits, &zero);
	if (!bits)
		return -1;
	__u32 n = rr->n;
	if (rr->flags & RR_POOL) {
		__u32 idx = rr->pool;
		const struct rec_pool *pl = bpf_map_lookup_elem(&rec_pools, &idx);
		if (!pl)
			return -1;
		n = choose(is_below(POOL_CANDIDATES, n), POOL_CANDIDATES, n);
		return select_set(s, rr, pl->cand, pl->rr_sum, n, order, bits, wmask,
				  POOL_CANDIDATES, POOL_BLOCK);
	}
	if (n > K)
		n = K;
	if (n <= 1)
		return select_one(s, rr, n, s->draw.open, bits, wmask);
	if (rr->flags & RR_STATIC)
		return select_static(s, rr->rr_sum, rr->packed, n, stride, K);
	return select_set(s, rr, rr->cand, rr->rr_sum, n, order, bits, wmask, K, 1);
}

/* select_head is select_answers for a set kept in its slot: one
 * candidate, or a static set of up to eight A or two AAAA, which the
 * control plane keeps there (struct rrset_head, whose fields are struct
 * rrset's first, at the same offsets, so select_one reads it as one). */
static __always_inline int select_head(struct scratch *s, const struct rrset_head *rh, __u32 stride)
{
	if (!s || !rh)
		return -1;
	__u32 zero = 0, wmask = health_word_mask;
	const __u64 *bits = bpf_map_lookup_elem(&health_bits, &zero);
	if (!bits)
		return -1;
	__u32 n = rh->n;
	if (n <= 1)
		return select_one(s, (const struct rrset *)rh, n, s->draw.open, bits, wmask);
	if (n > MAX_CANDIDATES)
		n = MAX_CANDIDATES;
	if (stride == STATIC_STRIDE_AAAA && n > 2)
		n = 2;
	return select_static(s, rh->rr_sum, rh->packed, n, stride, 2);
}

#endif
