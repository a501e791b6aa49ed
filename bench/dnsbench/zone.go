package dnsbench

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/miekg/dns"
)

// origin is the generated zone. Its names are n0 … n(N-1).
const origin = "bench.test."

// Per name: 4 A and 2 AAAA, so a reply carries several answers, as a
// health-checked multivalue record does.
const (
	perNameA    = 4
	perNameAAAA = 2
)

// zone is a generated zone and its query mix, written to a directory.
type zone struct {
	names   int
	file    string // the RFC 1035 zone file
	queries string // one `name TYPE` line per query: both kxdpgun's and dnsperf's format
	signed  string // the same queries with kxdpgun's flag D: EDNS with DO=1
	edns    string // the same queries with kxdpgun's flag E: EDNS, DO=0
}

func nameOf(i int) string { return fmt.Sprintf("n%d.%s", i, origin) }

// addrA is the j-th A address of name i, in 198.19.0.0/16: the benchmark
// range, away from the test hosts' 198.18.0.0/24 and 198.18.1.0/24.
func addrA(i, j int) netip.Addr {
	v := uint16(i*perNameA + j)
	return netip.AddrFrom4([4]byte{198, 19, byte(v >> 8), byte(v)})
}

// addrAAAA is the j-th AAAA address of name i, in fd53:b::/32.
func addrAAAA(i, j int) netip.Addr {
	var b [16]byte
	b[0], b[1], b[3] = 0xfd, 0x53, 0x0b
	b[8], b[9], b[10], b[11] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
	b[15] = byte(j + 1)
	return netip.AddrFrom16(b)
}

// writeZone writes a zone of n names and a query mix that asks A and AAAA
// for every name once, in an order shuffled with a fixed seed so every run
// and every server sees the same sequence.
func writeZone(dir string, n int) (*zone, error) {
	z := &zone{names: n, file: filepath.Join(dir, "bench.test.zone"), queries: filepath.Join(dir, "queries.txt"), signed: filepath.Join(dir, "queries-do.txt"), edns: filepath.Join(dir, "queries-edns.txt")}
	if err := writeZoneFile(z.file, n, nil); err != nil {
		return nil, err
	}
	qs := make([]int, 2*n) // 2i asks A for name i, 2i+1 AAAA
	for i := range qs {
		qs[i] = i
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(qs), func(a, b int) { qs[a], qs[b] = qs[b], qs[a] })
	for file, flag := range map[string]string{z.queries: "", z.signed: " D", z.edns: " E"} {
		err := writeLines(file, func(w *bufio.Writer) {
			for _, q := range qs {
				t := "A"
				if q%2 == 1 {
					t = "AAAA"
				}
				fmt.Fprintf(w, "%s %s%s\n", nameOf(q/2), t, flag)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return z, nil
}

// writeZoneFile writes the zone file of n names. A name for which moved
// is true has the A set of addrMoved instead: the same zone after a change.
func writeZoneFile(path string, n int, moved func(i int) bool) error {
	return writeLines(path, func(w *bufio.Writer) {
		fmt.Fprintf(w, "$ORIGIN %s\n$TTL 300\n", origin)
		fmt.Fprintf(w, "@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ IN NS ns1\nns1 IN A 198.18.0.2\nns1 IN AAAA fd53::2\n")
		for i := range n {
			a := addrA
			if moved != nil && moved(i) {
				a = addrMoved
			}
			for j := range perNameA {
				fmt.Fprintf(w, "n%d IN A %s\n", i, a(i, j))
			}
			for j := range perNameAAAA {
				fmt.Fprintf(w, "n%d IN AAAA %s\n", i, addrAAAA(i, j))
			}
		}
	})
}

// addrMoved is the j-th A address of name i once its set has changed, in
// 198.18.128.0/17: apart from addrA's and the test hosts' addresses.
func addrMoved(i, j int) netip.Addr {
	v := uint16(i*perNameA+j) & 0x7fff
	return netip.AddrFrom4([4]byte{198, 18, byte(0x80 | v>>8), byte(v)})
}

// expected is the answer set name i has for qtype, as strings of addresses.
func expected(i int, qtype uint16) []string {
	var out []string
	if qtype == dns.TypeA {
		for j := range perNameA {
			out = append(out, addrA(i, j).String())
		}
	} else {
		for j := range perNameAAAA {
			out = append(out, addrAAAA(i, j).String())
		}
	}
	return out
}

func writeLines(path string, fill func(*bufio.Writer)) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	w := bufio.NewWriter(f)
	fill(w)
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
