package zone

import (
	"bytes"
	"slices"
	"sort"
	"strings"

	"github.com/miekg/dns"
)

// The zone is signed offline: Lookup serves the RRSIG, NSEC and NSEC3
// records of the zone file and never signs. Denial is best effort: for each
// name to deny it returns the NSEC or NSEC3 record that matches the name or
// covers it, found by canonical or hash order, with its signatures. The
// callers pick the names as RFC 4035 §3.1.3 and RFC 5155 §7.2 list them.

// proof returns the denial records for names, without duplicates.
func (z *Zone) proof(names ...string) []dns.RR {
	var out []dns.RR
	for _, name := range names {
		var n *node
		var t uint16
		switch {
		case len(z.nsec) > 0:
			n, t = z.nsecFor(name), dns.TypeNSEC
		case len(z.nsec3) > 0:
			n, t = z.nsec3For(name), dns.TypeNSEC3
		default:
			return nil
		}
		rr := n.sets[t][0]
		if slices.Contains(out, rr) {
			continue
		}
		out = append(out, rr)
		out = append(out, n.sigs(t)...)
	}
	return out
}

// nxProof denies a name whose closest encloser is ce and whose next closer
// name (ce plus one label) is closer: no closer name exists and no
// wildcard at ce (RFC 4035 §3.1.3.2, RFC 5155 §7.2.2). The same records
// prove NODATA for a name a wildcard synthesises (RFC 4035 §3.1.3.4,
// RFC 5155 §7.2.5).
func (z *Zone) nxProof(ce, closer string) []dns.RR {
	names := []string{closer, "*." + ce}
	if len(z.nsec3) > 0 {
		names = append(names, ce)
	}
	return z.proof(names...)
}

// nsecFor returns the NSEC node that owns name or, when none does, the one
// before it in canonical order, whose NSEC covers name.
func (z *Zone) nsecFor(name string) *node {
	i := sort.Search(len(z.nsec), func(i int) bool { return canonicalCompare(z.nsec[i].name, name) > 0 })
	if i == 0 {
		i = len(z.nsec) // before the first owner: the last NSEC wraps round to cover it
	}
	return z.nsec[i-1]
}

// nsec3For is nsecFor for the NSEC3 chain, in the order of the hashes.
func (z *Zone) nsec3For(name string) *node {
	p := z.nsec3[0].sets[dns.TypeNSEC3][0].(*dns.NSEC3)
	h := dns.HashName(name, p.Hash, p.Iterations, p.Salt)
	i := sort.Search(len(z.nsec3), func(i int) bool { return hashLabel(z.nsec3[i]) > h })
	if i == 0 {
		i = len(z.nsec3)
	}
	return z.nsec3[i-1]
}

// hashLabel returns the first label of an NSEC3 owner in upper case, as
// dns.HashName spells hashes; base32hex keeps the order of the hashes.
func hashLabel(n *node) string {
	first, _, _ := strings.Cut(n.name, ".")
	return strings.ToUpper(first)
}

// canonicalCompare orders names as RFC 4034 §6.1 does: by their lowercase
// wire-format labels, compared from the root down.
func canonicalCompare(a, b string) int {
	la, lb := wireLabels(a), wireLabels(b)
	for i, j := len(la)-1, len(lb)-1; i >= 0 && j >= 0; i, j = i-1, j-1 {
		if c := bytes.Compare(la[i], lb[j]); c != 0 {
			return c
		}
	}
	return len(la) - len(lb)
}

func wireLabels(name string) [][]byte {
	buf := make([]byte, 256)
	off, err := dns.PackDomainName(dns.Fqdn(name), buf, 0, nil, false)
	if err != nil {
		return nil // not a valid name; zone names and queries always are
	}
	// Length bytes are at most 63, below 'A', so the whole buffer can be
	// lowercased, escaped letters included.
	for i, c := range buf[:off] {
		if 'A' <= c && c <= 'Z' {
			buf[i] = c + 'a' - 'A'
		}
	}
	var labels [][]byte
	for i := 0; i < off && buf[i] != 0; i += int(buf[i]) + 1 {
		labels = append(labels, buf[i+1:i+1+int(buf[i])])
	}
	return labels
}
