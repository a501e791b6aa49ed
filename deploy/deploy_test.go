package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/testenv"
)

// unit is a systemd unit file: each section's keys with their values in
// order, a key set twice holding both.
type unit map[string]map[string][]string

func readUnit(t *testing.T) unit {
	t.Helper()
	b, err := os.ReadFile("steadydns.service")
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	var section string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("steadydns.service:%d: %q is neither a section nor key=value", i+1, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

func (u unit) one(t *testing.T, section, key string) string {
	t.Helper()
	v := u[section][key]
	if len(v) != 1 {
		t.Fatalf("[%s] %s is set %d times, want once", section, key, len(v))
	}
	return v[0]
}

// caps are the unit's capabilities as setpriv spells them: -all,+bpf,...
func (u unit) caps(t *testing.T, key string) []string {
	return strings.Fields(u.one(t, "Service", key))
}

// wantCaps is what the server needs, and no more.
var wantCaps = []string{"CAP_BPF", "CAP_NET_ADMIN", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_PERFMON"}

// TestUnit: the unit runs as a user of its own with exactly the
// capabilities the server needs, reloads with SIGHUP, and may write only the
// pins and its state; systemd-analyze verify finds nothing to say about it.
func TestUnit(t *testing.T) {
	u := readUnit(t)
	if user := u.one(t, "Service", "User"); user == "" || user == "root" || user == "0" {
		t.Errorf("User=%s, want a user of its own", user)
	}
	for _, key := range []string{"AmbientCapabilities", "CapabilityBoundingSet"} {
		got := slices.Sorted(slices.Values(u.caps(t, key)))
		if !slices.Equal(got, wantCaps) {
			t.Errorf("%s=%v, want %v", key, got, wantCaps)
		}
	}
	for key, want := range map[string]string{
		"ExecReload":       "/bin/kill -HUP $MAINPID",
		"NoNewPrivileges":  "yes",
		"ProtectSystem":    "strict",
		"ReadWritePaths":   "/sys/fs/bpf",
		"StateDirectory":   "steadydns",
		"KillSignal":       "SIGTERM",
		"ProtectHome":      "yes",
		"PrivateTmp":       "yes",
		"RestrictSUIDSGID": "yes",
	} {
		if got := u.one(t, "Service", key); got != want {
			t.Errorf("%s=%s, want %s", key, got, want)
		}
	}
	if start := u.one(t, "Service", "ExecStart"); !strings.HasPrefix(start, "/usr/local/bin/steadydns serve --config /etc/steadydns/steadydns.yaml") {
		t.Errorf("ExecStart=%s, want /usr/local/bin/steadydns serve --config /etc/steadydns/steadydns.yaml (make install rewrites the directory)", start)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze: the structure above is all that is checked")
	}
	// verify checks that the commands exist: point them at a built binary.
	b, _ := os.ReadFile("steadydns.service")
	path := filepath.Join(t.TempDir(), "steadydns.service")
	os.WriteFile(path, bytes.ReplaceAll(b, []byte("/usr/local/bin/steadydns"), []byte(build(t))), 0o644)
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	// Unknown keys and bad values are warnings with exit 0: any output fails.
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// build compiles the server into a directory every user may read.
func build(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		var dir string
		if dir, buildErr = os.MkdirTemp("", "steadydns-deploy"); buildErr != nil {
			return
		}
		os.Chmod(dir, 0o755)
		binPath = filepath.Join(dir, "steadydns")
		if out, err := exec.Command("go", "build", "-o", binPath, "../cmd/steadydns").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// nobody is the uid and gid the server runs as in these tests, standing in
// for the unit's user, which this machine may not have.
const nobody = 65534

const zoneText = `$ORIGIN example.test.
$TTL 60
@    SOA ns1 hostmaster 1 7200 3600 1209600 300
@    NS  ns1
ns1  A   198.18.0.2
`

// rig is a server's config in a directory the unprivileged user can read,
// with its pins in a directory of the host's bpffs.
type rig struct {
	env    *testenv.Env
	bin    string
	config string
	pins   string
	state  string // server.state_dir, which the unit's StateDirectory makes the service user's
}

func newRig(t *testing.T, env *testenv.Env, name string) *rig {
	t.Helper()
	dir, err := os.MkdirTemp("", "steadydns-deploy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	r := &rig{env: env, bin: build(t), config: filepath.Join(dir, "steadydns.yaml"), pins: "/sys/fs/bpf/" + env.Prefix() + "-" + name,
		state: filepath.Join(dir, "state")}
	cfg := fmt.Sprintf(`server:
  interfaces: [%s]
  xdp_mode: generic
  listen: ["198.18.0.2:53"]
  api: 127.0.0.1:9153
  bpffs: %s
  state_dir: %s
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  ping1: { type: icmp, target: 198.18.1.1, interval: 200ms, timeout: 150ms, healthy_threshold: 1 }
records:
  - name: www.example.test.
    type: A
    answers:
      - { value: 198.18.1.1 }
  - name: pinged.example.test.
    type: A
    answers:
      - { value: 198.18.1.1, check: ping1 }
`, env.Edge.Link, r.pins, r.state)
	for name, text := range map[string]string{"steadydns.yaml": cfg, "example.test.zone": zoneText} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if out, err := env.Edge.Command(r.bin, "detach", "--config", r.config).CombinedOutput(); err != nil {
			t.Logf("detach: %v\n%s", err, out)
		}
		os.RemoveAll(r.pins)
	})
	return r
}

// proc is a running server and what it printed.
type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan error
}

func start(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, done: make(chan error, 1)}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-p.done
		if t.Failed() {
			t.Logf("%s:\n%s", strings.Join(cmd.Args, " "), p.output())
		}
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// waitFor waits until the output has s, or the process exits.
func (p *proc) waitFor(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(p.output(), s) {
			return
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("exited (%v) before printing %q:\n%s", err, s, p.output())
		default:
		}
	}
	t.Fatalf("no %q within 30s:\n%s", s, p.output())
}

// exit waits for the process to end on its own and returns its exit code.
func (p *proc) exit(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 0
	case <-time.After(30 * time.Second):
		t.Fatalf("still running after 30s:\n%s", p.output())
		return -1
	}
}

