/* SPDX-License-Identifier: GPL-2.0 */
/* Every layout shared between the XDP program and the Go control plane.
 * bpf2go generates the Go side from the BTF of this file (-type), so there
 * is exactly one definition. Sizes are fixed at build time. */
#ifndef STEADYDNS_TYPES_H
#define STEADYDNS_TYPES_H

#include <linux/types.h>
#include <linux/bpf.h>

/* K, the candidates a record set keeps in struct rrset (its ext entry, a
 * slot keeping one), which every query visits. A build may set it with
 * -DCANDIDATES=N: a power of two, at most
 * MAX_ANSWERS (a zone file's set answers every candidate, and the
 * selection indexes slots with & (K - 1)). */
#ifndef CANDIDATES
#define CANDIDATES 8
#endif

/* Every size and constant the control plane needs as well. They are enum
 * constants, not macros, so that they reach the BTF and bpf2go generates
 * them (bpf.SteadydnsLimits*): Go never holds a copy that a change here
 * would leave behind. */
enum limits {
	MAX_CANDIDATES = CANDIDATES,
	/* A set of more candidates is a pool: its candidates live in the
	 * pool map (struct rec_pool), up to POOL_CANDIDATES, and the
	 * selection visits them in blocks of POOL_BLOCK, every one of the
	 * blocks the set reaches into. */
	POOL_CANDIDATES = 64,
	POOL_BLOCK = 16,
	/* The most answers a reply carries, whatever the set's size:
	 * max_answers is at most this. */
	MAX_ANSWERS = 8,
	/* The DNS message is copied into a per-CPU buffer of this size;
	 * longer queries go to the fallback. */
	MSG_MAX = 1024,
	/* Longest wire-format name (RFC 1035 §3.1), root label included. */
	NAME_MAX_WIRE = 255,
	/* The bytes of a name a record slot keeps in its first cache line
	 * (struct rec_slot): a multiple of 8. */
	NAME_HEAD = 48,
	/* Geo: region ids are 1..MAX_REGIONS-1, 0 is none. A client's region
	 * orders candidate regions into GEO_RANKS ranks: its own, the next two
	 * it fails over to, and everything else. */
	MAX_REGIONS = 64,
	GEO_RANKS = 4,
	/* Longest SOA RDATA XDP puts in a NODATA reply; longer ones go to the
	 * fallback. */
	SOA_RDATA_MAX = 256,
	/* Zones XDP holds SOAs for, indexed by a set's zone byte; the index
	 * MAX_ZONES is past the table, so a set of a zone beyond them has its
	 * NODATA answered by the fallback. */
	MAX_ZONES = 255,
	/* Server addresses XDP answers for, per address family. */
	MAX_SERVER_ADDRS = 8,
	/* The EDNS UDP size replies advertise, on both paths: the DNS flag
	 * day 2020 value, which avoids fragments. */
	EDNS_UDP_SIZE = 1232,
	/* The record table: a query probes at most PROBE_MAX slots from its
	 * home slot; the control plane places every set within them. Its
	 * live region is kept at a load of at most LOAD_MAX_PCT percent,
	 * where Robin Hood placement keeps the longest probe well inside. */
	PROBE_MAX = 16,
	LOAD_MAX_PCT = 80,
	/* The bytes a static set keeps per address (struct rrset's
	 * packed), by the query type. */
	STATIC_STRIDE_A = 4,
	STATIC_STRIDE_AAAA = 16,
	/* Longest NSID value (RFC 5001) replies carry, server.nsid. */
	NSID_MAX = 128,
	/* Response rate limiting: the accounts one set of the table holds
	 * (one cache line of struct rrl_way), the table's accounts by
	 * default and at least and at most (server.rrl.table_size, a power
	 * of two), and the longest IPv6 prefix a key can carry. */
	RRL_WAYS = 4,
	RRL_TABLE_DEFAULT = 65536,
	RRL_TABLE_MIN = 1024,
	RRL_TABLE_MAX = 16777216,
	RRL_V6_PREFIX_MAX = 64,
	/* The period of the clock rate limiting reads in XDP, 1 ms: the
	 * clock lags by at most this, against limits in replies per second. */
	RRL_TICK_NS = 1000000,
	/* dnstap's sample of XDP's replies (struct sample): the most of a
	 * query it keeps, and of a reply, which is never longer. */
	SAMPLE_QUERY_MAX = 512,
	SAMPLE_REPLY_MAX = MSG_MAX,
	/* The bytes of RRSIG records a signed answer carries (sigs.h): two
	 * (a double signature while a key rolls), each of an ECDSA P-256 or
	 * Ed25519 signature and a signer's name of up to 186 bytes. Longer
	 * ones are left to the fallback. */
	SIG_BYTES_MAX = 560,
};

