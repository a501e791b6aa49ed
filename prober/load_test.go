package prober

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// backendEnv makes the test binary serve the load backends instead of
// running tests, so the benchmark's backends run in another process, on
// another core, and stay out of the prober's CPU time.
const backendEnv = "PROBER_LOAD_BACKENDS"

func TestMain(m *testing.M) {
	if os.Getenv(backendEnv) != "" {
		serveLoadBackends()
		return
	}
	os.Exit(m.Run())
}

// serveLoadBackends runs a TCP backend and an HTTP backend that answers
// 200 "ok", prints their addresses and serves until stdin closes. The TCP
// backend waits for the client to speak or leave, as real servers do, so
// the check's RST ends the connection.
func serveLoadBackends() {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	web, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	go http.Serve(web, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	fmt.Println(tcp.Addr(), web.Addr())
	io.Copy(io.Discard, os.Stdin)
}

// startLoadBackends starts the backend process, on CPU 1 when taskset and a
// second CPU are there, and returns the TCP and HTTP addresses. The CPU
// count comes from sysfs: runtime.NumCPU counts only the CPUs this process
// may use, which is one under taskset -c 0.
func startLoadBackends(b *testing.B) (tcp, web netip.AddrPort) {
	name, args := os.Args[0], []string{"-test.run=^$"}
	online, _ := os.ReadFile("/sys/devices/system/cpu/online")
	if _, err := exec.LookPath("taskset"); err == nil && strings.TrimSpace(string(online)) != "0" {
		name, args = "taskset", append([]string{"-c", "1", name}, args...)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), backendEnv+"=1", "GOMAXPROCS=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("reading backend addresses: %v", err)
	}
	f := strings.Fields(line)
	return netip.MustParseAddrPort(f[0]), netip.MustParseAddrPort(f[1])
}

// The load benchmarks offer a fixed rate of checks for a few seconds and
// report what was delivered and the prober process's CPU per check. Run
// them on one core with the backends on the other:
//
//	taskset -c 0 go test ./prober -run '^$' -bench Load -benchtime 1x -cpu 1
func BenchmarkLoadTCP(b *testing.B) {
	tcp, _ := startLoadBackends(b)
	for _, rate := range []int{10_000, 15_000, 20_000} {
		b.Run(fmt.Sprint(rate), func(b *testing.B) {
			benchLoad(b, checkOf(TCP, tcp), rate)
		})
	}
}

func BenchmarkLoadHTTP(b *testing.B) {
	_, web := startLoadBackends(b)
	for _, rate := range []int{5_000, 7_500, 10_000} {
		b.Run(fmt.Sprint(rate), func(b *testing.B) {
			benchLoad(b, checkOf(HTTP, web, func(c *Spec) { c.ExpectBody = "ok" }), rate)
		})
	}
}

func benchLoad(b *testing.B, s Spec, rate int) {
	s.Interval = time.Second
	for range b.N {
		r, err := Load(context.Background(), LoadOptions{
			Spec: s, Probes: rate, Warmup: 1500 * time.Millisecond, Duration: 3 * time.Second,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Log(r)
		b.ReportMetric(r.Rate(), "checks/s")
		b.ReportMetric(float64(r.CPUPerCheck().Nanoseconds())/1000, "cpu-µs/check")
		b.ReportMetric(100*r.CPU.Seconds()/r.Elapsed.Seconds(), "core-%")
		if len(r.Failed) > 0 {
			b.Errorf("failures: %v", r.Failed)
		}
	}
}
