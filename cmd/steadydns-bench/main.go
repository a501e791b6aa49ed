// Command steadydns-bench measures steadydns against a bare XDP reflector
// and against Knot DNS, NSD and gdnsd. It is its own binary so that the
// server every edge host runs does not carry the harness and its charting
// libraries.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/steadydns/steadydns/bench/dnsbench"
	"github.com/steadydns/steadydns/bench/fleetbench"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/loader"
)

const usage = `usage: steadydns-bench [flags]
       steadydns-bench fleet [flags]   (the fleet over NATS; fleet -h)
       steadydns-bench load [flags]    (loading and reloading a large zone; load -h)

Builds a client and a server host in network namespaces, runs every server in
turn on the same zone and load, then the constant-work and aggregator
measurements, and writes the report. Needs root; installs missing tools from
Debian. The steadydns servers run the steadydns binary given by --binary.

flags:
`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "steadydns-bench: %v\n", err)
		os.Exit(1)
	}
}

// run parses the flags, runs the harness and writes its results. The flag
// set exits by itself: 0 after -h, 2 after a bad flag with the usage.
func run(args []string) error {
	if len(args) > 0 && args[0] == "fleet" {
		return runFleet(args[1:])
	}
	if len(args) > 0 && args[0] == "load" {
		return runLoad(args[1:])
	}
	fs := flag.NewFlagSet("steadydns-bench", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	quick := fs.Bool("quick", false, "the reflector and steadydns only, a few seconds each (what `make test` runs)")
	d := dnsbench.Defaults()
	names := fs.Int("names", d.Names, "names in the generated zone")
	rate := fs.Int("rate", d.Rate, "queries per second kxdpgun offers the servers that answer in XDP")
	socketRate := fs.Int("socket-rate", d.SocketRate, "queries per second kxdpgun offers the servers that answer from UDP sockets")
	saturation := fs.Int("saturation-rate", d.SaturationRate, "queries per second of a second load run for the socket servers, more than any answers; 0 skips it")
	tcpRate := fs.Int("tcp-rate", d.TCPRate, "queries per second dnsperf offers the socket servers over TCP, more than any answers; 0 skips it")
	dotRate := fs.Int("dot-rate", d.DoTRate, "queries per second dnsperf offers the servers that speak DNS over TLS, more than any answers; 0 skips it")
	latency := fs.Int("latency-rate", d.LatencyRate, "queries per second dnsperf offers for latency")
	duration := fs.Duration("duration", d.Duration, "one load run (whole seconds)")
	runs := fs.Int("runs", d.Runs, "runs per measurement: the report gives the median and the range")
	rrlRounds := fs.Int("rrl-rounds", d.RRLRounds, "rounds of the rate-limiting cells, an even number: each pair gives one on/off ratio")
	rrlSlice := fs.Duration("rrl-slice", d.RRLSlice, "how long each rate-limiting cell has the link in a round")
	out := fs.String("out", "bench/results", "directory for results.md, results.json and the charts")
	servers := fs.String("servers", strings.Join(d.Servers, ","), "servers to measure, comma-separated, of "+strings.Join(dnsbench.ServerNames(), ","))
	settle := fs.Duration("settle", d.Settle, "wait up to this long before each measurement for other processes to leave the CPUs quiet")
	prefix := fs.String("prefix", d.Prefix, "name prefix of the test hosts' namespaces and links (at most 5 bytes)")
	pushRounds := fs.Int("push-rounds", d.PushRounds, "aggregator pushes per cell per run; 0 skips the aggregator")
	work := fs.String("work-names", "1000,1000000", "zone sizes of the constant-work runs, comma-separated; empty skips them")
	workK := fs.String("work-k", join(d.ConstantWorkK), fmt.Sprintf("candidates per set in the constant-work runs, comma-separated, each 1 to %d", loader.MaxPoolCandidates))
	workStatic := fs.Bool("work-static", false, "make the constant-work sets a zone file's (static, no health check) instead of health-checked")
	workPolicy := fs.String("work-policy", string(d.ConstantWorkPolicy), "the constant-work sets' policy: multivalue, failover, weighted or round_robin")
	compare := fs.String("compare-object", "", "the XDP object of another build (its bpf/steadydns_bpfel.o), measured against this build's in the constant-work runs")
	compareDown := fs.Int("compare-down", d.CompareDown, "percent of candidates down while the builds are compared: 0, 50 or 100")
	binary := fs.String("binary", "", "the steadydns binary the steadydns servers run (default: steadydns beside this binary, else on PATH)")
	fs.Parse(args) // ExitOnError: returns only on success
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every setting is a flag", fs.Arg(0))
	}
	o := d
	if *quick {
		o = dnsbench.Quick()
	}
	// Flags given explicitly override the mode's values.
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "names":
			o.Names = *names
		case "rate":
			o.Rate = *rate
		case "socket-rate":
			o.SocketRate = *socketRate
		case "saturation-rate":
			o.SaturationRate = *saturation
		case "tcp-rate":
			o.TCPRate = *tcpRate
		case "dot-rate":
			o.DoTRate = *dotRate
		case "latency-rate":
			o.LatencyRate = *latency
		case "duration":
			o.Duration = *duration
		case "runs":
			o.Runs = *runs
		case "rrl-rounds":
			o.RRLRounds = *rrlRounds
		case "rrl-slice":
			o.RRLSlice = *rrlSlice
		case "binary":
			o.Binary = *binary
		case "compare-object":
			o.CompareObject = *compare
		case "compare-down":
			o.CompareDown = *compareDown
		case "prefix":
			o.Prefix = *prefix
		case "push-rounds":
			o.PushRounds = *pushRounds
		case "settle":
			o.Settle = *settle
		case "servers":
			o.Servers = split(*servers)
		case "work-names":
			if o.ConstantWorkSizes, err = sizes(*work); err != nil {
				err = fmt.Errorf("--work-names: %w", err)
			}
		case "work-k":
			if o.ConstantWorkK, err = sizes(*workK); err != nil {
				err = fmt.Errorf("--work-k: %w", err)
			}
		case "work-static":
			o.ConstantWorkStatic = *workStatic
		case "work-policy":
			o.ConstantWorkPolicy = config.Policy(*workPolicy)
		}
	})
	if err != nil {
		return err
	}
	o.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := dnsbench.Run(ctx, o)
	if err != nil {
		return err
	}
	if err := dnsbench.Write(res, *out); err != nil {
		return err
	}
	dnsbench.Markdown(os.Stdout, res)
	fmt.Fprintf(os.Stderr, "steadydns-bench: results in %s\n", *out)
	return nil
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func sizes(s string) ([]int, error) {
	var out []int
	for _, f := range split(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

const fleetUsage = `usage: steadydns-bench fleet [flags]

Measures the fleet's roles over real NATS servers: the aggregator's CPU and
the bytes on every link per push, from few to all checks and from none to all
unhealthy; then probers per aggregator, edges per aggregator and checks per
prober, each until the first step that does not keep up. Writes fleet.md and
fleet.json. Needs root. The aggregators run the steadydns binary given by
--binary. Exits 1 when a constancy check fails.

flags:
`

func runFleet(args []string) error {
	fs := flag.NewFlagSet("steadydns-bench fleet", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), fleetUsage)
		fs.PrintDefaults()
	}
	quick := fs.Bool("quick", false, "the constancy cells only, a few pushes")
	d := fleetbench.FleetDefaults()
	push := fs.Duration("push", d.Push, "aggregation.push_interval")
	pushes := fs.Int("pushes", d.Pushes, "push periods per measured window")
	runs := fs.Int("runs", d.Runs, "windows of the constancy cells")
	checks := fs.String("checks", join(d.Checks), "configured checks of the constancy cells (at most 65535)")
	unhealthy := fs.String("unhealthy", join(d.Unhealthy), "percent of checks failing, of the constancy cells")
	checkers := fs.String("checker-steps", join(d.CheckerSteps), "probers per aggregator to try, in order; empty skips")
	edges := fs.String("edge-steps", join(d.EdgeSteps), "edges per aggregator to try, in order; empty skips")
	probes := fs.String("prober-steps", join(d.ProberSteps), "checks per prober to try, in order; empty skips")
	prefix := fs.String("prefix", d.Prefix, "name prefix of the prober capacity's test hosts (at most 5 bytes)")
	binary := fs.String("binary", "", "the steadydns binary the aggregators run (default: steadydns beside this binary, else on PATH)")
	out := fs.String("out", "bench/results", "directory for fleet.md and fleet.json")
	fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every setting is a flag", fs.Arg(0))
	}
	o := d
	if *quick {
		o = fleetbench.FleetQuick()
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		var e error
		switch f.Name {
		case "push":
			o.Push = *push
		case "pushes":
			o.Pushes = *pushes
		case "runs":
			o.Runs = *runs
		case "checks":
			o.Checks, e = sizes(*checks)
		case "unhealthy":
			o.Unhealthy, e = sizes(*unhealthy)
		case "checker-steps":
			o.CheckerSteps, e = sizes(*checkers)
		case "edge-steps":
			o.EdgeSteps, e = sizes(*edges)
		case "prober-steps":
			o.ProberSteps, e = sizes(*probes)
		case "prefix":
			o.Prefix = *prefix
		case "binary":
			o.Binary = *binary
		}
		if e != nil && err == nil {
			err = fmt.Errorf("--%s: %w", f.Name, e)
		}
	})
	if err != nil {
		return err
	}
	o.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := fleetbench.RunFleet(ctx, o)
	if err != nil {
		return err
	}
	if err := fleetbench.WriteFleet(res, *out); err != nil {
		return err
	}
	fleetbench.FleetMarkdown(os.Stdout, res)
	fmt.Fprintf(os.Stderr, "steadydns-bench: results in %s\n", *out)
	if !res.FleetPassed() {
		return errors.New("fleet: a constancy check failed")
	}
	return nil
}

