package dnsbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/daemon"
	"github.com/steadydns/steadydns/testenv"
)

// LoadOptions are a loading measurement's: `steadydns serve` starting on
// the generated zone, then reloading it with some sets changed while
// queries arrive.
type LoadOptions struct {
	Names  int    // names in the zone, two sets (A, AAAA) each
	Rate   int    // queries per second during the reload
	Binary string // run as `BINARY serve --config FILE`; empty finds one (stats.ServerBinary)
	Prefix string // of the test hosts' namespaces and links; empty for a unique one
	Log    io.Writer
}

// LoadDefaults are the 1M-name zone of the loading target and a query
// rate a loaded machine keeps up without dropping on its own.
func LoadDefaults() LoadOptions { return LoadOptions{Names: 1_000_000, Rate: 2000} }

// movedEvery: the reload changes the A set of every movedEvery-th name,
// so one set in 2*movedEvery, 1%.
const movedEvery = 50

func moved(i int) bool { return i%movedEvery == 0 }

// LoadResult is what a loading measurement found.
type LoadResult struct {
	Names int `json:"names"`
	Sets  int `json:"sets"` // A and AAAA sets in the record table
	// Load: from the process's start until it answers; the sets are all
	// in place by then, since serve answers only after writing them.
	Load Phase `json:"load"`
	// Reload: POST /api/v1/reload after the zone file changed Changed
	// sets, until it returns.
	Reload  Phase `json:"reload"`
	Changed int   `json:"changed"`
	// Queries sent from the client host while the reload ran, from a
	// second before it until a second after, and those of them answered
	// not at all (Lost) or not with the name's set before or after the
	// change (Wrong).
	Sent    int    `json:"sent"`
	Lost    int    `json:"lost"`
	Wrong   int    `json:"wrong"`
	Problem string `json:"problem,omitempty"` // the first wrong answer
}

// Phase is one phase's time and memory. Memory is the process's peak
// resident set over the phase (VmHWM), the part of it that is the
// kernel's maps mapped into the process (the record table, counted where
// its pages were touched), and the Go heap's peak (measure).
type Phase struct {
	Seconds float64 `json:"seconds"`
	// CPU is serve's CPU time over the phase, user and system: on a
	// shared host, what the phase cost whatever else ran.
	CPU      float64 `json:"cpu_seconds"`
	PeakRSS  uint64  `json:"peak_rss_bytes"`
	MapsRSS  uint64  `json:"maps_rss_bytes"`
	HeapPeak uint64  `json:"heap_peak_bytes"`
	GCs      int     `json:"gcs"`
	Checked  int     `json:"checked"` // sets asked after the phase, each once
	Correct  int     `json:"correct"`
	Problem  string  `json:"problem,omitempty"`
}