// setpriv runs the server in the edge's network namespace as nobody, with
// caps as its ambient and bounding sets, as systemd runs the unit.
func (r *rig) setpriv(caps []string, args ...string) *exec.Cmd {
	set := []string{"-all"}
	for _, c := range caps {
		set = append(set, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	list := strings.Join(set, ",")
	return r.env.Edge.Command("setpriv", append([]string{
		fmt.Sprintf("--reuid=%d", nobody), fmt.Sprintf("--regid=%d", nobody), "--clear-groups",
		"--inh-caps=" + list, "--ambient-caps=" + list, "--bounding-set=" + list, "--no-new-privs",
		"--", r.bin}, args...)...)
}

// TestUnitCapabilities runs `steadydns serve` as the unit does, as a user
// other than root with only the unit's capabilities: it loads and attaches
// XDP, which answers over the wire, binds port 53 and probes with icmp, and
// logs JSON. Without CAP_PERFMON it says, in one line, that CAP_PERFMON is
// what is missing.
func TestUnitCapabilities(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv (util-linux)")
	}
	caps := readUnit(t).caps(t, "AmbientCapabilities")
	env := testenv.Start(t, testenv.Options{Backends: 1})
	r := newRig(t, env, "unit")
	// As the unit's ExecStartPre does.
	if err := os.MkdirAll(r.pins, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(r.pins, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	// As StateDirectory=steadydns does.
	if err := os.MkdirAll(r.state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(r.state, nobody, nobody); err != nil {
		t.Fatal(err)
	}

	t.Run("without CAP_PERFMON", func(t *testing.T) {
		less := slices.DeleteFunc(slices.Clone(caps), func(c string) bool { return c == "CAP_PERFMON" })
		p := start(t, r.setpriv(less, "serve", "--config", r.config))
		if code := p.exit(t); code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		out := strings.TrimSpace(p.output())
		if strings.Count(out, "\n") != 0 || !strings.Contains(out, "lacks CAP_PERFMON") || strings.Contains(out, "CAP_BPF") {
			t.Errorf("stderr:\n%s\nwant one line that names CAP_PERFMON alone", out)
		}
	})

	p := start(t, r.setpriv(caps, "serve", "--config", r.config, "--log-format", "json"))
	p.waitFor(t, `"msg":"serving"`)

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), fmt.Sprintf("\nUid:\t%d\t%d\t%d\t%d\n", nobody, nobody, nobody, nobody)) {
		t.Errorf("the server does not run as uid %d:\n%s", nobody, status)
	}

	// Answered over the wire; the XDP counters show the data plane did it.
	var answer *dns.Msg
	err = env.Client.Do(func() error {
		q := new(dns.Msg)
		q.SetQuestion("www.example.test.", dns.TypeA)
		var err error
		answer, _, err = (&dns.Client{Timeout: 2 * time.Second}).Exchange(q, "198.18.0.2:53")
		return err
	})
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	if len(answer.Answer) != 1 || answer.Answer[0].(*dns.A).A.String() != "198.18.1.1" {
		t.Errorf("answer %v, want www.example.test. A 198.18.1.1", answer.Answer)
	}
	metrics := get(t, env, "/metrics")
	if !strings.Contains(metrics, `steadydns_queries_total{outcome="answered",path="xdp"} 1`) {
		t.Errorf("the XDP counters do not show the answer:\n%s", grep(metrics, "steadydns_queries_total"))
	}

	// The icmp check goes up: CAP_NET_RAW opens its raw socket.
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(get(t, env, "/api/v1/checks"), `"healthy": true`) {
		if time.Now().After(deadline) {
			t.Fatalf("the icmp check never went up:\n%s", get(t, env, "/api/v1/checks"))
		}
		time.Sleep(200 * time.Millisecond)
	}

	// SIGHUP, ExecReload's signal, reloads.
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitFor(t, `"msg":"reloaded"`)

	for _, line := range strings.Split(strings.TrimSpace(p.output()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || m["level"] == nil || m["msg"] == nil {
			t.Errorf("log line %q is not a JSON record with level and msg: %v", line, err)
		}
	}
}

func get(t *testing.T, env *testenv.Env, path string) string {
	t.Helper()
	resp, err := env.Edge.HTTPClient().Get("http://127.0.0.1:9153" + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grep(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestIPNetnsExec: under `ip netns exec`, whose private /sys makes the
// server mount a bpffs of its own, the server warns that its pins die with
// it and says how to run it instead; with XDP attached by a server that
// runs with the host's pins, it says so rather than "file exists".
func TestIPNetnsExec(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	env := testenv.Start(t, testenv.Options{Backends: 1})
	r := newRig(t, env, "ipnetns")
	ipExec := func() *exec.Cmd {
		return exec.Command("ip", "netns", "exec", env.Edge.Name, r.bin, "serve", "--config", r.config)
	}

	p := start(t, ipExec())
	p.waitFor(t, `msg=serving`)
	out := p.output()
	if !strings.Contains(out, "private to this process's mount namespace") || !strings.Contains(out, "nsenter --net=") {
		t.Errorf("no warning about the private bpffs, with the fix:\n%s", out)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.exit(t)

	// With the host's pins no warning, and XDP stays attached after it stops.
	p = start(t, env.Edge.Command(r.bin, "serve", "--config", r.config))
	p.waitFor(t, `msg=serving`)
	if strings.Contains(p.output(), "private") {
		t.Errorf("a warning with the host's pins:\n%s", p.output())
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.exit(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := ipExec()
	cmd = exec.CommandContext(ctx, cmd.Args[0], cmd.Args[1:]...)
	b, err := cmd.CombinedOutput()
	out = string(b)
	if err == nil {
		t.Fatalf("a second server attached beside the first:\n%s", out)
	}
	if !strings.Contains(out, "another xdp program is attached") || !strings.Contains(out, "ip netns exec") {
		t.Errorf("the error does not say that another program holds the interface:\n%s", out)
	}
	if strings.Contains(out, "native xdp unavailable") || strings.Contains(out, "file exists") {
		t.Errorf("the misleading native-mode warning or file exists:\n%s", out)
	}
}
