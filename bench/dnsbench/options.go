package dnsbench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/records"
	"github.com/steadydns/steadydns/loader"
)

// Options configures a run.
type Options struct {
	Names int // names in the generated zone, each with 4 A and 2 AAAA
	Rate  int // queries per second kxdpgun offers the servers that answer in XDP
	// SocketRate is what kxdpgun offers the servers that answer from UDP
	// sockets. Their veth's NAPI thread shares their CPU, and every query
	// beyond what they answer still costs it the receive path up to the
	// full socket: at Rate they would be measured collapsing under ten
	// times their capacity, not at it.
	SocketRate int
	// SaturationRate is a second load run's for the socket servers, more
	// than any of them answers: what each answers when overloaded, on a
	// CPU that also takes the receive path of every query it cannot
	// answer. 0 skips it.
	SaturationRate int
	// TCPRate is what dnsperf offers the socket servers over TCP, from
	// TCPClients connections that pipeline their queries, more than any
	// answers. 0 skips it.
	TCPRate int
	// DoTRate is the same over DNS over TLS, to the servers that speak
	// it. 0 skips it.
	DoTRate     int
	LatencyRate int           // queries per second dnsperf offers for the latency runs
	Duration    time.Duration // one load run; kxdpgun takes whole seconds
	Runs        int           // runs per measurement; reports give the median and the spread
	// RRLRounds is how many rounds the rate-limiting cells take turns
	// in, within one generator run, and RRLSlice how long each cell has
	// the link in a round. The rounds go in pairs, the second in the
	// reverse order of the first, and each pair, with loads of its own
	// of every cell's program, gives one ratio per cell: RRL's cost is a
	// few percent, so it is read from many short paired slices and many
	// loads, not from a few long runs of one load each (see measureRRL).
	RRLRounds int
	RRLSlice  time.Duration
	Servers   []string // servers to measure, from ServerNames, in this order
	// The constant-work fields keep results.json's keys, which match the
	// --work-* flags that set them.
	ConstantWorkSizes []int `json:"WorkNames"` // zone sizes of the constant-work runs; none skips them
	ConstantWorkK     []int `json:"WorkK"`     // candidates per set in the constant-work runs, each 1 … loader.MaxPoolCandidates
	// ConstantWorkStatic makes the constant-work sets a zone file's: flagged
	// RR_STATIC, with no health check, so that every query takes the
	// static path and answers all K at every share down.
	ConstantWorkStatic bool `json:"WorkStatic"`
	// ConstantWorkPolicy is the constant-work sets' policy, by its config name.
	// Failover sets rank their candidates in order (priority j) and
	// weighted ones weigh them alike, so both answer one.
	ConstantWorkPolicy config.Policy `json:"WorkPolicy"`
	Iterations         int           // BPF_PROG_RUN calls per constant-work run
	PushRounds         int           // aggregator pushes per cell per run; 0 skips the aggregator
	Binary             string        // the steadydns binary, run as `BINARY serve --config FILE`; empty finds one (stats.ServerBinary)
	Prefix             string        // testenv prefix; short, since NAPI thread names hold 15 bytes
	GenCPU             int           // the CPU of the load generators
	ServerCPU          int           // the CPU of the servers and of the server veth's NAPI thread
	Settle             time.Duration // how long to wait for other processes to leave the CPUs quiet before each measurement
	Log                io.Writer     `json:"-"` // progress; nil is quiet

	// CompareObject is the XDP object of another build of steadydns
	// (its bpf/steadydns_bpfel.o), measured against this build's program
	// in the constant-work runs: the two take turns on one link under
	// one load, in RRLRounds rounds of RRLSlice each, like the
	// rate-limiting cells (measureCompare). Empty: no comparison.
	CompareObject string
	// CompareDown is the share of candidates down, 0, 50 or 100, while
	// the two builds are compared.
	CompareDown int
}

// Defaults are the options of `steadydns-bench`: the full comparison.
func Defaults() Options {
	return Options{
		Names:              1000,
		Rate:               2_000_000,
		SocketRate:         200_000,
		SaturationRate:     400_000,
		TCPRate:            400_000,
		DoTRate:            400_000,
		LatencyRate:        20_000,
		Duration:           5 * time.Second,
		Runs:               3,
		RRLRounds:          40,
		RRLSlice:           200 * time.Millisecond,
		Servers:            ServerNames(),
		ConstantWorkSizes:  []int{1000, 1_000_000},
		ConstantWorkK:      []int{1, loader.MaxCandidates},
		ConstantWorkPolicy: config.PolicyMultivalue,
		Iterations:         100_000,
		PushRounds:         300,
		Prefix:             "sdb",
		GenCPU:             0,
		ServerCPU:          1,
		Settle:             2 * time.Minute,
	}
}

// Quick are the options of `steadydns-bench --quick` and of the tests: the
// ceiling and steadydns only, a few seconds each, to show the harness works.
func Quick() Options {
	o := Defaults()
	o.Duration = 2 * time.Second
	o.Runs = 1
	o.RRLRounds = 2
	o.LatencyRate = 5_000
	o.Servers = []string{"reflector", "steadydns"}
	o.ConstantWorkSizes = []int{1000}
	o.Iterations = 5_000
	o.PushRounds = 10
	o.Settle = 0 // a test does not wait for other tests
	return o
}

