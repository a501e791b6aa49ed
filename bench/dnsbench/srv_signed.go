package dnsbench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// waitSigned returns once a pass of DO=1 queries over every name, A and
// AAAA, leaves steadydns's count of DO=1 queries XDP passed to the
// fallback unchanged: every set's signatures are then in XDP's map, and
// the load run measures XDP's signed answers, not the fallback's. The API
// may come up after the first answers, so until then the pass is retried.
func (r *rig) waitSigned(ctx context.Context, p *proc) error {
	deadline := time.Now().Add(2 * time.Minute)
	var passed uint64
	for {
		before, err := r.passedDNSSEC()
		if err == nil {
			for i := range r.zone.names {
				for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
					q := new(dns.Msg).SetQuestion(nameOf(i), qt)
					q.SetEdns0(1232, true)
					r.exchange(q) // a lost reply shows as a pass or not at all
				}
			}
			var after uint64
			if after, err = r.passedDNSSEC(); err == nil {
				if after == before {
					return nil
				}
				passed = after - before
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %v; log %s:\n%s", p.name, p.err, p.log, tail(p.log))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: XDP still passes DO=1 queries to the fallback after 2 minutes (%d in the last pass over %d names; %v)", p.name, passed, r.zone.names, err)
		}
		time.Sleep(time.Second)
	}
}

// passedDNSSEC reads steadydns_xdp_passed_total{reason="dnssec"} from the
// API in the edge namespace (steadydnsConfig's api address).
func (r *rig) passedDNSSEC() (uint64, error) {
	var conn net.Conn
	err := r.env.Edge.Do(func() error {
		var err error
		conn, err = net.DialTimeout("tcp", "127.0.0.1:9153", 5*time.Second)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reading steadydns's metrics: %w", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		return 0, fmt.Errorf("reading steadydns's metrics: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, fmt.Errorf("reading steadydns's metrics: %w", err)
	}
	defer resp.Body.Close()
	return passedDNSSECIn(bufio.NewScanner(resp.Body))
}

// passedDNSSECIn finds the count in Prometheus's text format; a program
// that never passed a DO=1 query has no such series yet.
func passedDNSSECIn(sc *bufio.Scanner) (uint64, error) {
	const series = `steadydns_xdp_passed_total{reason="dnssec"} `
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("reading %s: %w", strings.TrimSpace(series), err)
			}
			return uint64(n), nil
		}
	}
	return 0, sc.Err()
}