// MeasureLoad starts `steadydns serve` with XDP on the edge host's veth
// on a zone of o.Names names, times it until it answers, checks every
// set, and then reloads it with 1% of the sets changed under a steady
// query load, counting the queries that go unanswered or wrongly answered.
func MeasureLoad(ctx context.Context, o LoadOptions) (res *LoadResult, err error) {
	if o.Names < movedEvery {
		return nil, fmt.Errorf("loading: %d names, at least %d", o.Names, movedEvery)
	}
	if o.Rate < 100 {
		return nil, fmt.Errorf("loading: a rate of %d queries per second, at least 100", o.Rate)
	}
	if o.Binary == "" {
		if o.Binary, err = stats.ServerBinary(); err != nil {
			return nil, fmt.Errorf("finding the steadydns binary: %w", err)
		}
	}
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "loading: "+format+"\n", a...)
		}
	}
	dir, err := os.MkdirTemp("", "steadydns-load-")
	if err != nil {
		return nil, fmt.Errorf("making a scratch directory: %w", err)
	}
	defer os.RemoveAll(dir)
	zfile := filepath.Join(dir, "bench.test.zone")
	logf("writing a zone of %d names", o.Names)
	if err := writeZoneFile(zfile, o.Names, nil); err != nil {
		return nil, err
	}
	l, err := newLoadHosts(o.Prefix, dir)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, l.close()) }()

	res = &LoadResult{Names: o.Names, Sets: 2*o.Names + 2}
	cfg, err := l.writeConfig(zfile, res.Sets)
	if err != nil {
		return nil, err
	}
	logf("starting %s serve", o.Binary)
	p, err := l.start(ctx, o.Binary, cfg)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, p.stop(), daemon.Detach(cfg)) }()
	if err := l.waitAnswer(ctx, p, o.Names-1); err != nil {
		return nil, err
	}
	res.Load.Seconds = time.Since(p.started).Seconds()
	if err := l.waitAPI(ctx); err != nil {
		return nil, err
	}
	if err := p.measure(ctx, l, &res.Load); err != nil {
		return nil, err
	}
	logf("answering after %.1f s; checking every set", res.Load.Seconds)
	l.checkAll(o.Names, nil, &res.Load)

	if err := writeZoneFile(zfile+".new", o.Names, moved); err != nil {
		return nil, err
	}
	if err := os.Rename(zfile+".new", zfile); err != nil {
		return nil, fmt.Errorf("replacing the zone file: %w", err)
	}
	res.Changed = (o.Names + movedEvery - 1) / movedEvery
	// Writing 5 resets the peak resident set to the current one, so the
	// reload's peak is its own (proc(5), /proc/pid/clear_refs).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0); err != nil {
		return nil, fmt.Errorf("resetting the peak resident set: %w", err)
	}
	q, err := l.startQueries(o.Names, o.Rate)
	if err != nil {
		return nil, err
	}
	time.Sleep(time.Second)
	logf("reloading with %d sets changed, %d queries/s meanwhile", res.Changed, o.Rate)
	if p.cpuSeen, err = p.cpu(); err != nil {
		q.stop()
		return nil, err
	}
	start := time.Now()
	err = l.reload(ctx)
	res.Reload.Seconds = time.Since(start).Seconds()
	time.Sleep(time.Second)
	res.Sent, res.Lost, res.Wrong, res.Problem = q.stop()
	if err != nil {
		return nil, err
	}
	if err := p.measure(ctx, l, &res.Reload); err != nil {
		return nil, err
	}
	logf("reloaded in %.1f s; checking every set", res.Reload.Seconds)
	l.checkAll(o.Names, moved, &res.Reload)
	return res, nil
}

// loadHosts are the client and edge hosts, the pin directory and the
// API's token.
type loadHosts struct {
	env   *testenv.Env
	pass  bpf.PassObjects
	dir   string
	bpffs string
	token string
}

func newLoadHosts(prefix, dir string) (l *loadHosts, err error) {
	if prefix == "" {
		prefix = testenv.UniquePrefix()
	}
	env, err := testenv.New(testenv.Options{Prefix: prefix})
	if err != nil {
		return nil, err
	}
	l = &loadHosts{env: env, dir: dir, bpffs: filepath.Join(dir, "bpffs"), token: "loading-measurement-token"}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.close())
		}
	}()
	if err := bpf.LoadPassObjects(&l.pass, nil); err != nil {
		return l, fmt.Errorf("loading the xdp pass program: %w", err)
	}
	// The edge's XDP_TX replies reach the client's veth only through an
	// XDP program there.
	if err := env.AttachPass(l.pass.XdpPass); err != nil {
		return l, err
	}
	if err := os.Mkdir(l.bpffs, 0o700); err != nil {
		return l, fmt.Errorf("making the bpffs mount point: %w", err)
	}
	if err := unix.Mount("bpf", l.bpffs, "bpf", 0, "mode=0700"); err != nil {
		return l, fmt.Errorf("mounting bpffs at %s: %w", l.bpffs, err)
	}
	return l, nil
}