_Static_assert((MAX_CANDIDATES & (MAX_CANDIDATES - 1)) == 0 && MAX_CANDIDATES <= MAX_ANSWERS,
	       "MAX_CANDIDATES must be a power of two, at most MAX_ANSWERS");
_Static_assert(POOL_CANDIDATES == 64 && POOL_CANDIDATES % POOL_BLOCK == 0,
	       "a pool is one 64-bit mask, in whole blocks");

#define MSG_MASK (MSG_MAX - 1)

/* What a query's reply is, decided by the selection. */
enum action {
	ACT_ANSWER = 0,    /* the picked candidates */
	ACT_NODATA = 1,    /* when_all_down: nodata */
	ACT_SERVFAIL = 2,  /* when_all_down: servfail */
};

enum policy {
	POLICY_MULTIVALUE = 0,
	POLICY_FAILOVER = 1,
	POLICY_WEIGHTED = 2,
	POLICY_ROUND_ROBIN = 3,
};

enum when_all_down {
	WHEN_DOWN_ANSWER_ALL = 0,
	WHEN_DOWN_NODATA = 1,
	WHEN_DOWN_SERVFAIL = 2,
};

enum stale_policy {
	STALE_KEEP = 0,
	STALE_ANSWER_ALL = 1,
};

enum candidate_flags {
	CAND_BACKUP = 1,
};

enum rrset_flags {
	RR_SIGNED = 1,  /* zone is signed: DO=1 queries go to the fallback */
	RR_GEO = 2,     /* candidates have regions: steer by the client's */
	/* A zone file's set: no health check (every check 0, always up), no
	 * backup, no geo, multivalue answering every candidate. Its answers
	 * are all its candidates in order at any health, which the program
	 * writes without the selection's scan. */
	RR_STATIC = 4,
	/* A pool: the candidates and their sums are in the pool map, at
	 * the set's pool index. */
	RR_POOL = 8,
	/* The set, whole, and its name's tail are in the ext map, at the
	 * slot's ext index (struct rec_ext): a set the slot's two cache
	 * lines cannot hold. */
	RR_EXT = 16,
};

struct candidate {
	__u8 addr[16];   /* A: first 4 bytes, network order */
	__u32 check;     /* health table index; 0 is always healthy */
	__u8 weight;
	__u8 priority;
	__u8 flags;      /* enum candidate_flags */
	__u8 region;
};

struct rrset {
	__u32 ttl;
	__u32 ttl_degraded;  /* 0: unset */
	__u8 n;              /* candidates in use, 0..K, or up to POOL_CANDIDATES in a pool */
	__u8 policy;         /* enum policy */
	__u8 when_all_down;  /* enum when_all_down */
	__u8 max_answers;
	__u8 min_healthy;    /* healthy non-backup candidates needed to stop failing open */
	__u8 stale;          /* enum stale_policy */
	__u8 flags;          /* enum rrset_flags */
	__u8 zone;           /* index into the zone table, for NODATA's SOA */
	/* Per candidate, the ones-complement sum of its answer record as the
	 * program writes it, TTL left 0, in little-endian 16-bit words from
	 * the record's start: the loader computes it for the set's type, so
	 * the program's checksum needs no pass over the answers. Before the
	 * candidates, so that a set's fields, its sums and its first
	 * candidate share a cache line: the slot's (struct rrset_head). */
	__u16 rr_sum[MAX_CANDIDATES];
	union {
		struct candidate cand[MAX_CANDIDATES];
		/* A set flagged RR_STATIC keeps its addresses alone, back to
		 * back, STATIC_STRIDE_A bytes each for A and STATIC_STRIDE_AAAA
		 * for AAAA, the rest zero: up to eight A or two AAAA end with
		 * the set's first cache line, which the slot holds. A set of
		 * one is the same either way: its address starts cand[0], its
		 * check is 0. */
		__u8 packed[MAX_CANDIDATES * 16];
		/* A set flagged RR_POOL: its entry of the pool map. */
		__u32 pool;
	};
};

/* A pool's candidates and their sums (struct rrset's rr_sum and cand),
 * an entry of the pool map. Its set's ext entry holds its index, and the
 * control plane writes an entry only while that set's slot's sequence
 * count is odd, and reuses it only once the slot has moved on: the count
 * that guards a set's fields guards its pool too. Candidates past the
 * set's n are zero. */
struct rec_pool {
	__u16 rr_sum[POOL_CANDIDATES];
	struct candidate cand[POOL_CANDIDATES];
} __attribute__((aligned(64)));

