package dnsbench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/internal/compliance"
)

// ServerResult is what one server measured.
type ServerResult struct {
	Name, About string
	Offered     stats.Summary // queries per second kxdpgun sent
	Answered    stats.Summary // replies per second kxdpgun received
	Ratio       float64       // Answered.Median over the reflector's; 0 without a reflector
	KernelNs    stats.Summary // ns per packet in the veth's XDP program under load; N=0 without one
	// Saturated is what a socket server answered per second offered
	// Options.SaturationRate, more than it can; N=0 for the others.
	Saturated stats.Summary
	// TCP is what a socket server answered per second over TCP, offered
	// Options.TCPRate, and TCPLost the queries that had no reply, all
	// runs; N=0 for the others.
	TCP     stats.Summary
	TCPLost int
	// DoT and DoTLost are the same over DNS over TLS, offered
	// Options.DoTRate; N=0 for a server that does not speak it.
	DoT     stats.Summary
	DoTLost int
	// V6Answered and V6Ns are an XDP server's replies per second and ns
	// per packet in XDP with the same load sent to the edge's IPv6
	// address; N=0 for the others.
	V6Answered, V6Ns stats.Summary
	// DO0Ns and DO0Answered are the paired run's (server.pairDO0): the
	// same queries asking DO=0 with EDNS; N=0 unpaired. DO1OverDO0 is
	// KernelNs over DO0Ns round by round.
	DO0Ns, DO0Answered, DO1OverDO0 stats.Summary
	P50, P99                       stats.Summary     // latency in µs at LatencyRate, dnsperf
	Lost                           int               // dnsperf queries without a reply, all runs
	Rcodes                         map[string]uint64 // kxdpgun's replies by rcode, all runs
	Spot                           Spot
	// Compliance is genreport's cases put to the server at the zone's
	// apex; none for the reflector, which only echoes.
	Compliance []compliance.Result
	OtherLoad  float64 // the largest share of the CPUs other processes took during a run that was kept
}

// serverRuns gathers one server's samples over the rounds of a run.
type serverRuns struct {
	res                            ServerResult
	p50, p99, sent, answered, ns   []float64
	saturated, tcp, dot, v6, v6Ns  []float64
	do0Ns, do0Answered, do1OverDO0 []float64
}

func newServerRuns(s server) *serverRuns {
	return &serverRuns{res: ServerResult{Name: s.name, About: s.about, Rcodes: map[string]uint64{}}}
}

// result summarizes the rounds.
func (m *serverRuns) result() ServerResult {
	res := m.res
	res.P50, res.P99 = stats.Summarize(m.p50), stats.Summarize(m.p99)
	res.Offered, res.Answered, res.KernelNs = stats.Summarize(m.sent), stats.Summarize(m.answered), stats.Summarize(m.ns)
	res.DO0Ns, res.DO0Answered, res.DO1OverDO0 = stats.Summarize(m.do0Ns), stats.Summarize(m.do0Answered), stats.Summarize(m.do1OverDO0)
	res.Saturated, res.TCP, res.DoT = stats.Summarize(m.saturated), stats.Summarize(m.tcp), stats.Summarize(m.dot)
	res.V6Answered, res.V6Ns = stats.Summarize(m.v6), stats.Summarize(m.v6Ns)
	return res
}

// measure brings a server up for one round, runs the correctness check
// and the compliance cases in the first, one latency run and one load run
// in each, and takes it down. The servers take turns round by round
// (Run), so a change in the host's speed over a minute or two falls on
// all of them, not on whichever server ran then.
func (r *rig) measure(ctx context.Context, s server, m *serverRuns, round int) (err error) {
	fmt.Fprintf(r.o.Log, "bench: %s, round %d of %d\n", s.name, round+1, r.o.Runs)
	res := &m.res
	// Sockets on the client get XDP_TX replies only with a program on its veth.
	if err := r.clientPass(true); err != nil {
		return err
	}
	stop, err := s.start(ctx, r)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop(), r.edgeClear()) }()
	if err := r.pinNAPI(); err != nil {
		return err
	}
	if round == 0 {
		res.Spot = r.spotCheck(s.name == "reflector", s.signed)
		if s.name != "reflector" {
			if res.Compliance, err = r.compliance(); err != nil {
				return err
			}
		}
	}
	var p perfRun
	other, err := r.quietly(func() (err error) { p, err = r.dnsperf(ctx, s.signed); return err })
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	m.p50, m.p99 = append(m.p50, p.p50), append(m.p99, p.p99)
	res.Lost += p.lost
	res.OtherLoad = max(res.OtherLoad, other)
	stream := func(mode string, port, rate int, rates *[]float64, lost *int) error {
		var tr streamRun
		other, err := r.quietly(func() (err error) { tr, err = r.dnsperfStream(ctx, mode, port, rate); return err })
		if err != nil {
			return fmt.Errorf("%s over %s: %w", s.name, mode, err)
		}
		*rates, *lost = append(*rates, tr.rate), *lost+tr.lost
		res.OtherLoad = max(res.OtherLoad, other)
		return nil
	}
	if s.sockets && !s.signed && r.o.TCPRate > 0 {
		if err := stream("tcp", 53, r.o.TCPRate, &m.tcp, &res.TCPLost); err != nil {
			return err
		}
	}
	if s.dot && r.o.DoTRate > 0 {
		if err := stream("dot", dotPort, r.o.DoTRate, &m.dot, &res.DoTLost); err != nil {
			return err
		}
	}

	// kxdpgun brings its own program for the client veth, and leaves it.
	if err := r.clientPass(false); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.clientPass(false)) }()
	prog, err := r.edgeProgram()
	if err != nil {
		return err
	}
	if prog != nil {
		defer prog.Close()
	}
	rate := r.o.Rate
	if s.sockets {
		rate = r.o.SocketRate
	}
	queries := r.zone.queries
	if s.signed {
		queries = r.zone.signed
	}
	var g gunRun
	var cost float64
	do := func(rate int) error {
		other, err := r.quietly(func() (err error) { g, cost, err = r.loadRun(ctx, prog, r.env.Edge.V4, queries, rate); return err })
		res.OtherLoad = max(res.OtherLoad, other)
		return err
	}
	do1 := func() error { return do(rate) }
	if s.pairDO0 && prog != nil {
		if err := r.pairedDO0(ctx, prog, m, round, rate, do1); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	} else if err := do1(); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	if prog != nil {
		m.ns = append(m.ns, cost)
	}
	if s.pairDO0 && prog != nil {
		m.do1OverDO0 = append(m.do1OverDO0, cost/m.do0Ns[len(m.do0Ns)-1])
	}
	m.sent, m.answered = append(m.sent, g.sent), append(m.answered, g.replies)
	for k, v := range g.rcodes {
		res.Rcodes[k] += v
	}
	if prog != nil && !s.signed {
		other, err := r.quietly(func() (err error) { g, cost, err = r.loadRun(ctx, prog, r.env.Edge.V6, queries, rate); return err })
		if err != nil {
			return fmt.Errorf("%s over IPv6: %w", s.name, err)
		}
		res.OtherLoad = max(res.OtherLoad, other)
		m.v6, m.v6Ns = append(m.v6, g.replies), append(m.v6Ns, cost)
		for k, v := range g.rcodes {
			res.Rcodes[k] += v
		}
	}
	if s.sockets && r.o.SaturationRate > 0 {
		if err := do(r.o.SaturationRate); err != nil {
			return fmt.Errorf("%s at saturation: %w", s.name, err)
		}
		m.saturated = append(m.saturated, g.replies)
		for k, v := range g.rcodes {
			res.Rcodes[k] += v
		}
	}
	return nil
}

