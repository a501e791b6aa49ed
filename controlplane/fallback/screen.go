package fallback

import (
	"errors"
	"net"
	"time"

	"github.com/miekg/dns"
)

const headerLen = 12

// accept lets every query through to the handler and drops responses
// without a reply, so that no reply reflects one.
func (s *Server) accept(h dns.Header) dns.MsgAcceptAction {
	if h.Bits&(1<<15) != 0 { // QR
		s.opts.Observe(OutcomeDropped, 0)
		return dns.MsgIgnore
	}
	return dns.MsgAccept
}

// invalid sees the messages miekg/dns drops: those shorter than a header.
// screen leaves it nothing else.
func (s *Server) invalid([]byte, error) { s.opts.Observe(OutcomeDropped, 0) }

// screen decorates the TCP server's reader so that every message it passes
// on parses; serveUDP does the same for datagrams. See the package
// documentation.
func screen(r dns.Reader) dns.Reader { return screened{r} }

type screened struct{ dns.Reader }

func (r screened) ReadTCP(c net.Conn, timeout time.Duration) ([]byte, error) {
	m, err := r.Reader.ReadTCP(c, timeout)
	return wellFormed(m), err
}

// wellFormed returns m if it parses, and else a new message of m's header
// with every count zero. It leaves alone what miekg/dns drops by itself:
// messages shorter than a header, and responses.
func wellFormed(m []byte) []byte {
	if len(m) < headerLen || m[2]&0x80 != 0 {
		return m
	}
	var msg dns.Msg
	if parse(m, &msg) == nil {
		return m
	}
	return bareHeader(m)
}

// bareHeader is m's header with every count zero.
func bareHeader(m []byte) []byte {
	h := make([]byte, headerLen)
	copy(h, m[:4])
	return h
}

var errCounts = errors.New("fewer records than the header counts")

// parse unpacks m into msg, more strictly than dns.Msg.Unpack does, which
// accepts a question cut short after its name and fewer records than
// counted.
func parse(m []byte, msg *dns.Msg) error {
	qd := int(m[4])<<8 | int(m[5])
	off := headerLen
	for range qd {
		_, end, err := dns.UnpackDomainName(m, off)
		if err != nil {
			return err
		}
		if off = end + 4; off > len(m) { // type and class
			return errCounts
		}
	}
	if err := msg.Unpack(m); err != nil {
		return err
	}
	an := int(m[6])<<8 | int(m[7])
	ns := int(m[8])<<8 | int(m[9])
	ar := int(m[10])<<8 | int(m[11])
	if len(msg.Answer) != an || len(msg.Ns) != ns || len(msg.Extra) != ar {
		return errCounts
	}
	return nil
}
