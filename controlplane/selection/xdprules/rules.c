//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* The XDP program's rules on their own, for tests. run_select runs the
 * very functions the program runs once it has found a record set
 * (table_old, table_open, query_draw, select_answers, answer_ttl) on
 * inputs carried in the test packet instead of a parsed query, and writes
 * the outcome back over the packet; run_rrl runs the rules of rate
 * limiting (rrl_hash, rrl_charge) on one set. The server never loads it. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "types.h"
#include "maps.h"
#include "select.h"
#include "rrl.h"

/* One selection's inputs, as the packet carries them. The health table is
 * the health map, which the test writes through its memory mapping. */
struct input {
	struct table_meta meta;
	__u64 now;            /* CLOCK_BOOTTIME for the open rule */
	struct rrset rr;
	struct geo_order order;
	__u32 geo;            /* 0: no geo, select_answers gets no order */
	__u32 rnd;
	__u32 turn;
	__u64 hash;           /* the name's hash, port and ID: for query_draw */
	__u16 port;
	__u16 id;
};

/* What the program would answer. */
struct output {
	struct pick pick;
	__u32 ttl;
	__u32 open;
	__u32 draw;  /* query_draw of the input's port, ID and hash */
};

/* The input lives in map memory: select_answers takes pointers that the
 * verifier must see as sized memory, and the stack is too small. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct input);
} inputs SEC(".maps");

/* Names struct output in the BTF so that bpf2go generates it; nothing
 * reads it. */
const struct output output_anchor __attribute__((unused));

SEC("xdp")
int run_select(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct input *in = bpf_map_lookup_elem(&inputs, &zero);
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	if (!in || !s)
		return XDP_ABORTED;
	if (bpf_xdp_load_bytes(ctx, 0, in, sizeof(*in)))
		return XDP_ABORTED;

	/* As the stale timer would have marked the table at now. */
	in->meta.stale_mark = table_old(&in->meta, in->now) ? in->meta.arrived_ns
							    : in->meta.arrived_ns + 1;
	/* As the XDP program does once it has found the record set. */
	s->draw.open = table_open(&in->meta, in->rr.stale);
	s->draw.rnd = in->rnd;
	s->draw.turn = in->turn;
	/* The output is the order, not the addresses, so a static set's
	 * stride does not matter here. */
	if (select_answers(s, &in->rr, in->geo ? &in->order : 0, STATIC_STRIDE_AAAA))
		return XDP_ABORTED;
	struct pick p = s->pick;

	struct output out = {
		.pick = p,
		.ttl = answer_ttl(&in->rr, p.degraded),
		.open = s->draw.open,
		.draw = query_draw(in->port, in->id, in->hash),
	};
	if (bpf_xdp_store_bytes(ctx, 0, &out, sizeof(out)))
		return XDP_ABORTED;
	return XDP_PASS;
}

/* One charge of rate limiting: a key, as rrl_check has it once it has
 * masked the client, and the set its hash picks, as it stands. */
struct rrl_input {
	struct rrl_set set;
	__u64 seed;
	__u64 client;
	__u64 resp;
	__u64 now;
	__u32 v6;
	__u32 _pad;
};

/* The set after the charge, the key's hash and the verdict. */
struct rrl_output {
	struct rrl_set set;
	__u64 hash;
	__u32 verdict;
	__u32 _pad;
};

/* rrl_charge writes the set in map memory, as in the program's table. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rrl_input);
} rrl_inputs SEC(".maps");

const struct rrl_output rrl_output_anchor __attribute__((unused));

SEC("xdp")
int run_rrl(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct rrl_input *in = bpf_map_lookup_elem(&rrl_inputs, &zero);
	if (!in)
		return XDP_ABORTED;
	if (bpf_xdp_load_bytes(ctx, 0, in, sizeof(*in)))
		return XDP_ABORTED;
	struct rrl_output out = {};
	out.hash = rrl_hash(in->seed, in->client, in->v6 != 0, in->resp);
	out.verdict = rrl_charge(&in->set, out.hash, in->now);
	out.set = in->set;
	if (bpf_xdp_store_bytes(ctx, 0, &out, sizeof(out)))
		return XDP_ABORTED;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
