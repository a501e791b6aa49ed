package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Prometheus is a real Prometheus server (Debian's prometheus package) in
// a host's namespace, scraping test backends, for checks that query one.
type Prometheus struct {
	URL string // the API's base URL, http://listen

	host   *Host
	listen string
	args   []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  bytes.Buffer  // the server's output, for a failure's message
}

// StartPrometheus runs Prometheus in h, listening on listen (host:port)
// and scraping http://TARGET/metrics of each target every scrape, with its
// storage in a temporary directory. It returns once the server is ready
// and stops it when the test ends. The binary comes from scripts/deps.sh:
// without it the test fails, as it must not pass unnoticed.
func StartPrometheus(t testing.TB, h *Host, listen string, scrape time.Duration, targets ...string) *Prometheus {
	t.Helper()
	SkipUnlessRoot(t)
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("finding prometheus: %v (scripts/deps.sh installs Debian's package)", err)
	}
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = fmt.Sprintf("%q", tg)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
scrape_configs:
  - job_name: backend
    static_configs:
      - targets: [%[2]s]
`, scrape, strings.Join(quoted, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &Prometheus{
		URL:    "http://" + listen,
		host:   h,
		listen: listen,
		args: []string{bin, "--config.file=" + filepath.Join(dir, "prometheus.yml"),
			"--storage.tsdb.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + listen, "--log.level=warn"},
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping prometheus: %v", err)
		}
	})
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Start starts the server again after Stop, on the same storage, and
// returns once it is ready. It fails if the server runs.
func (p *Prometheus) Start() error {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return errors.New("starting prometheus: it is running")
	}
	p.log.Reset()
	cmd := p.host.Command(p.args[0], p.args[1:]...)
	out := &lockedWriter{mu: &p.mu, w: &p.log}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("starting prometheus: %w", err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	go func() { cmd.Wait(); close(done) }()
	return p.waitReady(done)
}

// waitReady polls /-/ready, which answers 200 once the storage is open
// and the server takes queries.
func (p *Prometheus) waitReady(done chan struct{}) error {
	c := p.host.HTTPClient()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("prometheus exited before it was ready: %s", p.output())
		default:
		}
		resp, err := c.Get(p.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("prometheus not ready at %s within a minute (last: %v): %s", p.URL, err, p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *Prometheus) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Stop stops the server, if it runs, and waits for it to exit. A server
// that ignores SIGTERM for 30 seconds is killed.
func (p *Prometheus) Stop() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("prometheus ignored SIGTERM for 30s: %s", p.output())
	}
	return nil
}

// lockedWriter serialises the server's stdout and stderr into one buffer.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
