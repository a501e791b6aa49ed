/* SPDX-License-Identifier: GPL-2.0 */
/* The maps. All are pinned by name so a restart reuses them, and all carry
 * BTF so `bpftool map dump name NAME` prints fields. */
#ifndef STEADYDNS_MAPS_H
#define STEADYDNS_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "types.h"

#include "records.h"

/* The health table: fixed capacity (set at load time), written whole every
 * push period through mmap. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct health_entry);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} health SEC(".maps");

/* The health table's states as a bitmap, bit i of word i / 64 set while
 * entry i is up: what the scan reads, 8 KiB for 65,536 entries, so the
 * candidates' states come from a cache line or two instead of one 8-byte
 * entry each. One value holds the whole bitmap, so a query looks it up
 * once and indexes it by word: a lookup per candidate is inlined by the
 * verifier, but clang compiles it as a call and keeps every value the scan
 * carries out of the registers a call clobbers. The loader sizes the value
 * with the table, a power of two words, and sets health_word_mask. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[65536 / 64]);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} health_bits SEC(".maps");

/* The bitmap's words less one: a word's index is masked with it, which
 * the verifier, reading the constant, bounds by the value's size. */
volatile const __u32 health_word_mask = 65536 / 64 - 1;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct table_meta);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} health_meta SEC(".maps");

/* The timer that sets health_meta's stale_mark when the table passes its
 * stale_after; arm_stale (steadydns.c) arms it after every push. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stale_timer);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} stale_timer SEC(".maps");

/* Every packet's outcome, counted per CPU (struct outcome_counts). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct outcome_counts);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} counters SEC(".maps");

/* Geo: client prefix to region, then the region's ranking of regions. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 16);
	__type(key, struct geo_key4);
	__type(value, struct geo_match);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} geo4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 16);
	__type(key, struct geo_key6);
	__type(value, struct geo_match);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} geo6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_REGIONS);
	__type(key, __u32);
	__type(value, struct geo_order);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} geo_rank SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_ZONES);
	__type(key, __u32);
	__type(value, struct zone_soa);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} zones SEC(".maps");

/* Round-robin rotation, per CPU so that no two CPUs contend on it. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rr_counter SEC(".maps");

/* Response rate limiting's accounts: sets of RRL_WAYS (struct rrl_set,
 * one cache line each), the set of a key chosen by its hash. The XDP
 * program and the fallback, through the loader's memory mapping, read and
 * write the same accounts, without a lock. max_entries is
 * server.rrl.table_size / RRL_WAYS, which the loader sets with
 * rrl_set_bits (rrl.h). The pages of a small table stay in the TLB; a
 * hash map's buckets and elements did not. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, RRL_TABLE_DEFAULT / RRL_WAYS);
	__type(key, __u32);
	__type(value, struct rrl_set);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rrl SEC(".maps");

/* The coarse clock of rate limiting (struct rrl_clock), kept by its own
 * timer, which arm_rrl_clock (steadydns.c) starts at load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rrl_clock);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rrl_clock SEC(".maps");

/* Client prefixes never limited (server.rrl.exempt); an IPv4 prefix is
 * kept IPv4-mapped (::ffff:0:0/96). Read only for a reply over its limit. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024);
	__type(key, struct geo_key6);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rrl_exempt SEC(".maps");

/* Per-CPU working memory. The query is parsed where it lies in the frame
 * and an answer is written there too; buf holds a copy of the message only
 * to build a NODATA or SERVFAIL reply in, off the hot path, with masked
 * offsets. buf starts 4 bytes before the message so that the question name
 * (message offset 12) is 8-byte aligned for word stores. */
#define MSG_OFF 4

/* What the parser learned about the query. It lives in map memory, not on
 * the stack, so the verifier does not carry one state per name length
 * through the rest of the program. */
struct query {
	__u64 hash;      /* name_hash of the name and qtype */
	__u32 seq;       /* the found slot's sequence count */
	__u32 slot;      /* and its index */
	__u64 name_sum;  /* ones-complement partial sum of the name as sent */
	__u32 name_len;  /* wire length, root label included */
	__u32 q_end;     /* message offset just past the question */
	__u16 qtype;
	__u16 udp_size;  /* client's EDNS size; 512 without OPT */
	__u8 has_opt;
	__u8 do_bit;
	__u8 has_ecs;    /* an EDNS Client Subnet option */
	__u8 nsid;       /* an NSID option: the reply carries ours, if set */
	__u16 id;        /* the header's ID, host order */
	__u8 flags2;     /* the header's flag bytes (QR..RD, RA..rcode) */
	__u8 flags3;
};

