package fallback

import (
	"errors"

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

// invalid sees the messages dropped for being shorter than a header; a
// longer one that does not parse is answered from its bare header.
func (s *Server) invalid([]byte, error) { s.opts.Observe(OutcomeDropped, 0) }

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
