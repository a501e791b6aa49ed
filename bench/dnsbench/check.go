package dnsbench

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/internal/compliance"
)

// spotQueries is how many names the correctness check asks, A and AAAA each.
const spotQueries = 20

// Spot is the correctness check of one server: queries from the client
// host whose replies were compared with the zone.
type Spot struct {
	Checked, Correct int
	Problem          string // the first wrong reply, if any
}

// exchange sends one query from the client host and reads its reply.
func (r *rig) exchange(m *dns.Msg) (*dns.Msg, error) {
	var conn net.Conn
	err := r.env.Client.Do(func() error {
		var err error
		conn, err = net.Dial("udp", netip.AddrPortFrom(r.env.Edge.V4, 53).String())
		return err
	})
	if err != nil {
		return nil, err
	}
	c := &dns.Conn{Conn: conn}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if err := c.WriteMsg(m); err != nil {
		return nil, err
	}
	return c.ReadMsg()
}

// answers reports whether the server replies to a query for n0.
func (r *rig) answers() (bool, error) {
	q := new(dns.Msg).SetQuestion(nameOf(0), dns.TypeA)
	in, err := r.exchange(q)
	if err != nil {
		return false, err
	}
	return in.Response && in.Id == q.Id, nil
}

// spotCheck asks names spread over the zone and compares each reply with
// the zone. The reflector only echoes, so for it a reply is correct when it
// is the query with QR set. Signed, the queries ask DO=1 and each answer
// must carry an RRSIG of its type.
func (r *rig) spotCheck(reflector, signed bool) Spot {
	var s Spot
	for k := range spotQueries {
		i := k * r.zone.names / spotQueries
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			s.Checked++
			problem := r.checkOne(i, qt, reflector, signed)
			if problem == "" {
				s.Correct++
			} else if s.Problem == "" {
				s.Problem = problem
			}
		}
	}
	return s
}

func (r *rig) checkOne(i int, qtype uint16, reflector, signed bool) string {
	q := new(dns.Msg).SetQuestion(nameOf(i), qtype)
	if signed {
		q.SetEdns0(1232, true)
	}
	in, err := r.exchange(q)
	switch {
	case err != nil:
		return fmt.Sprintf("%s %s: %v", nameOf(i), dns.TypeToString[qtype], err)
	case !in.Response || in.Id != q.Id || in.Rcode != dns.RcodeSuccess || len(in.Question) != 1 || in.Question[0] != q.Question[0]:
		return fmt.Sprintf("%s %s: reply does not match the query: %v", nameOf(i), dns.TypeToString[qtype], in)
	case reflector:
		return ""
	case !in.Authoritative:
		return fmt.Sprintf("%s %s: AA not set", nameOf(i), dns.TypeToString[qtype])
	}
	var got []string
	sigs := 0
	for _, rr := range in.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			got = append(got, rr.A.String())
		case *dns.AAAA:
			got = append(got, rr.AAAA.String())
		case *dns.RRSIG:
			if rr.TypeCovered == qtype {
				sigs++
			}
		}
	}
	if signed && sigs != 1 {
		return fmt.Sprintf("%s %s: %d RRSIGs of the answers, want 1", nameOf(i), dns.TypeToString[qtype], sigs)
	}
	want := expected(i, qtype)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Sprintf("%s %s: answers %v, want %v", nameOf(i), dns.TypeToString[qtype], got, want)
	}
	return ""
}

// compliance puts genreport's cases to the server from the client host, at
// the zone's apex as genreport asks.
func (r *rig) compliance() ([]compliance.Result, error) {
	var res []compliance.Result
	addr := netip.AddrPortFrom(r.env.Edge.V4, 53).String()
	err := r.env.Client.Do(func() error {
		res = compliance.RunAll(addr, origin, 0)
		return nil
	})
	return res, err
}
