package compliance

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/miekg/dns"
)

// Timeout bounds one exchange.
const Timeout = 2 * time.Second

// Result is one case put to one server.
type Result struct {
	Case string
	// Tags are what genreport would report wrong; none when it passed.
	Tags []string
	// Error says why no reply came; the case then fails. A string, so
	// results survive JSON (the benchmark keeps them).
	Error string `json:",omitempty"`
}

// OK reports whether the case passed.
func (r Result) OK() bool { return r.Error == "" && len(r.Tags) == 0 }

func (r Result) String() string {
	switch {
	case r.Error != "":
		return fmt.Sprintf("%s: %s", r.Case, r.Error)
	case len(r.Tags) > 0:
		return fmt.Sprintf("%s: %v", r.Case, r.Tags)
	}
	return r.Case + ": ok"
}

// Run puts c to the server at addr (host:port) for zone, asking for qtype
// instead of the case's type when it is non-zero. As genreport does, it
// sends over TCP when the case says so, and retries a truncated UDP reply
// over TCP unless the case judges it as it is.
func (c Case) Run(addr, zone string, qtype uint16) Result {
	q := c.Query(zone, qtype, dns.Id())
	raw, err := q.Pack()
	if err != nil {
		return Result{Case: c.Name, Error: fmt.Sprintf("packing the query: %v", err)}
	}
	network := "udp"
	if c.TCP {
		network = "tcp"
	}
	reply, err := Exchange(network, addr, raw)
	if err == nil && network == "udp" && !c.IgnoreTC && len(reply) > 2 && reply[2]&0x02 != 0 {
		reply, err = Exchange("tcp", addr, raw)
	}
	if err != nil {
		return Result{Case: c.Name, Error: err.Error()}
	}
	if len(reply) < 2 || binary.BigEndian.Uint16(reply) != q.Id {
		return Result{Case: c.Name, Tags: []string{"id-mismatch"}}
	}
	return Result{Case: c.Name, Tags: Check(c, zone, qtype, reply)}
}

// RunAll puts every case to the server at addr.
func RunAll(addr, zone string, qtype uint16) []Result {
	out := make([]Result, len(Cases))
	for i, c := range Cases {
		out[i] = c.Run(addr, zone, qtype)
	}
	return out
}

// Exchange sends the message raw to addr over network ("udp" or "tcp")
// and returns the raw reply.
func Exchange(network, addr string, raw []byte) ([]byte, error) {
	conn, err := net.DialTimeout(network, addr, Timeout)
	if err != nil {
		return nil, fmt.Errorf("dialling %s %s: %w", network, addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(Timeout)); err != nil {
		return nil, fmt.Errorf("setting a deadline: %w", err)
	}
	if network == "tcp" {
		raw = append(binary.BigEndian.AppendUint16(nil, uint16(len(raw))), raw...)
	}
	if _, err := conn.Write(raw); err != nil {
		return nil, fmt.Errorf("sending over %s: %w", network, err)
	}
	if network == "tcp" {
		var n uint16
		if err := binary.Read(conn, binary.BigEndian, &n); err != nil {
			return nil, fmt.Errorf("reading the length over tcp: %w", err)
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(conn, buf); err != nil {
			return nil, fmt.Errorf("reading the reply over tcp: %w", err)
		}
		return buf, nil
	}
	buf := make([]byte, dns.MaxMsgSize)
	n, err := conn.Read(buf)
	if err != nil {
		return nil, fmt.Errorf("reading the reply over udp: %w", err)
	}
	return buf[:n], nil
}
