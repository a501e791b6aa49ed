/* SPDX-License-Identifier: GPL-2.0 */
/* dnstap's sample of what XDP answers: one query in sample_every that
 * reaches a reply, with the reply sent, goes to the samples ring buffer,
 * which the control plane turns into dnstap messages. */
#ifndef STEADYDNS_SAMPLE_H
#define STEADYDNS_SAMPLE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "types.h"
#include "maps.h"
#include "dns.h"

/* Set at load time (loader.Options.SampleEvery); 0 samples nothing, and
 * the verifier, reading the constant, removes every line below from the
 * answer path. */
volatile const __u32 sample_every = 0;

/* The samples, each a struct sample as long as what it holds. When the
 * reader falls behind the ring fills, and a sample it refuses is counted
 * in sample_cpu's dropped: the reply has gone out already. */
#define SAMPLE_RING (1 << 20)
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, SAMPLE_RING);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} samples SEC(".maps");

/* A sample wakes the reader only once a quarter of the ring waits: a
 * wakeup per sample would cost each sampled query several times its
 * answer. The reader also looks every loader.SamplePoll on its own. */
#define SAMPLE_WAKE (SAMPLE_RING / 4)

/* Per CPU: the countdown to the next sample, whether the query on its way
 * to a reply is one, and the sample being built. */
struct sample_state {
	__u32 left;      /* queries to let pass before the next sample */
	__u32 taken;     /* the current query is sampled: rec holds it */
	__u64 dropped;   /* samples the full ring refused */
	struct sample rec;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_state);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sample_cpu SEC(".maps");

/* sample_query counts a query whose record XDP holds towards the next
 * sample and, when it is the sample, copies the query's first bytes and
 * addresses before its reply overwrites them. It runs once for every
 * query that reaches a reply, so taken always speaks of the current
 * query. A counter, not the query's random draw: the selection picks by
 * the draw modulo the set's size, so sampling by it would log only
 * certain answers. */
static __always_inline void sample_query(struct xdp_md *ctx, __u32 dns_off, __u32 dns_len,
					 const __u8 *src, __u16 sport, __u8 v6)
{
	__u32 zero = 0;
	if (!sample_every)
		return;
	struct sample_state *c = bpf_map_lookup_elem(&sample_cpu, &zero);
	if (!c)
		return;
	if (c->left) {
		c->left--;
		c->taken = 0;
		return;
	}
	c->left = sample_every - 1;
	c->taken = 0;
	struct sample *r = &c->rec;
	__u32 kept = dns_len < SAMPLE_QUERY_MAX ? dns_len : SAMPLE_QUERY_MAX;
	if (kept < DNS_HDR || kept > SAMPLE_QUERY_MAX)
		return;
	if (bpf_xdp_load_bytes(ctx, dns_off, r->data, kept))
		return;
	/* The server's address: the query's destination, at a fixed offset
	 * after the Ethernet header (parse_l3 refuses IP options). */
	if (bpf_xdp_load_bytes(ctx, v6 ? 14 + 24 : 14 + 16, r->server, v6 ? 16 : 4))
		return;
	__builtin_memcpy(r->client, src, 16);
	r->client_port = sport;
	r->query_len = dns_len;
	r->v6 = v6;
	r->every = sample_every;
	c->taken = 1;
}

/* sample_reply sends the sample once its reply, rlen bytes at frame
 * offset dns_off, is final, if the query is the sample. */
static __always_inline void sample_reply(struct xdp_md *ctx, __u32 dns_off, __u32 rlen)
{
	__u32 zero = 0;
	if (!sample_every)
		return;
	struct sample_state *c = bpf_map_lookup_elem(&sample_cpu, &zero);
	if (!c || !c->taken)
		return;
	c->taken = 0;
	struct sample *r = &c->rec;
	__u32 qk = r->query_len;
	if (qk > SAMPLE_QUERY_MAX)
		qk = SAMPLE_QUERY_MAX;
	if (rlen < DNS_HDR || rlen > SAMPLE_REPLY_MAX)
		return;
	__u8 *reply = r->data + qk;
	if (bpf_xdp_load_bytes(ctx, dns_off, reply, rlen))
		return;
	r->rcode = reply[3] & 0x0f;
	r->ancount = (__u16)reply[6] << 8 | reply[7];
	r->reply_len = rlen;
	r->boot_ns = bpf_ktime_get_boot_ns();
	__u64 wake = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) >= SAMPLE_WAKE ?
		     BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&samples, r, __builtin_offsetof(struct sample, data) + qk + rlen, wake))
		c->dropped++;
}

#endif
