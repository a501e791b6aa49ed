package dnsbench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/steadydns/steadydns/bench/stats"
)

// gunRun is one kxdpgun run.
type gunRun struct {
	sent, replies float64 // per second
	rcodes        map[string]uint64
}

var (
	gunTotal = regexp.MustCompile(`^total (queries|replies):\s+(\d+) \((\d+) pps\)`)
	gunRcode = regexp.MustCompile(`^responded (\S+):\s+(\d+)`)
)

// kxdpgun offers rate queries per second from the client host to target,
// one of the edge's addresses, for secs seconds. It counts replies by
// rcode, not whether they are right: the spot check does that.
func (r *rig) kxdpgun(ctx context.Context, target netip.Addr, queries string, rate, secs int) (gunRun, error) {
	var out []byte
	for try := 0; ; try++ {
		c := r.command(ctx, r.env.Client, r.o.GenCPU, "kxdpgun",
			"-t", strconv.Itoa(secs), "-Q", strconv.Itoa(rate), "-F", strconv.Itoa(r.o.GenCPU),
			"-I", r.env.Client.Link, "-i", queries, target.String())
		// Stopped early (the rate-limiting slices stop it when done), it
		// is interrupted, not killed: killed, it leaves its XDP socket on
		// the client's veth busy for the next run.
		c.Cancel = func() error { return c.Process.Signal(syscall.SIGINT) }
		c.WaitDelay = 5 * time.Second
		r.record(c)
		var err error
		out, err = c.CombinedOutput()
		// Interrupted on a loaded machine, the previous run's socket can
		// still be going away when the next starts: it starts again.
		if bytes.Contains(out, []byte(gunBusy)) && try < gunTries && ctx.Err() == nil {
			fmt.Fprintf(r.o.Log, "bench: kxdpgun: the client's veth is still busy; starting again in 1s\n")
			time.Sleep(time.Second)
			continue
		}
		if err != nil {
			return gunRun{}, fmt.Errorf("running kxdpgun: %w: %s", err, out)
		}
		break
	}
	g := gunRun{rcodes: map[string]uint64{}}
	var seen int
	for _, line := range strings.Split(string(out), "\n") {
		if m := gunTotal.FindStringSubmatch(line); m != nil {
			pps, _ := strconv.ParseFloat(m[3], 64)
			if m[1] == "queries" {
				g.sent = pps
			} else {
				g.replies = pps
			}
			seen++
		}
		if m := gunRcode.FindStringSubmatch(line); m != nil {
			n, _ := strconv.ParseUint(m[2], 10, 64)
			g.rcodes[m[1]] += n
		}
	}
	if seen == 0 {
		return g, fmt.Errorf("reading kxdpgun's output: no totals in %q", out)
	}
	return g, nil
}

// gunBusy is what kxdpgun says when the client's veth still holds an
// XDP socket, and gunTries how many times it starts again after it.
const (
	gunBusy  = "requested resource is busy"
	gunTries = 5
)

// perfRun is one dnsperf run: latency percentiles in microseconds.
type perfRun struct {
	p50, p99        float64
	completed, lost int
}

// tcpClients is how many connections dnsperf's TCP and TLS runs open, and
// tcpOutstanding how many queries they have in flight in all, about 16 a
// connection: a resolver that pipelines over TCP.
const (
	tcpClients     = 32
	tcpOutstanding = 512
)

// streamRun is one dnsperf run over TCP or TLS: answers per second, and
// queries that had none.
type streamRun struct {
	rate float64
	lost int
}

// dnsperfStream offers rate queries per second from the client host over
// mode, "tcp" or "dot", to port.
func (r *rig) dnsperfStream(ctx context.Context, mode string, port, rate int) (streamRun, error) {
	c := r.command(ctx, r.env.Client, r.o.GenCPU, "dnsperf", "-m", mode, "-s", r.env.Edge.V4.String(), "-p", strconv.Itoa(port),
		"-d", r.zone.queries, "-l", strconv.Itoa(r.o.seconds()), "-Q", strconv.Itoa(rate),
		"-c", strconv.Itoa(tcpClients), "-q", strconv.Itoa(tcpOutstanding), "-t", "1")
	r.record(c)
	out, err := c.Output()
	if err != nil {
		return streamRun{}, fmt.Errorf("running dnsperf over %s: %w", mode, err)
	}
	return parseStreamRun(out)
}

// parseStreamRun reads dnsperf's statistics.
func parseStreamRun(out []byte) (streamRun, error) {
	var t streamRun
	var seen bool
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 4 && f[0] == "Queries" && f[1] == "per" && f[2] == "second:":
			rate, err := strconv.ParseFloat(f[3], 64)
			if err != nil {
				return t, fmt.Errorf("reading dnsperf's rate %q: %w", f[3], err)
			}
			t.rate, seen = rate, true
		case len(f) >= 3 && f[0] == "Queries" && f[1] == "lost:":
			t.lost, _ = strconv.Atoi(f[2])
		}
	}
	if !seen {
		return t, fmt.Errorf("reading dnsperf's output: no rate in %q", out)
	}
	return t, nil
}

// dnsperf offers a moderate rate from sockets on the client host and
// times every query (-v prints one line per reply with its latency);
// signed, every query asks DO=1 (-D).
func (r *rig) dnsperf(ctx context.Context, signed bool) (perfRun, error) {
	args := []string{"-s", r.env.Edge.V4.String(), "-d", r.zone.queries, "-l", strconv.Itoa(r.o.seconds()),
		"-Q", strconv.Itoa(r.o.LatencyRate), "-t", "1", "-v"}
	if signed {
		args = append(args, "-D")
	}
	c := r.command(ctx, r.env.Client, r.o.GenCPU, "dnsperf", args...)
	r.record(c)
	out, err := c.StdoutPipe()
	if err != nil {
		return perfRun{}, fmt.Errorf("running dnsperf: %w", err)
	}
	if err := c.Start(); err != nil {
		return perfRun{}, fmt.Errorf("running dnsperf: %w", err)
	}
	var lat []float64
	var p perfRun
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 5 && f[0] == ">":
			s, err := strconv.ParseFloat(f[4], 64)
			if err == nil {
				lat = append(lat, s*1e6)
			}
		case len(f) >= 3 && f[0] == "Queries" && f[1] == "lost:":
			p.lost, _ = strconv.Atoi(f[2])
		}
	}
	if err := c.Wait(); err != nil {
		return p, fmt.Errorf("running dnsperf: %w", err)
	}
	if len(lat) == 0 {
		return p, fmt.Errorf("dnsperf: no replies")
	}
	slices.Sort(lat)
	p.completed = len(lat)
	p.p50, p.p99 = stats.Percentile(lat, 0.50), stats.Percentile(lat, 0.99)
	return p, nil
}