/* Slot states of the record table. */
enum slot_state {
	SLOT_EMPTY = 0,
	SLOT_USED = 1,
};

/* What a slot keeps of a set: struct rrset's first 64 bytes, the same
 * fields at the same offsets, so the loader copies them and the
 * selection reads either through the same code: the set's fields, its
 * sums, and one candidate or a static set's packed addresses. A set that
 * needs more (more candidates, a pool, or a name past NAME_HEAD) is
 * flagged RR_EXT and names its ext entry in ext instead. */
struct rrset_head {
	__u32 ttl;
	__u32 ttl_degraded;
	__u8 n;
	__u8 policy;
	__u8 when_all_down;
	__u8 max_answers;
	__u8 min_healthy;
	__u8 stale;
	__u8 flags;
	__u8 zone;
	__u16 rr_sum[MAX_CANDIDATES];
	union {
		struct candidate cand[1];
		__u8 packed[2 * STATIC_STRIDE_AAAA];
		__u32 ext;
	};
};

/* One slot of the record table, two cache lines: an open-addressing hash
 * table in an array map (the verifier inlines array lookups; a hash
 * map's lookup is a call that hashes the whole key). A set lives in the
 * slot its hash picks (home_slot in table.h), or up to PROBE_MAX - 1
 * slots after it, in Robin Hood order: the control plane keeps each set
 * no further from home than the sets it passes, so a probe stops at the
 * first slot nearer its home than the probe has come. The control plane
 * writes slots through the map's memory mapping under a sequence count:
 * odd while it writes, so a query that sees the count odd or changed
 * leaves the set to the fallback instead of reading it half-written.
 * The first line holds what the probe compares (the hash, the name's
 * first NAME_HEAD bytes), the second the set: a set of one candidate, or
 * a static one of up to eight A or two AAAA, reads the pair of lines the
 * CPU fetches together and nothing else. */
struct rec_slot {
	__u32 seq;
	__u8 state;      /* enum slot_state */
	__u8 dist;       /* slots from its home slot */
	__u16 qtype;
	__u64 hash;      /* name_hash of the name and qtype */
	/* The lowercased wire name's first NAME_HEAD bytes, zero-filled;
	 * the rest, for a longer name, in its ext entry. */
	char name_head[NAME_HEAD];
	struct rrset_head rr;
} __attribute__((aligned(64)));

/* A set the slot cannot hold, whole, and its name's tail past NAME_HEAD,
 * an entry of the ext map. Written under its slot's sequence count, as a
 * pool entry is. */
struct rec_ext {
	struct rrset rr;
	char name_tail[NAME_MAX_WIRE + 1 - NAME_HEAD];
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct rec_slot) == 128, "a slot is two cache lines");
_Static_assert(__builtin_offsetof(struct rec_slot, rr) == 64,
	       "a slot's set starts its second cache line");
_Static_assert(__builtin_offsetof(struct rrset_head, rr_sum) == __builtin_offsetof(struct rrset, rr_sum) &&
	       __builtin_offsetof(struct rrset_head, cand) == __builtin_offsetof(struct rrset, cand) &&
	       __builtin_offsetof(struct rrset_head, zone) == __builtin_offsetof(struct rrset, zone),
	       "a slot's set is struct rrset's first bytes");
_Static_assert(MAX_ZONES < 256, "a set's zone byte can name one past the zones");

enum __attribute__((packed)) health_state {
	HEALTH_DOWN = 0,
	HEALTH_UP = 1,
};

/* Client prefixes to regions, longest match first (LPM tries). */
struct geo_key4 {
	__u32 prefixlen;
	__u8 addr[4];
};
struct geo_key6 {
	__u32 prefixlen;
	__u8 addr[16];
};
struct geo_match {
	__u8 region;
	__u8 prefixlen;  /* of the matching entry, for the ECS scope */
	__u16 _pad;
};

/* For one client region, the rank of every candidate region (0 = the
 * client's own). Region 0, no region, ranks 0 for every client. */
struct geo_order {
	__u8 rank[MAX_REGIONS];
};

/* A zone's SOA, for NODATA replies built in XDP. */
struct zone_soa {
	__u32 ttl;        /* min(SOA TTL, SOA MINIMUM), RFC 2308 */
	__u16 rdlen;
	__u8 apex_len;    /* wire length of the zone's name */
	__u8 _pad;
	__u8 rdata[SOA_RDATA_MAX];
};

/* Why an entry has its state. The program reads only the state; the
 * reason is for people (bpftool, the API). Values below 0x80 are the
 * prober's result reasons (prober/reason.go: ok, timeout, refused…),
 * carried through unchanged; the aggregator's own start at 0x80. */
