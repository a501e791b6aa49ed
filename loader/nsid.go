package loader

import (
	"encoding/binary"
	"fmt"

	"github.com/steadydns/steadydns/bpf"
)

// MaxNSID is the longest NSID value the program carries (bpf's NSID_MAX).
const MaxNSID = int(bpf.SteadydnsLimitsNSID_MAX)

// optNSID is the EDNS option code of NSID (RFC 5001).
const optNSID = 3

// NSIDOption is the program's NSID option for value: the option's bytes
// as replies carry them and their sum (struct nsid_option in
// bpf/types.h). An empty value turns NSID off.
func NSIDOption(value []byte) (bpf.SteadydnsNsidOption, error) {
	var o bpf.SteadydnsNsidOption
	if len(value) == 0 {
		return o, nil
	}
	if len(value) > MaxNSID {
		return o, fmt.Errorf("setting the nsid: %d bytes, more than %d", len(value), MaxNSID)
	}
	binary.BigEndian.PutUint16(o.Opt[0:], optNSID)
	binary.BigEndian.PutUint16(o.Opt[2:], uint16(len(value)))
	copy(o.Opt[4:], value)
	o.Len = uint32(4 + len(value))
	// From the option's second byte, in little-endian 16-bit words: the
	// program adds it to a sum of memory words taken in host order, and
	// the option's first byte (0) falls in the OPT's last word.
	for i := 1; i < int(o.Len); i += 2 {
		o.Sum += uint32(o.Opt[i]) | uint32(o.Opt[i+1])<<8
	}
	return o, nil
}

func setNSID(vars *bpf.SteadydnsVariableSpecs, value []byte) error {
	o, err := NSIDOption(value)
	if err != nil {
		return err
	}
	if err := vars.Nsid.Set(o); err != nil {
		return fmt.Errorf("setting nsid: %w", err)
	}
	return nil
}
