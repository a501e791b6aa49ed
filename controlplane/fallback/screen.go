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

// dropOptions returns a copy of m whose OPT keeps only ECS, NSID and a
// well-formed edns-tcp-keepalive, the options steadydns implements, or nil when m has no other option or
// cannot be walked. miekg/dns refuses a whole message for the content of an option
// it knows (LLQ, EXPIRE, EDE…), which a server that does not implement
// the option must ignore (RFC 6891 §6.1.2), as XDP does.
func dropOptions(m []byte) []byte {
	be := func(off int) int { return int(m[off])<<8 | int(m[off+1]) }
	off := headerLen
	for range be(4) {
		_, end, err := dns.UnpackDomainName(m, off)
		if err != nil {
			return nil
		}
		off = end + 4
	}
	for range be(6) + be(8) + be(10) {
		_, end, err := dns.UnpackDomainName(m, off)
		if err != nil || end+10 > len(m) {
			return nil
		}
		rdata, rend := end+10, end+10+be(end+8)
		if rend > len(m) {
			return nil
		}
		if be(end) == int(dns.TypeOPT) {
			var kept []byte
			for o := rdata; o < rend; {
				if o+4 > rend || o+4+be(o+2) > rend {
					return nil
				}
				next := o + 4 + be(o+2)
				switch code, l := be(o), be(o+2); {
				case code == int(dns.EDNS0SUBNET), code == int(dns.EDNS0NSID),
					code == int(dns.EDNS0TCPKEEPALIVE) && (l == 0 || l == 2):
					kept = append(kept, m[o:next]...)
				}
				o = next
			}
			if len(kept) == rend-rdata {
				return nil
			}
			out := make([]byte, 0, len(m))
			out = append(out, m[:end+8]...)
			out = append(out, byte(len(kept)>>8), byte(len(kept)))
			out = append(out, kept...)
			return append(out, m[rend:]...)
		}
		off = rend
	}
	return nil
}

// bareHeader is m's header with every count zero.
func bareHeader(m []byte) []byte {
	h := make([]byte, headerLen)
	copy(h, m[:4])
	return h
}

var errCounts = errors.New("fewer records than the header counts")

var errName = errors.New("a name runs past the message or has a reserved label type")

// nameEnd returns the offset just past the name at off in m, as
// dns.UnpackDomainName does, without building the name: Unpack builds it
// once and checks the rest (pointer loops, length).
func nameEnd(m []byte, off int) (int, error) {
	for off < len(m) {
		c := int(m[off])
		switch c & 0xC0 {
		case 0x00:
			if c == 0 {
				return off + 1, nil
			}
			off += 1 + c
		case 0xC0: // a compression pointer ends the name
			if off+1 >= len(m) {
				return 0, errName
			}
			return off + 2, nil
		default:
			return 0, errName
		}
	}
	return 0, errName
}

// parse unpacks m into msg, more strictly than dns.Msg.Unpack does, which
// accepts a question cut short after its name and fewer records than
// counted.
func parse(m []byte, msg *dns.Msg) error {
	qd := int(m[4])<<8 | int(m[5])
	off := headerLen
	for range qd {
		end, err := nameEnd(m, off)
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
