package bpf_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// drain reads every sample already in r's ring.
func drain(t *testing.T, r *loader.SampleReader) []loader.Sample {
	t.Helper()
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	var out []loader.Sample
	for {
		s, err := r.Read()
		if errors.Is(err, loader.ErrSamplesEnd) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
}

func readSamples(t *testing.T, o *loader.Objects) *loader.SampleReader {
	t.Helper()
	r, err := o.ReadSamples()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// sampleFixtures is fixtures and a NODATA and a SERVFAIL set.
func sampleFixtures(t *testing.T, o *loader.Objects) {
	fixtures(t, o)
	put(t, o, "nd.example.test.", dns.TypeA, whenDown(bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA, 0))
	put(t, o, "sf.example.test.", dns.TypeAAAA, whenDown(bpf.SteadydnsWhenAllDownWHEN_DOWN_SERVFAIL, 0))
	putSOA(t, o, 0, "example.test.")
}

// TestSampleEveryQuery: sampling one in 1, every reply XDP sends (an
// answer over IPv4, one over IPv6 with OPT, a NODATA and a SERVFAIL) is
// in the ring with its query and reply as they were on the wire, the
// addresses and port, its rcode and answer count and the rate; a query
// passed to the fallback is not.
func TestSampleEveryQuery(t *testing.T) {
	o := loadWith(t, loader.Options{SampleEvery: 1})
	sampleFixtures(t, o)
	r := readSamples(t, o)
	for _, c := range []struct {
		name    string
		v6      bool
		q       []byte
		rcode   uint8
		answers uint16
	}{
		{"answer-v4", false, query("www.example.test.", dns.TypeA, nil), dns.RcodeSuccess, 3},
		{"answer-v6-opt", true, query("www.example.test.", dns.TypeAAAA, withOpt(1232, true)), dns.RcodeSuccess, 2},
		{"nodata", false, query("nd.example.test.", dns.TypeA, nil), dns.RcodeSuccess, 0},
		{"servfail", true, query("sf.example.test.", dns.TypeAAAA, withOpt(1232, false)), dns.RcodeServerFailure, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := frame(c.v6, c.q, packet.Full)
			before := time.Now()
			act, out := run(t, o, packet.Build(f))
			after := time.Now()
			if act != 3 { // XDP_TX
				t.Fatalf("action %d, want XDP_TX", act)
			}
			reply, err := packet.Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			got := drain(t, r)
			if len(got) != 1 {
				t.Fatalf("%d samples, want 1", len(got))
			}
			s := got[0]
			if s.Client != f.Src || s.Server != f.Dst || s.Every != 1 {
				t.Errorf("client %v server %v every %d, want %v %v 1", s.Client, s.Server, s.Every, f.Src, f.Dst)
			}
			if !bytes.Equal(s.Query, c.q) || s.QueryLen != len(c.q) {
				t.Errorf("query (%d bytes)\n%x\nwant\n%x", s.QueryLen, s.Query, c.q)
			}
			if !bytes.Equal(s.Reply, reply.Payload) {
				t.Errorf("reply\n%x\nwant the one sent\n%x", s.Reply, reply.Payload)
			}
			if s.Rcode != c.rcode || s.Answers != c.answers {
				t.Errorf("rcode %d, %d answers; want %d, %d", s.Rcode, s.Answers, c.rcode, c.answers)
			}
			// The boot clock against the wall clock: a second for a
			// clock stepped meanwhile.
			if s.Time.Before(before.Add(-time.Second)) || s.Time.After(after.Add(time.Second)) {
				t.Errorf("time %v, not between %v and %v", s.Time, before, after)
			}
		})
	}
	if act, _ := run(t, o, packet.Build(frame(false, query("nope.example.test.", dns.TypeA, nil), packet.Full))); act != 2 { // XDP_PASS
		t.Fatalf("action %d for a name XDP lacks, want XDP_PASS", act)
	}
	if got := drain(t, r); len(got) != 0 {
		t.Errorf("%d samples of a query passed to the fallback, want none", len(got))
	}
}

// TestSampleRate: at one in 4, exactly a quarter of the replies on a CPU
// are sampled, whatever the queries' IDs and ports; with sampling off,
// none.
func TestSampleRate(t *testing.T) {
	for _, c := range []struct {
		every uint32
		want  int
	}{{4, 100}, {0, 0}} {
		o := loadWith(t, loader.Options{SampleEvery: c.every})
		fixtures(t, o)
		r := readSamples(t, o)
		pinCPU(t, 0)
		rng := rand.New(rand.NewPCG(1, 2))
		ids := map[uint16]bool{}
		for range 400 {
			id := uint16(rng.Uint32())
			f := frame(false, query("www.example.test.", dns.TypeA, func(m *dns.Msg) { m.Id = id }), packet.Full)
			f.Src = netip.AddrPortFrom(client4, uint16(1024+rng.IntN(60000)))
			if act, _ := run(t, o, packet.Build(f)); act != 3 {
				t.Fatalf("action %d, want XDP_TX", act)
			}
			ids[id] = true
		}
		got := drain(t, r)
		if len(got) != c.want {
			t.Errorf("one in %d: %d of 400 sampled, want %d", c.every, len(got), c.want)
		}
		for _, s := range got {
			var m dns.Msg
			if err := m.Unpack(s.Query); err != nil || !ids[m.Id] {
				t.Errorf("sample of a query not sent (id %d): %v", m.Id, err)
			}
		}
	}
}

// TestSampleRingFull: with nobody reading, the ring fills; what it
// refuses is counted, and every reply still goes out as it did.
func TestSampleRingFull(t *testing.T) {
	o := loadWith(t, loader.Options{SampleEvery: 1})
	fixtures(t, o)
	pinCPU(t, 0)
	in := packet.Build(frame(false, query("www.example.test.", dns.TypeA, nil), packet.Full))
	_, first := run(t, o, in)
	sent := 1
	for ; sent < 50000; sent++ {
		act, out := run(t, o, in)
		if act != 3 || !bytes.Equal(out, first) {
			t.Fatalf("reply %d: action %d\n%x\nwant\n%x", sent, act, out, first)
		}
		if sent%1000 == 0 {
			if n, err := o.SampleDrops(); err != nil || n > 0 {
				break
			}
		}
	}
	dropped, err := o.SampleDrops()
	if err != nil || dropped == 0 {
		t.Fatalf("%d dropped after %d replies into a ring nobody reads (%v), want some", dropped, sent, err)
	}
	kept := len(drain(t, readSamples(t, o)))
	if uint64(kept)+dropped != uint64(sent+1) {
		t.Errorf("%d kept and %d dropped of %d sampled", kept, dropped, sent+1)
	}
}