// check fills what can be derived and rejects what cannot run.
func (o *Options) check() error {
	if o.Names < 1 || o.Rate < 1 || o.SocketRate < 1 || o.LatencyRate < 1 || o.Runs < 1 || o.Iterations < 1 {
		return errors.New("names, rate, socket rate, latency rate, runs and iterations must be positive")
	}
	if o.RRLRounds < 2 || o.RRLRounds%2 != 0 {
		return fmt.Errorf("rrl rounds %d: want an even number, at least 2 (the rounds go in pairs)", o.RRLRounds)
	}
	if o.RRLSlice < 10*time.Millisecond {
		return fmt.Errorf("rrl slice %v: want at least 10ms, so that a slice holds thousands of queries", o.RRLSlice)
	}
	if o.SaturationRate < 0 || o.TCPRate < 0 || o.DoTRate < 0 {
		return fmt.Errorf("saturation rate %d, tcp rate %d, dot rate %d: must not be negative", o.SaturationRate, o.TCPRate, o.DoTRate)
	}
	if o.PushRounds < 0 {
		return fmt.Errorf("push rounds %d: must not be negative", o.PushRounds)
	}
	if o.Duration < time.Second {
		return fmt.Errorf("duration %v: kxdpgun runs for whole seconds, at least 1s", o.Duration)
	}
	for _, s := range o.Servers {
		if !slices.Contains(ServerNames(), s) {
			return fmt.Errorf("unknown server %q: want some of %v", s, ServerNames())
		}
	}
	for _, n := range o.ConstantWorkSizes {
		if n < 1 {
			return fmt.Errorf("constant-work size %d: must be positive", n)
		}
	}
	if len(o.ConstantWorkSizes) > 0 && len(o.ConstantWorkK) == 0 {
		return errors.New("constant-work K: none given, so the constant-work sizes would measure nothing")
	}
	// At 50% down a set holds K/2 whole pairs of the table's entries
	// (levelTable), one of each up: an odd K > 1 would have a count up
	// that varies from set to set, where the reply check wants one count.
	// A set answering one, or a static set, answers the same at any K.
	oneAnswer := o.ConstantWorkPolicy == config.PolicyFailover || o.ConstantWorkPolicy == config.PolicyWeighted
	for _, k := range o.ConstantWorkK {
		if k < 1 || k > loader.MaxPoolCandidates {
			return fmt.Errorf("constant-work K %d: want 1 to %d, the candidates a set holds", k, loader.MaxPoolCandidates)
		}
		if k > loader.MaxCandidates && o.ConstantWorkStatic {
			return fmt.Errorf("constant-work K %d: a zone file's set of more than %d stays with the fallback", k, loader.MaxCandidates)
		}
		if k > 1 && k%2 == 1 && !o.ConstantWorkStatic && !oneAnswer {
			return fmt.Errorf("constant-work K %d: want 1 or an even K for %s sets, whose count up at 50%% down must be the same in every set", k, o.ConstantWorkPolicy)
		}
	}
	if _, ok := records.DataPlanePolicy(o.ConstantWorkPolicy); !ok {
		return fmt.Errorf("constant-work policy %q: not a policy", o.ConstantWorkPolicy)
	}
	if o.ConstantWorkStatic && o.ConstantWorkPolicy != config.PolicyMultivalue {
		return fmt.Errorf("constant-work policy %q: a zone file's sets are multivalue", o.ConstantWorkPolicy)
	}
	// The report groups cells by size and K: each K once, ascending.
	o.ConstantWorkK = slices.Compact(slices.Sorted(slices.Values(o.ConstantWorkK)))
	if !slices.Contains(healthLevels, o.CompareDown) {
		return fmt.Errorf("compare down %d%%: want one of %v", o.CompareDown, healthLevels)
	}
	if o.CompareObject != "" {
		if len(o.ConstantWorkSizes) == 0 {
			return errors.New("compare object: the comparison runs with the constant work, which no size turns on")
		}
		if _, err := os.Stat(o.CompareObject); err != nil {
			return fmt.Errorf("compare object: %w", err)
		}
	}
	if n := runtime.NumCPU(); o.GenCPU == o.ServerCPU || o.GenCPU >= n || o.ServerCPU >= n {
		return fmt.Errorf("cpus %d and %d: want two different CPUs of the %d here", o.GenCPU, o.ServerCPU, n)
	}
	// Only the steadydns servers run the binary; a run of the peers, the
	// constant work or the aggregator alone needs none.
	if slices.ContainsFunc(o.Servers, func(s string) bool { return strings.HasPrefix(s, "steadydns") }) {
		if o.Binary == "" {
			bin, err := stats.ServerBinary()
			if err != nil {
				return fmt.Errorf("finding the steadydns binary: %w", err)
			}
			o.Binary = bin
		} else if _, err := exec.LookPath(o.Binary); err != nil {
			return fmt.Errorf("checking the steadydns binary: %w", err)
		}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return nil
}

// seconds is the duration as kxdpgun and dnsperf take it.
func (o *Options) seconds() int { return int(o.Duration / time.Second) }
