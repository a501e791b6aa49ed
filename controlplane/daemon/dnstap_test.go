package daemon_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	dt "github.com/dnstap/golang-dnstap"
	"github.com/miekg/dns"
	"google.golang.org/protobuf/proto"

	"github.com/steadydns/steadydns/testenv"
)

const dnstapConfig = `server:
  interfaces: [%s]
  listen: ["198.18.0.2:53"]
  api: 127.0.0.1:9153
  bpffs: %s
  dnstap: { socket: %s, sample: 1 }
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  web1: { type: tcp, target: 198.18.1.1, port: 80, interval: 1m }
records:
  - name: www.example.test.
    type: A
    answers: [{value: 198.18.1.1, check: web1}]
aggregation:
  push_interval: 100ms
`

// TestDnstap: every query the fallback answers, over UDP and TCP, and at
// sample: 1 every one XDP answers, reaches a Frame Streams reader
// (fstrm_capture) as AUTH_QUERY and AUTH_RESPONSE, which dnstap-ldns
// decodes to the names, types and rcodes sent; XDP's, and only those,
// are marked sample=1/1.
func TestDnstap(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	for _, tool := range []string{"fstrm_capture", "dnstap-ldns"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (scripts/deps.sh installs it): %v", tool, err)
		}
	}
	dir := t.TempDir()
	sock, capture := filepath.Join(dir, "tap.sock"), filepath.Join(dir, "tap.fstrm")
	reader := exec.Command("fstrm_capture", "-t", "protobuf:dnstap.Dnstap", "-u", sock, "-w", capture)
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			reader.Process.Kill()
			reader.Wait()
		}
	})
	waitFile(t, sock)

	env := testenv.Start(t, testenv.Options{})
	e := serve(t, env, func(link, pins string) string { return fmt.Sprintf(dnstapConfig, link, pins, sock) })
	// XDP answers A and AAAA of the table over UDP; the fallback the rest.
	asked := []struct {
		proto, name string
		qtype       uint16
		rcode       string
		xdp         bool
	}{
		{"udp", "example.test.", dns.TypeSOA, "NOERROR", false},
		{"udp", "nope.example.test.", dns.TypeA, "NXDOMAIN", false},
		{"tcp", "www.example.test.", dns.TypeA, "NOERROR", false},
		{"tcp", "example.test.", dns.TypeNS, "NOERROR", false},
		{"udp", "www.example.test.", dns.TypeA, "NOERROR", true},
	}
	for _, a := range asked {
		e.ask(t, a.proto, "198.18.0.2:53", q(a.name, a.qtype))
	}
	// The daemon's stop sends what is queued; the reader writes its file
	// out when it stops.
	if err := e.d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := reader.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	reader.Wait()
	stopped = true
	out, err := exec.Command("dnstap-ldns", "-q", "-r", capture).CombinedOutput()
	if err != nil {
		t.Fatalf("dnstap-ldns: %v\n%s", err, out)
	}
	text := string(out)
	for _, a := range asked {
		proto := map[string]string{"udp": "UDP", "tcp": "TCP"}[a.proto]
		for _, kind := range []string{"AQ", "AR"} {
			want := fmt.Sprintf(`%s 198.18.0.1 %s .* "%s" IN %s`, kind, proto, a.name, dns.TypeToString[a.qtype])
			if !matchLine(text, want) {
				t.Errorf("no %s line for %s %s over %s: want %q in\n%s", kind, a.name, dns.TypeToString[a.qtype], a.proto, want, text)
			}
		}
	}
	if n := strings.Count(text, " AQ "); n != len(asked) {
		t.Errorf("%d queries logged, want the %d sent:\n%s", n, len(asked), text)
	}
	// dnstap-ldns does not print the extra field: the Go library reads it.
	in, err := dt.NewFrameStreamInputFromFilename(capture)
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan []byte, 64)
	go func() { in.ReadInto(frames); close(frames) }()
	marked := 0
	for b := range frames {
		var d dt.Dnstap
		if err := proto.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		var m dns.Msg
		if err := m.Unpack(d.GetMessage().GetQueryMessage()); err != nil {
			t.Fatal(err)
		}
		xdp := d.GetMessage().GetSocketProtocol() == dt.SocketProtocol_UDP && m.Question[0].Name == "www.example.test." && m.Question[0].Qtype == dns.TypeA
		want := map[bool]string{true: "sample=1/1"}[xdp]
		if string(d.GetExtra()) != want {
			t.Errorf("%v %s over %v: extra %q, want %q", d.GetMessage().GetType(), m.Question[0].String(), d.GetMessage().GetSocketProtocol(), d.GetExtra(), want)
		}
		if xdp {
			marked++
		}
	}
	if marked != 2 {
		t.Errorf("%d messages of XDP's answer marked sampled, want its query and its response", marked)
	}
}

func matchLine(text, re string) bool {
	for _, line := range strings.Split(text, "\n") {
		if regexp.MustCompile(re).MatchString(line) {
			return true
		}
	}
	return false
}

// waitFile waits for path to exist, as a reader makes its socket.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 10s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