enum health_reason {
	REASON_STATIC = 0x80,       /* entry 0: candidates without a check */
	REASON_ADMIN_UP = 0x81,     /* forced up by the admin override */
	REASON_ADMIN_DOWN = 0x82,   /* forced down by the admin override */
	REASON_CALCULATED = 0x83,   /* from the states of child checks */
	REASON_EXTERNAL = 0x84,     /* pushed through the API */
	REASON_EXPIRED = 0x85,      /* external state not refreshed within its TTL */
	REASON_NO_RESULTS = 0x86,   /* no checker has reported yet */
	REASON_SHIFTED = 0x87,      /* the answer's region is shifted away */
};

/* One entry of the fixed-size health table, written through mmap by the
 * control plane. The array map spaces entries 8 bytes apart. */
struct health_entry {
	enum health_state state; /* one byte: the enum is packed */
	__u8 reason;  /* reason code of the last transition */
	__u16 _pad;
};

/* Describes the health table now in the map. The edge stamps arrival with
 * its own CLOCK_BOOTTIME; other hosts' clocks are never compared. */
struct table_meta {
	__u64 version;        /* push slot; 0 = no table yet (fail open) */
	__u64 config_hash;
	__u64 arrived_ns;     /* bpf_ktime_get_boot_ns() clock */
	__u64 stale_after_ns; /* 0 = never stale */
	/* arrived_ns of the table once it is older than stale_after_ns, set
	 * by the stale timer: queries compare it with arrived_ns instead of
	 * reading a clock. A push leaves it 0 and arms the timer. */
	__u64 stale_mark;
};

/* The timer that marks the health table stale (stale_timer in maps.h). */
struct stale_timer {
	struct bpf_timer t;
};

/* Outcome of every packet the program sees, counted per CPU. */
enum outcome {
	OUT_ANSWERED = 0,     /* the answers */
	OUT_NODATA,           /* when_all_down: nodata, answered here */
	OUT_SERVFAIL,         /* when_all_down: servfail, answered here */
	OUT_NOT_DNS,          /* not UDP to a server address on port 53 */
	OUT_MALFORMED,        /* lengths or header do not add up */
	OUT_IP_OPTIONS,
	OUT_FRAGMENT,
	OUT_IPV6_EXT,
	OUT_NOT_QUERY,        /* QR set, opcode != 0, or counts out of shape */
	OUT_COMPRESSION,      /* compression pointer in the question */
	OUT_QTYPE,            /* not A or AAAA */
	OUT_QCLASS,           /* not IN */
	OUT_ADDITIONAL,       /* additional record that is not OPT */
	OUT_EDNS_VERSION,
	OUT_OPT_MALFORMED,
	OUT_NOT_FOUND,        /* no record set in the table, or one being rewritten */
	OUT_DNSSEC,           /* DO=1 for a signed zone */
	OUT_TRUNCATED,        /* reply larger than the client accepts */
	OUT_NO_ROOM,          /* the packet could not be grown */
	OUT_TOO_LONG,         /* query longer than MSG_MAX */
	OUT_NO_SOA,           /* NODATA, but the zone's SOA is not in the map */
	OUT_ECS,              /* geo record queried with ECS: the fallback steers */
	OUT_RRL_SLIPPED,      /* over the rate limit: a truncated reply, TC=1 */
	OUT_RRL_DROPPED,      /* over the rate limit: no reply (XDP_DROP) */
	OUT_MAX,
};

/* The outcome counts: one field per enum outcome, in its order, named
 * as the outcome without OUT_ in lowercase, so that bpftool prints each
 * count by name (an array map's key must be a plain 32-bit integer in the
 * BTF, so the enum cannot be the key). The program indexes the fields by
 * the enum; loader.OutcomeNames reads the names, the metric labels, from
 * here, and its test holds them against the enum. */
struct outcome_counts {
	__u64 answered;
	__u64 nodata;
	__u64 servfail;
	__u64 not_dns;
	__u64 malformed;
	__u64 ip_options;
	__u64 fragment;
	__u64 ipv6_ext;
	__u64 not_query;
	__u64 compression;
	__u64 qtype;
	__u64 qclass;
	__u64 additional;
	__u64 edns_version;
	__u64 opt_malformed;
	__u64 not_found;
	__u64 dnssec;
	__u64 truncated;
	__u64 no_room;
	__u64 too_long;
	__u64 no_soa;
	__u64 ecs;
	__u64 rrl_slipped;
	__u64 rrl_dropped;
};

