package dnsbench

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/records"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// checkOf is the health-table entry of candidate j of name i. Entries
// run 1 … healthTableSize-2 (0 is the always-up entry); the count is
// even, so a set of an even K > 1 candidates holds K/2 whole pairs of
// entries (2m+1, 2m+2), whatever the wrap, and with K = 1 two names in
// a row share a pair.
func checkOf(i, j, k int) uint32 { return uint32(1 + (i*k+j)%(healthTableSize-2)) }

// putRecordSets writes a set of qtype (A or AAAA) with k health-checked
// candidates for each of n names (recordSets).
func putRecordSets(o *loader.Objects, n, k int, qtype uint16, opt Options) error {
	return recordSets(n, k, qtype, opt, o.PutSet)
}

// recordSets yields a set of qtype (A or AAAA) with k health-checked
// candidates for each of n names, of Options.ConstantWorkPolicy,
// answering up to k, at most MAX_ANSWERS; a set of more than
// loader.MaxCandidates is a pool. A failover set's candidates rank in
// order, a weighted set's weigh alike. With Options.ConstantWorkStatic a
// set is a zone file's instead: no check, flagged RR_STATIC, which the
// loader packs and the program answers without a selection.
func recordSets(n, k int, qtype uint16, opt Options, yield func(loader.RecordKey, *bpf.Set) error) error {
	policy, ok := records.DataPlanePolicy(opt.ConstantWorkPolicy)
	if !ok {
		return fmt.Errorf("constant-work policy %q: not a policy", opt.ConstantWorkPolicy)
	}
	buf := make([]byte, 256)
	for i := range n {
		l, err := dns.PackDomainName(nameOf(i), buf, 0, nil, false)
		if err != nil {
			return fmt.Errorf("packing %s: %w", nameOf(i), err)
		}
		v := bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{Ttl: 300, N: uint8(k), MaxAnswers: uint8(min(k, maxAnswers)), Policy: uint8(policy)}}
		if opt.ConstantWorkStatic {
			v.Flags = uint8(bpf.SteadydnsRrsetFlagsRR_STATIC)
		}
		if k > loader.MaxCandidates {
			v.Pool = make([]bpf.SteadydnsCandidate, k)
		}
		cs := v.Candidates()
		for j := range k {
			if qtype == dns.TypeA {
				a := [4]byte{198, 19, byte(j), byte(i)}
				copy(cs[j].Addr[:], a[:])
			} else {
				cs[j].Addr = [16]byte{0xfd, 0x53, 0, 0x19, 13: byte(j), 14: byte(i >> 8), 15: byte(i)}
			}
			cs[j].Priority, cs[j].Weight = uint8(j), 1
			if !opt.ConstantWorkStatic {
				cs[j].Check = checkOf(i, j, k)
			}
		}
		if err := yield(loader.RecordKey{Wire: string(buf[:l]), Qtype: qtype}, &v); err != nil {
			return err
		}
	}
	return nil
}

// writeLevel pushes a health table with down% of the candidates' entries
// down (levelTable).
func writeLevel(o *loader.Objects, down int) error {
	return pushTable(o, levelTable(o, down))
}

// pushTable pushes a health table of levelTable's.
func pushTable(o *loader.Objects, table []byte) error {
	// Version 0 would mean no table yet, and every set would fail open.
	_, err := o.PushHealth(table, 1, 0, 0)
	return err
}

// expectedAnswers is the reply's answer count: the healthy candidates, or
// all of them when none is (when_all_down: answer_all); a static set's
// every record, whatever the table says; one for failover (the healthy
// candidate ranked first, or the first when none is) and weighted.
func expectedAnswers(k, down int, opt Options) int {
	if opt.ConstantWorkPolicy == config.PolicyFailover || opt.ConstantWorkPolicy == config.PolicyWeighted {
		return 1
	}
	if down == 50 && k > 1 && !opt.ConstantWorkStatic {
		return min(k/2, maxAnswers)
	}
	return min(k, maxAnswers)
}

// maxAnswers is the most answers a reply carries (MAX_ANSWERS).
const maxAnswers = int(bpf.SteadydnsLimitsMAX_ANSWERS)

// checkReply runs one frame and checks that the reply is an answer with
// the expected number of records and valid checksums.
func checkReply(prog *ebpf.Program, frame []byte, answers int) error {
	out := make([]byte, 4096)
	opts := &ebpf.RunOptions{Data: frame, DataOut: out}
	ret, err := prog.Run(opts)
	if err != nil {
		return fmt.Errorf("running the program: %w", err)
	}
	if ret != xdpTX {
		return fmt.Errorf("action %d, want XDP_TX", ret)
	}
	r, err := packet.Parse(opts.DataOut)
	if err != nil {
		return err
	}
	var m dns.Msg
	if err := m.Unpack(r.Payload); err != nil {
		return fmt.Errorf("unpacking the reply: %w", err)
	}
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != answers {
		return fmt.Errorf("reply %s with %d answers, want NOERROR with %d", dns.RcodeToString[m.Rcode], len(m.Answer), answers)
	}
	return nil
}

// fits says why a record table for n sets, and a pool map and an ext
// map for as many if pools and exts are set, would not fit in memory
// here, or "": the kernel reserves every slot of them, and they must
// leave half of the available memory free.
func fits(n int, pools, exts bool) string {
	need := loader.TableBytes(uint32(n))
	if pools {
		need += loader.PoolBytes(loader.PoolsFor(n))
	}
	if exts {
		need += loader.ExtBytes(loader.ExtsFor(n))
	}
	avail, err := memAvailable()
	if err != nil {
		return fmt.Sprintf("%d names: %v", n, err)
	}
	if need > avail/2 {
		return fmt.Sprintf("%d names need a %d MiB record table, and %d MiB are available", n, need>>20, avail>>20)
	}
	return ""
}

func memAvailable() (uint64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("reading /proc/meminfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			var kb uint64
			if _, err := fmt.Sscan(rest, &kb); err != nil {
				return 0, fmt.Errorf("reading MemAvailable: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("reading /proc/meminfo: no MemAvailable")
}