// pairedDO0 runs do1, the round's DO=1 load, and a load of the same
// queries asking DO=0 with EDNS on the same program, DO=0 first in even
// rounds and DO=1 first in odd ones, so a drift in the host's speed
// falls on both alike; it records the DO=0 run.
func (r *rig) pairedDO0(ctx context.Context, prog *ebpf.Program, m *serverRuns, round, rate int, do1 func() error) error {
	var g gunRun
	var cost float64
	do0 := func() error {
		other, err := r.quietly(func() (err error) { g, cost, err = r.loadRun(ctx, prog, r.env.Edge.V4, r.zone.edns, rate); return err })
		m.res.OtherLoad = max(m.res.OtherLoad, other)
		return err
	}
	first, second := do0, do1
	if round%2 == 1 {
		first, second = do1, do0
	}
	if err := first(); err != nil {
		return err
	}
	if err := second(); err != nil {
		return err
	}
	m.do0Ns, m.do0Answered = append(m.do0Ns, cost), append(m.do0Answered, g.replies)
	for k, v := range g.rcodes {
		m.res.Rcodes[k] += v
	}
	return nil
}

// loadRun runs kxdpgun once at rate to target and reads the in-kernel ns
// per packet of prog, when there is one, over the run.
func (r *rig) loadRun(ctx context.Context, prog *ebpf.Program, target netip.Addr, queries string, rate int) (gunRun, float64, error) {
	var before, after *ebpf.ProgramStats
	var err error
	if prog != nil {
		if before, err = prog.Stats(); err != nil {
			return gunRun{}, 0, fmt.Errorf("reading program stats: %w", err)
		}
	}
	g, err := r.kxdpgun(ctx, target, queries, rate, r.o.seconds())
	if err != nil || prog == nil {
		return g, 0, err
	}
	if after, err = prog.Stats(); err != nil {
		return g, 0, fmt.Errorf("reading program stats: %w", err)
	}
	return g, nsPerRun(before, after), nil
}

// nsPerRun is the mean in-kernel run time per packet between two readings.
func nsPerRun(before, after *ebpf.ProgramStats) float64 {
	n := after.RunCount - before.RunCount
	if n == 0 {
		return 0
	}
	return float64(after.Runtime-before.Runtime) / float64(n) // Runtime is in ns
}

// clientPass puts the XDP_PASS program on the client veth, or takes away
// whatever program is there.
func (r *rig) clientPass(on bool) error {
	if err := r.env.DetachPass(); err != nil {
		return err
	}
	if on {
		return r.env.AttachPass(r.pass.XdpPass)
	}
	return nil
}

// edgeProgram is the XDP program on the server's veth, whoever attached
// it, or nil.
func (r *rig) edgeProgram() (*ebpf.Program, error) {
	var id uint32
	err := r.env.Edge.Do(func() error {
		l, err := netlink.LinkByName(r.env.Edge.Link)
		if err != nil {
			return err
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			id = x.ProgId
		}
		return nil
	})
	if err != nil || id == 0 {
		return nil, err
	}
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return nil, fmt.Errorf("opening xdp program %d: %w", id, err)
	}
	return p, nil
}

// edgeClear wants the server's veth without an XDP program once a server
// stopped, so that the next server is not measured behind it.
func (r *rig) edgeClear() error {
	p, err := r.edgeProgram()
	if p != nil {
		p.Close()
		return fmt.Errorf("an xdp program is still attached to %s", r.env.Edge.Link)
	}
	return err
}