func (l *loadHosts) close() error {
	errs := []error{l.env.Close()}
	l.pass.Close()
	if err := unix.Unmount(l.bpffs, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("unmounting %s: %w", l.bpffs, err))
	}
	return errors.Join(errs...)
}

// loadConfig is steadydnsConfig with a record table sized for the zone
// and an API token the reload request carries.
const loadConfig = `server:
  interfaces: [%s]
  xdp_mode: native
  listen: ["%s:53", "[%s]:53"]
  api: 127.0.0.1:9153
  api_token_file: %s
  bpffs: %s
  state_dir: %s
  max_records: %d
  rrl: {rate: 0}
zones:
  - origin: %s
    file: %s
`

func (l *loadHosts) writeConfig(zfile string, sets int) (string, error) {
	tokenFile := filepath.Join(l.dir, "api.token")
	if err := os.WriteFile(tokenFile, []byte(l.token), 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", tokenFile, err)
	}
	e := l.env.Edge
	path := filepath.Join(l.dir, "steadydns.yaml")
	cfg := fmt.Sprintf(loadConfig, e.Link, e.V4, e.V6, tokenFile, filepath.Join(l.bpffs, "sd"), filepath.Join(l.dir, "state"), sets, origin, zfile)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

// serveProc is the serve process, its log holding the runtime's GC trace.
type serveProc struct {
	cmd     *exec.Cmd
	log     string
	started time.Time
	done    chan struct{}
	err     error
	gcSeen  int     // GC trace lines already counted in a phase
	cpuSeen float64 // CPU seconds at the start of the phase
}

// start runs serve in the edge's namespace on every CPU, as it runs in
// production, with the GC trace on (GODEBUG=gctrace=1, on stderr).
func (l *loadHosts) start(ctx context.Context, bin, cfg string) (*serveProc, error) {
	p := &serveProc{log: filepath.Join(l.dir, "serve.log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		return nil, fmt.Errorf("creating the serve log: %w", err)
	}
	defer f.Close()
	// nsenter execs, so the process is serve itself and its pid serve's.
	p.cmd = exec.CommandContext(ctx, "nsenter", "--net="+l.env.Edge.NSPath(), "--", bin, "serve", "--config", cfg)
	p.cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting serve: %w", err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *serveProc) stop() error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("serve did not stop within 30 s of SIGTERM; killed")
	}
	return nil
}

// gcLine is a GC trace line's heap sizes: at the start of the collection,
// at its end, and live.
var gcLine = regexp.MustCompile(`^gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

// measure fills ph's memory from the process as it is now, and the GC
// trace since the last phase. The heap's peak is the larger of the
// trace's largest heap at the start of a collection and the heap now,
// which may have grown past it since the last.
func (p *serveProc) measure(ctx context.Context, l *loadHosts, ph *Phase) error {
	pid := p.cmd.Process.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return fmt.Errorf("reading the status of serve: %w", err)
	}
	ph.PeakRSS = procKB(string(status), "VmHWM:")
	cpu, err := p.cpu()
	if err != nil {
		return err
	}
	ph.CPU, p.cpuSeen = cpu-p.cpuSeen, cpu
	smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return fmt.Errorf("reading the mappings of serve: %w", err)
	}
	ph.MapsRSS = mapsRSS(string(smaps))
	f, err := os.Open(p.log)
	if err != nil {
		return fmt.Errorf("reading the serve log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		m := gcLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if n++; n <= p.gcSeen {
			continue
		}
		ph.GCs++
		mb, _ := strconv.ParseUint(m[1], 10, 64) // the pattern admits only digits
		ph.HeapPeak = max(ph.HeapPeak, mb<<20)
	}
	p.gcSeen = n
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the serve log: %w", err)
	}
	now, err := l.heapInUse(ctx)
	ph.HeapPeak = max(ph.HeapPeak, now)
	return err
}

// cpu is the CPU time serve has used, user and system, from
// /proc/pid/stat, whose times are in USER_HZ, 100 a second (proc(5)).
func (p *serveProc) cpu() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("reading the stat of serve: %w", err)
	}
	// Past the command's name, in parentheses, the state is field 3:
	// utime and stime are 14 and 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("reading the stat of serve: %d fields", len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("reading the stat of serve: %w", err)
	}
	return float64(utime+stime) / 100, nil
}

// procKB is a "Key: N kB" field of a proc file, in bytes.
func procKB(s, key string) uint64 {
	for line := range strings.Lines(s) {
		if rest, ok := strings.CutPrefix(line, key); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// mapsRSS sums the resident pages of the BPF maps mapped into the
// process, which smaps names anon_inode:bpf-map.
func mapsRSS(smaps string) uint64 {
	var sum uint64
	inMap := false
	for line := range strings.Lines(smaps) {
		if f := strings.Fields(line); len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			inMap = len(f) >= 6 && f[5] == "anon_inode:bpf-map"
			continue
		}
		if inMap && strings.HasPrefix(line, "Rss:") {
			sum += procKB(line, "Rss:")
		}
	}
	return sum
}

// waitAnswer polls name i's AAAA set until the server answers it right.
// The wait is as long as a large zone may take on a loaded machine.
func (l *loadHosts) waitAnswer(ctx context.Context, p *serveProc, i int) error {
	conn, err := l.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(30 * time.Minute)
	// One query each 50 ms at most: until serve listens, a query is
	// refused at once, and asking again at once would take a CPU from
	// the load being measured.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if askOne(conn, i, dns.TypeAAAA, nil, 50*time.Millisecond) == "" {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("serve exited: %v; log %s:\n%s", p.err, p.log, tail(p.log))
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("serve does not answer %s AAAA; log %s:\n%s", nameOf(i), p.log, tail(p.log))
		}
	}
}

// dial is a UDP socket on the client host toward the edge's port 53.
func (l *loadHosts) dial() (*net.UDPConn, error) {
	var conn *net.UDPConn
	err := l.env.Client.Do(func() error {
		var err error
		conn, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(l.env.Edge.V4, 53)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening a socket on the client host: %w", err)
	}
	return conn, nil
}

// ask sends one query for name i and qtype and returns its reply.
func ask(conn *net.UDPConn, i int, qtype uint16, timeout time.Duration) (*dns.Msg, error) {
	q := new(dns.Msg).SetQuestion(nameOf(i), qtype)
	out, err := q.Pack()
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(out); err != nil {
		return nil, err
	}
	buf := make([]byte, 1232)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, err
		}
		in := new(dns.Msg)
		if in.Unpack(buf[:n]) == nil && in.Id == q.Id {
			return in, nil
		}
		// A late reply to an earlier query: read on.
	}
}

// askOne asks name i for qtype and returns what is wrong with the reply,
// "" for nothing: its set as the zone has it, or, where moved says so,
// as the reload changes it.
func askOne(conn *net.UDPConn, i int, qtype uint16, moved func(int) bool, timeout time.Duration) string {
	in, err := ask(conn, i, qtype, timeout)
	if err != nil {
		return fmt.Sprintf("%s %s: %v", nameOf(i), dns.TypeToString[qtype], err)
	}
	return wrongAnswer(in, i, qtype, want(i, qtype, moved))
}

// want is name i's qtype set, sorted: as the zone has it, or, for a
// name moved says has moved, its changed A set.
func want(i int, qtype uint16, moved func(int) bool) []string {
	if qtype == dns.TypeA && moved != nil && moved(i) {
		var out []string
		for j := range perNameA {
			out = append(out, addrMoved(i, j).String())
		}
		return sorted(out)
	}
	return sorted(expected(i, qtype))
}

// wrongAnswer is what is wrong with in as the reply for name i and qtype,
// "" when it answers one of the sets sets.
func wrongAnswer(in *dns.Msg, i int, qtype uint16, sets ...[]string) string {
	if in.Rcode != dns.RcodeSuccess || !in.Authoritative {
		return fmt.Sprintf("%s %s: rcode %s, aa %v", nameOf(i), dns.TypeToString[qtype], dns.RcodeToString[in.Rcode], in.Authoritative)
	}
	got := answerAddrs(in)
	for _, s := range sets {
		if slices.Equal(got, s) {
			return ""
		}
	}
	return fmt.Sprintf("%s %s: answered %v", nameOf(i), dns.TypeToString[qtype], got)
}

func answerAddrs(in *dns.Msg) []string {
	var got []string
	for _, rr := range in.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			got = append(got, rr.A.String())
		case *dns.AAAA:
			got = append(got, rr.AAAA.String())
		}
	}
	return sorted(got)
}

func sorted(s []string) []string { slices.Sort(s); return s }

// checkAll asks every name's A and AAAA once, from a few sockets at a
// time, and counts the right answers into ph: with moved set, the moved
// names' A sets must be the changed ones.
func (l *loadHosts) checkAll(names int, moved func(int) bool, ph *Phase) {
	const workers = 16
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var checked, correct int
			var problem string
			conn, err := l.dial()
			if err == nil {
				defer conn.Close()
			}
			for i := w; i < names; i += workers {
				for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
					checked++
					p := ""
					if err != nil {
						p = err.Error()
					} else {
						p = askOne(conn, i, qt, moved, 2*time.Second)
					}
					if p == "" {
						correct++
					} else if problem == "" {
						problem = p
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			ph.Checked += checked
			ph.Correct += correct
			if ph.Problem == "" {
				ph.Problem = problem
			}
		}()
	}
	wg.Wait()
}

// reload asks the API to reload, as an operator would, and returns when
// the reload is applied: the request answers then.
func (l *loadHosts) reload(ctx context.Context) error {
	resp, err := l.api(ctx, http.MethodPost, "/api/v1/reload")
	if err != nil {
		return fmt.Errorf("reloading: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("reloading: %s: %s", resp.Status, body)
	}
	return nil
}

// heapInUse is the Go heap serve holds now, garbage not yet collected
// included, from its metrics.
func (l *loadHosts) heapInUse(ctx context.Context) (uint64, error) {
	resp, err := l.api(ctx, http.MethodGet, "/metrics")
	if err != nil {
		return 0, fmt.Errorf("reading the metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return uint64(f), err
		}
	}
	return 0, fmt.Errorf("reading the metrics: no go_memstats_heap_inuse_bytes: %v", sc.Err())
}

// waitAPI waits for serve's API, which may listen a moment after XDP
// answers: the edge's maps are written before the API starts.
func (l *loadHosts) waitAPI(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := l.api(ctx, http.MethodGet, "/healthz")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for the api: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// api sends one request to the API, which listens on the edge's
// loopback: the connection is made in the edge's namespace, and the one
// request goes over it.
func (l *loadHosts) api(ctx context.Context, method, path string) (*http.Response, error) {
	var conn net.Conn
	err := l.env.Edge.Do(func() error {
		var err error
		conn, err = net.Dial("tcp", "127.0.0.1:9153")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to the api: %w", err)
	}
	once := func(context.Context, string, string) (net.Conn, error) { return conn, nil }
	c := &http.Client{Transport: &http.Transport{DialContext: once, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, method, "http://127.0.0.1:9153"+path, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	return c.Do(req)
}

// steadyQueries sends queries for random names at a steady rate from
// one socket and matches the replies by ID.
type steadyQueries struct {
	conn    *net.UDPConn
	names   int
	mu      sync.Mutex
	pending map[uint16]asked
	sent    int
	wrong   int
	problem string
	quit    chan struct{}
	done    sync.WaitGroup
}

type asked struct {
	name  int
	qtype uint16
}

func (l *loadHosts) startQueries(names, rate int) (*steadyQueries, error) {
	conn, err := l.dial()
	if err != nil {
		return nil, err
	}
	s := &steadyQueries{conn: conn, names: names, pending: map[uint16]asked{}, quit: make(chan struct{})}
	s.done.Add(2)
	go s.send(rate)
	go s.receive()
	return s, nil
}

// send asks rate/100 queries every 10 ms, each with an ID of its own:
// at most 65,536 are outstanding, far more than a few seconds hold.
func (s *steadyQueries) send(rate int) {
	defer s.done.Done()
	rng := rand.New(rand.NewPCG(3, 4))
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var id uint16
	for {
		select {
		case <-s.quit:
			return
		case <-tick.C:
		}
		for range rate / 100 {
			q := asked{name: rng.IntN(s.names), qtype: dns.TypeA}
			if rng.IntN(2) == 1 {
				q.qtype = dns.TypeAAAA
			}
			m := new(dns.Msg).SetQuestion(nameOf(q.name), q.qtype)
			id++
			m.Id = id
			out, _ := m.Pack() // a name of the zone packs
			s.mu.Lock()
			s.pending[id] = q
			s.sent++
			s.mu.Unlock()
			s.conn.Write(out) // a failed send goes unanswered and is counted lost
		}
	}
}

func (s *steadyQueries) receive() {
	defer s.done.Done()
	buf := make([]byte, 1232)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			return // closed by stop
		}
		in := new(dns.Msg)
		if in.Unpack(buf[:n]) != nil {
			continue
		}
		s.mu.Lock()
		q, ok := s.pending[in.Id]
		if ok {
			delete(s.pending, in.Id)
			if p := wrongAnswer(in, q.name, q.qtype, want(q.name, q.qtype, nil), want(q.name, q.qtype, moved)); p != "" {
				s.wrong++
				if s.problem == "" {
					s.problem = p
				}
			}
		}
		s.mu.Unlock()
	}
}

// stop stops sending, waits two seconds for the last replies, and
// returns the counts: what is still pending then is lost.
func (s *steadyQueries) stop() (sent, lost, wrong int, problem string) {
	close(s.quit)
	time.Sleep(2 * time.Second)
	s.conn.Close()
	s.done.Wait()
	return s.sent, len(s.pending), s.wrong, s.problem
}

// WriteLoad writes res as load.json and load.md in dir.
func WriteLoad(res *LoadResult, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the loading results: %w", err)
	}
	path := filepath.Join(dir, "load.json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	var md bytes.Buffer
	LoadMarkdown(&md, res)
	path = filepath.Join(dir, "load.md")
	if err := os.WriteFile(path, md.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// LoadMarkdown writes res as a table.
func LoadMarkdown(w io.Writer, res *LoadResult) {
	mib := func(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	fmt.Fprintf(w, "Loading %d names (%d sets), serve with XDP; reload: %d sets changed, %d queries sent meanwhile: %d lost, %d wrong. "+
		"The targets at a million names: loaded in at most 15 s with at most 2 GiB resident, and no answer lost or wrong during the reload.\n\n",
		res.Names, res.Sets, res.Changed, res.Sent, res.Lost, res.Wrong)
	fmt.Fprintln(w, "| phase | seconds | CPU seconds | peak resident | of it the maps | peak less maps | Go heap peak | GCs | sets answered right |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, ph := range []struct {
		name string
		p    Phase
	}{{"load", res.Load}, {"reload", res.Reload}} {
		p := ph.p
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %s | %s | %s | %s | %d | %d of %d |\n", ph.name, p.Seconds, p.CPU, mib(p.PeakRSS), mib(p.MapsRSS), mib(p.PeakRSS-min(p.PeakRSS, p.MapsRSS)), mib(p.HeapPeak), p.GCs, p.Correct, p.Checked)
	}
	for _, p := range []string{res.Load.Problem, res.Reload.Problem, res.Problem} {
		if p != "" {
			fmt.Fprintf(w, "\nfirst problem: %s\n", p)
		}
	}
}