/* Statistics of the candidate set the policy picks from. */
struct set_stats {
	__u64 mask;      /* members */
	__u64 low_mask;  /* members with the lowest priority among them */
	__u32 low_prio;
	__u32 wsum;      /* sum of weights */
};

/* The places of the answer order: MAX_ANSWERS, and past them room for the
 * stores of candidates not taken (select_set), a power of two the place
 * is masked to. */
#define PICK_PLACES (2 * MAX_ANSWERS)

struct pick {
	__u32 action;        /* enum action */
	__u32 degraded;      /* a present candidate is down: ttl_degraded applies */
	__u32 n;             /* answers, in order[0..n) */
	__u8 order[PICK_PLACES];  /* candidates to answer, in answer order */
	__u64 sum;           /* the answers' precomputed sums (rr_sum), added up */
};

/* Per-query inputs of the selection besides the record set. */
struct draw {
	__u32 open;
	__u32 rnd;
	__u32 turn;
	/* The set's size, which each loop of select_set reads afresh: the
	 * verifier then learns nothing from where one loop stopped, and the
	 * paths out of a loop are one state. */
	__u32 n;
};

/* What write_reply needs besides the query: the reply's parts decided in
 * the main program. */
struct reply {
	__u64 tail;      /* the sum of the reply from the question's type on, so far */
	__u32 an;        /* answers, from scratch.ans */
	__u32 ttl;
	__u32 rlen;      /* the reply's DNS message length */
	__u32 nsid_n;    /* NSID option bytes, 0 for none */
	__u32 dns_off;   /* the frame: where its message starts */
	__u32 dns_len;   /* and its length now, which write_reply resizes */
	__u32 sig_len;   /* bytes of RRSIG records after the answers (sigs.h) */
	__u32 sig_n;     /* and how many */
	__u64 sig_content;  /* their key's content and epoch, for a NODATA to find them again */
	__u32 sig_epoch;
	__u8 flags2;     /* the reply's header flag bytes */
	__u8 flags3;
	__u8 v6;
	__u8 opt;        /* an OPT follows the answers */
};

struct scratch {
	/* What every answered query touches comes first, in about 500
	 * contiguous bytes; buf, for NODATA and SERVFAIL only, last. */
	__u8 key[NAME_MAX_WIRE + 1 + 8] __attribute__((aligned(8)));
	struct query q;
	struct draw draw;
	struct set_stats chosen;  /* of the set the policy picks from */
	struct pick pick;
	struct reply reply;
	/* The picked candidates' addresses in answer order, copied out of
	 * the slot before its sequence count is checked again: the reply is
	 * then written into the packet from here, so a set rewritten
	 * meanwhile is caught before the packet changes. */
	__u8 ans[PICK_PLACES][16] __attribute__((aligned(8)));
	/* A signed answer's RRSIGs, copied out of their entry (sigs.h). */
	__u8 sig[SIG_BYTES_MAX] __attribute__((aligned(8)));
	/* 64 bytes of slack past MSG_MAX: a record is written at a masked
	 * offset, and the verifier must see room for its whole length. */
	__u8 buf[MSG_OFF + MSG_MAX + 64] __attribute__((aligned(8)));
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} scratch SEC(".maps");

/* Every step is inlined into one function: a call costs its return, and
 * under the kernel's return thunk (the SRSO mitigation of AMD CPUs) every
 * return mispredicts. reread_scratch() stands where a call boundary
 * stood: what the step before it wrote to the scratch is read back from
 * map memory, which the verifier knows nothing of, instead of reused from
 * the registers clang would keep it in. Each path through that step then
 * ends in the same state, and the verifier checks what follows once, not
 * once per path (the label walk, the options and the selection's cases
 * would otherwise multiply past its limit). */
static __always_inline void reread_scratch(void)
{
	asm volatile("" ::: "memory");
}

#endif
