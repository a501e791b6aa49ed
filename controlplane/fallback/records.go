package fallback

import (
	"net/netip"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/zone"
)

// Records answers the health-checked A, AAAA and CNAME sets with the same
// selection rules as the XDP program.
type Records interface {
	// Select returns the answer for the dynamic set name (lowercase fqdn)
	// and qtype. ok is false if there is no such set. into is room for
	// the addresses: sel.Addrs is appended to into[:0], so that a loop
	// that lends the same room to every query allocates nothing for them.
	Select(name string, qtype uint16, q Query, into []netip.Addr) (sel Selection, ok bool)
}

// Query is what selection may depend on.
type Query struct {
	Client netip.Addr
	ECS    *dns.EDNS0_SUBNET // nil if the query had none
}

// Action is what the reply to a dynamic set does: enum action of the data
// plane, whose replies the fallback's equal.
type Action = bpf.SteadydnsAction

// Actions of a Selection.
const (
	Answer   = bpf.SteadydnsActionACT_ANSWER   // the addresses
	NoData   = bpf.SteadydnsActionACT_NODATA   // NOERROR with the zone's SOA, as when_all_down: nodata
	ServFail = bpf.SteadydnsActionACT_SERVFAIL // SERVFAIL, as when_all_down: servfail
)

// Selection is the answer chosen for one query.
type Selection struct {
	Action Action
	TTL    uint32
	Addrs  []netip.Addr // in answer order; at most maxAnswers
	Target string       // a CNAME set's answer: the target name, lowercase fqdn
	// ECSScope is echoed as the SCOPE PREFIX-LENGTH when the query had ECS
	// (RFC 7871 §7.2.1); 0 sends no ECS option, as XDP does.
	ECSScope uint8
}

// maxAnswers is the most addresses a selection answers, whatever the
// set's size.
const maxAnswers = int(bpf.SteadydnsLimitsMAX_ANSWERS)

// View is what the server answers from; a reload swaps it whole.
type View struct {
	Zones   *zone.Zones
	Records Records
}