const loadUsage = `usage: steadydns-bench load [flags]

Starts steadydns serve with XDP on a generated zone of --names names (an A
and an AAAA set each) and reports the seconds until it answers, its peak
resident memory, the kernel maps' share of it and the Go heap's peak; checks
every set; then reloads with 1% of the sets changed while the client asks at
--rate, and reports the same and the queries lost or wrongly answered. Writes
load.json and load.md to --out. Needs root.

flags:
`

func runLoad(args []string) error {
	fs := flag.NewFlagSet("steadydns-bench load", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), loadUsage)
		fs.PrintDefaults()
	}
	o := dnsbench.LoadDefaults()
	fs.IntVar(&o.Names, "names", o.Names, "names in the generated zone")
	fs.IntVar(&o.Rate, "rate", o.Rate, "queries per second during the reload")
	fs.StringVar(&o.Binary, "binary", "", "the steadydns binary (default: steadydns beside this binary, else on PATH)")
	fs.StringVar(&o.Prefix, "prefix", "", "name prefix of the test hosts' namespaces and links (default: a unique one)")
	out := fs.String("out", "bench/results", "directory for load.json and load.md")
	fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every setting is a flag", fs.Arg(0))
	}
	o.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := dnsbench.MeasureLoad(ctx, o)
	if err != nil {
		return err
	}
	if err := dnsbench.WriteLoad(res, *out); err != nil {
		return err
	}
	dnsbench.LoadMarkdown(os.Stdout, res)
	if res.Lost+res.Wrong > 0 || res.Load.Correct < res.Load.Checked || res.Reload.Correct < res.Reload.Checked {
		return errors.New("load: answers were lost or wrong")
	}
	return nil
}

func join(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
