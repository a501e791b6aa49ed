// Package packet builds and checks Ethernet/IP/UDP frames carrying DNS
// messages, for the data-plane tests and benchmarks that feed the XDP
// program through BPF_PROG_RUN.
package packet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Checksum says how a built frame's UDP checksum field is filled.
type Checksum int

const (
	Full    Checksum = iota // the correct checksum
	Partial                 // only the pseudo-header sum, as CHECKSUM_PARTIAL leaves it on a veth
	Zero                    // 0: no checksum (IPv4 only)
)

// Frame describes a frame to build.
type Frame struct {
	Src, Dst         netip.AddrPort
	SrcMAC, DstMAC   [6]byte
	Payload          []byte
	Checksum         Checksum
	IPv4Options      []byte // appended after the IPv4 header (multiple of 4 bytes)
	IPv4Frag         uint16 // flags+offset field
	IPv6ExtHopByHop  bool   // insert an 8-byte hop-by-hop header
	EthernetTrailing int    // padding bytes after the IP packet
}

const (
	etherIPv4 = 0x0800
	etherIPv6 = 0x86dd
	protoUDP  = 17
)

// Build returns the frame's bytes.
func Build(f Frame) []byte {
	udpLen := 8 + len(f.Payload)
	udp := make([]byte, udpLen)
	binary.BigEndian.PutUint16(udp[0:], f.Src.Port())
	binary.BigEndian.PutUint16(udp[2:], f.Dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	copy(udp[8:], f.Payload)

	var b []byte
	eth := make([]byte, 14)
	copy(eth[0:], f.DstMAC[:])
	copy(eth[6:], f.SrcMAC[:])
	if f.Src.Addr().Is4() {
		binary.BigEndian.PutUint16(eth[12:], etherIPv4)
		ihl := 20 + len(f.IPv4Options)
		ip := make([]byte, ihl)
		ip[0] = 0x40 | byte(ihl/4)
		binary.BigEndian.PutUint16(ip[2:], uint16(ihl+udpLen))
		binary.BigEndian.PutUint16(ip[6:], f.IPv4Frag)
		ip[8] = 64
		ip[9] = protoUDP
		s, d := f.Src.Addr().As4(), f.Dst.Addr().As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		copy(ip[20:], f.IPv4Options)
		binary.BigEndian.PutUint16(ip[10:], ^fold(sum(ip, 0)))
		setUDPChecksum(udp, pseudo4(s[:], d[:], udpLen), f.Checksum)
		b = append(append(eth, ip...), udp...)
	} else {
		binary.BigEndian.PutUint16(eth[12:], etherIPv6)
		ip := make([]byte, 40)
		ip[0] = 0x60
		next := byte(protoUDP)
		var ext []byte
		if f.IPv6ExtHopByHop {
			next = 0
			ext = []byte{protoUDP, 0, 1, 4, 0, 0, 0, 0} // PadN option
		}
		binary.BigEndian.PutUint16(ip[4:], uint16(len(ext)+udpLen))
		ip[6] = next
		ip[7] = 64
		s, d := f.Src.Addr().As16(), f.Dst.Addr().As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		setUDPChecksum(udp, pseudo6(s[:], d[:], udpLen), f.Checksum)
		b = append(append(append(eth, ip...), ext...), udp...)
	}
	return append(b, make([]byte, f.EthernetTrailing)...)
}

func setUDPChecksum(udp []byte, pseudo uint32, c Checksum) {
	switch c {
	case Full:
		v := ^fold(sum(udp, pseudo))
		if v == 0 {
			v = 0xffff
		}
		binary.BigEndian.PutUint16(udp[6:], v)
	case Partial:
		binary.BigEndian.PutUint16(udp[6:], fold(pseudo))
	}
}

// Reply is a parsed frame.
type Reply struct {
	Src, Dst       netip.AddrPort
	SrcMAC, DstMAC [6]byte
	TTL            uint8
	Payload        []byte
}

// Parse checks a frame's lengths and its IPv4 header and UDP checksums,
// computed from scratch, and returns its addresses and payload.
func Parse(b []byte) (*Reply, error) {
	if len(b) < 14 {
		return nil, errors.New("parsing frame: shorter than an ethernet header")
	}
	r := &Reply{}
	copy(r.DstMAC[:], b[0:])
	copy(r.SrcMAC[:], b[6:])
	var udp []byte
	var pseudo uint32
	switch binary.BigEndian.Uint16(b[12:]) {
	case etherIPv4:
		ip := b[14:]
		if len(ip) < 20 || ip[0]>>4 != 4 {
			return nil, errors.New("parsing ipv4: bad header")
		}
		ihl := int(ip[0]&0xf) * 4
		total := int(binary.BigEndian.Uint16(ip[2:]))
		if total > len(ip) || total < ihl+8 {
			return nil, fmt.Errorf("parsing ipv4: total length %d of %d bytes", total, len(ip))
		}
		if fold(sum(ip[:ihl], 0)) != 0xffff {
			return nil, fmt.Errorf("parsing ipv4: bad header checksum %#04x", binary.BigEndian.Uint16(ip[10:]))
		}
		if ip[9] != protoUDP {
			return nil, fmt.Errorf("parsing ipv4: protocol %d", ip[9])
		}
		r.TTL = ip[8]
		s, d := netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		udp = ip[ihl:total]
		pseudo = pseudo4(ip[12:16], ip[16:20], len(udp))
		r.Src, r.Dst = netip.AddrPortFrom(s, 0), netip.AddrPortFrom(d, 0)
	case etherIPv6:
		ip := b[14:]
		if len(ip) < 40 || ip[0]>>4 != 6 {
			return nil, errors.New("parsing ipv6: bad header")
		}
		plen := int(binary.BigEndian.Uint16(ip[4:]))
		if 40+plen > len(ip) || plen < 8 || ip[6] != protoUDP {
			return nil, fmt.Errorf("parsing ipv6: payload length %d next header %d", plen, ip[6])
		}
		r.TTL = ip[7]
		s, d := netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		udp = ip[40 : 40+plen]
		pseudo = pseudo6(ip[8:24], ip[24:40], len(udp))
		r.Src, r.Dst = netip.AddrPortFrom(s, 0), netip.AddrPortFrom(d, 0)
	default:
		return nil, errors.New("parsing frame: not ip")
	}
	if int(binary.BigEndian.Uint16(udp[4:])) != len(udp) {
		return nil, fmt.Errorf("parsing udp: length %d in %d bytes", binary.BigEndian.Uint16(udp[4:]), len(udp))
	}
	c := binary.BigEndian.Uint16(udp[6:])
	if c == 0 && r.Src.Addr().Is6() {
		return nil, errors.New("parsing udp: zero checksum over ipv6")
	}
	if c != 0 && fold(sum(udp, pseudo)) != 0xffff {
		return nil, fmt.Errorf("parsing udp: bad checksum %#04x", c)
	}
	r.Src = netip.AddrPortFrom(r.Src.Addr(), binary.BigEndian.Uint16(udp[0:]))
	r.Dst = netip.AddrPortFrom(r.Dst.Addr(), binary.BigEndian.Uint16(udp[2:]))
	r.Payload = udp[8:]
	return r, nil
}

func pseudo4(s, d []byte, udpLen int) uint32 {
	p := make([]byte, 12)
	copy(p, s)
	copy(p[4:], d)
	p[9] = protoUDP
	binary.BigEndian.PutUint16(p[10:], uint16(udpLen))
	return sum(p, 0)
}

func pseudo6(s, d []byte, udpLen int) uint32 {
	p := make([]byte, 40)
	copy(p, s)
	copy(p[16:], d)
	binary.BigEndian.PutUint32(p[32:], uint32(udpLen))
	p[39] = protoUDP
	return sum(p, 0)
}

// sum adds b as big-endian 16-bit words to s, without folding.
func sum(b []byte, s uint32) uint32 {
	acc := uint64(s)
	for i := 0; i+1 < len(b); i += 2 {
		acc += uint64(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		acc += uint64(b[len(b)-1]) << 8
	}
	for acc>>32 != 0 {
		acc = acc&0xffffffff + acc>>32
	}
	return uint32(acc)
}

func fold(s uint32) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
