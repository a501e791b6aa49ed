package fallback

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// verdicts is a Limiter that returns one verdict and records each reply.
type verdicts struct {
	v       Verdict
	replies []Reply
}

func (l *verdicts) Limit(_ netip.Addr, r Reply) Verdict {
	l.replies = append(l.replies, r)
	return l.v
}

// TestRRL: a slipped UDP reply is the header with TC and the rcode and
// the question, without OPT though the query had one; a dropped one is not sent; the limiter is told the
// question, the rcode and, for NXDOMAIN, the zone; TCP is never limited.
func TestRRL(t *testing.T) {
	v, _ := exampleView(t)
	l := &verdicts{v: Slip}
	var outcomes []string
	s := New(Options{RRL: l, Observe: func(o string, _ time.Duration) { outcomes = append(outcomes, o) }}, v)
	client := netip.MustParseAddrPort("198.18.0.1:40000")
	q := withEDNS(query("static.example.test.", dns.TypeA), 1232, false)
	b, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	var r dns.Msg
	if err := r.Unpack(s.AnswerDatagram(b, client)); err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || len(r.Answer)+len(r.Ns)+len(r.Extra) != 0 || len(r.Question) != 1 || r.Rcode != dns.RcodeSuccess {
		t.Errorf("slipped reply:\n%v\nwant TC and the question alone: no records, no OPT", &r)
	}
	nx, err := query("nope.example.test.", dns.TypeA).Pack()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Unpack(s.AnswerDatagram(nx, client)); err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || r.Rcode != dns.RcodeNameError {
		t.Errorf("slipped NXDOMAIN:\n%v\nwant TC with the rcode kept", &r)
	}
	want := []Reply{{Qname: "static.example.test.", Qtype: dns.TypeA}, {Qname: "nope.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Zone: "example.test."}}
	if len(l.replies) != 2 || l.replies[0] != want[0] || l.replies[1] != want[1] {
		t.Errorf("the limiter was told %+v, want %+v", l.replies, want)
	}

	l.v = Drop
	if got := s.AnswerDatagram(b, client); got != nil {
		t.Errorf("dropped reply sent: %x", got)
	}
	if len(outcomes) != 3 || outcomes[0] != OutcomeRRLSlipped || outcomes[2] != OutcomeRRLDropped {
		t.Errorf("outcomes %v, want rrl_slipped twice then rrl_dropped", outcomes)
	}

	w := &tcpRecorder{}
	s.serveDNS(w, query("static.example.test.", dns.TypeA))
	if w.msg == nil || w.msg.Truncated || len(w.msg.Answer) == 0 {
		t.Errorf("tcp reply %v, want the answer, never limited", w.msg)
	}
}