_Static_assert(sizeof(struct outcome_counts) == OUT_MAX * sizeof(__u64),
	       "struct outcome_counts needs one field per enum outcome");

/* The NSID option replies carry when the query's OPT asks for it
 * (RFC 5001), set at load time from server.nsid: the option as the reply
 * holds it, so the program copies words instead of building it. */
struct nsid_option {
	__u32 len;  /* option bytes: 4 + the value's length; 0: NSID is off */
	/* The ones-complement sum of opt[1..len), in little-endian 16-bit
	 * words from opt[1]: the option follows the OPT's 11 bytes, so its
	 * first byte (0, the code's high byte) completes the OPT's last
	 * 32-bit word, and the rest starts at an even offset of the reply's
	 * tail. */
	__u32 sum;
	/* Code (3), length and value in network order, zero-filled. */
	__u8 opt[(4 + NSID_MAX + 7) & ~7] __attribute__((aligned(8)));
};

/* Response rate limiting (rrl.h). A key is a client prefix together with
 * what it is answered, as BIND, Knot and NSD key it: the client's address
 * masked to its prefix (IPv4, or IPv6's first 64 bits), the family, and
 * what the reply is: the name_hash of the lowercased query name and type
 * for an answer or NODATA; of the zone's name with type 0 for NXDOMAIN;
 * the rcode for any other error. XDP and the fallback account every reply
 * in the one table, so a client cannot double its budget by mixing paths.
 *
 * The table is an array of sets of RRL_WAYS accounts, one 64-byte cache
 * line each. A key's hash (rrl_hash, keyed with the clock's seed) picks
 * its set by its top bits and is kept, its low 48 bits, as the account's
 * tag. */
struct rrl_way {
	/* The key's hash's low 48 bits in bits 16..63; in bits 0..15 the
	 * replies over the limit so far, modulo slip: every slip-th is sent
	 * truncated. An empty way is all zero: an account whose tat has long
	 * passed, as good as none. */
	__u64 tag;
	/* The account, by the generic cell rate algorithm: the theoretical
	 * arrival time, on the CLOCK_BOOTTIME clock (bpf_ktime_get_boot_ns),
	 * of the key's next reply at its rate. Every reply moves it one
	 * interval (1 s / rate) on; a reply is within the limit while tat
	 * stays within a second of now, which allows `rate` replies in a
	 * burst and `rate` a second after; tat is kept within window of now,
	 * so a flood stays limited for up to window after it stops. */
	__u64 tat;
};

struct rrl_set {
	struct rrl_way way[RRL_WAYS];
};

_Static_assert(sizeof(struct rrl_set) == 64, "an rrl set is one cache line");

/* The clock rate limiting reads in XDP: a timer writes the boot clock
 * into now every RRL_TICK_NS, so a query reads memory instead of calling
 * the clock's helper. */
struct rrl_clock {
	struct bpf_timer t;
	__u64 now;
	/* The key of rrl_hash, drawn by the loader when it creates the map:
	 * kept with the clock, which every query reads anyway, and pinned,
	 * so a restart finds the accounts it left. */
	__u64 seed;
};

enum rrl_verdict {
	RRL_SEND = 0,
	RRL_SLIP = 1,
	RRL_DROP = 2,
};

/* One reply XDP sent and the query it answered, as the samples ring
 * buffer carries them (sample.h): the fields, then data, which holds the
 * first min(query_len, SAMPLE_QUERY_MAX) bytes of the query and then the
 * reply, reply_len bytes. A record is as long as what it holds. */
struct sample {
	__u64 boot_ns;      /* when the reply was sent, CLOCK_BOOTTIME */
	__u8 client[16] __attribute__((aligned(8)));  /* IPv4: the first 4 bytes */
	__u8 server[16] __attribute__((aligned(8)));
	__u32 every;        /* the rate it was sampled at: one in every */
	__u16 client_port;  /* host order */
	__u16 query_len;
	__u16 reply_len;
	__u16 ancount;
	__u8 rcode;
	__u8 v6;
	__u8 data[SAMPLE_QUERY_MAX + SAMPLE_REPLY_MAX] __attribute__((aligned(8)));
};

/* Names the enums in the BTF so that bpf2go can generate them as Go
 * constants; the program never reads it. */
struct enum_anchor {
	enum policy policy;
	enum when_all_down when_all_down;
	enum stale_policy stale;
	enum candidate_flags candidate_flags;
	enum rrset_flags rrset_flags;
	enum health_state health_state;
	enum health_reason health_reason;
	enum slot_state slot_state;
	enum outcome outcome;
	enum action action;
	enum limits limits;
	enum rrl_verdict rrl_verdict;
};

#endif
