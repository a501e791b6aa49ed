package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// State changes travel as fixed-size messages, like everything else: a
// kind byte, a value byte, the check id's length and the id. A shift
// holds the region where the check id goes, and after the kind and value
// the region's length, the reason's length, the duration in milliseconds,
// then the region and the reason.
const (
	// StateSize is the payload length of every KindState message.
	StateSize = 96
	// MaxStateID is the longest check id a state message holds.
	MaxStateID = StateSize - 8
	// MaxShiftText is the most a shift's region and reason hold together.
	MaxShiftText = StateSize - shiftText
)

// shiftText is where a shift's region starts.
const shiftText = 16

// StateKind is what a state change sets.
type StateKind uint8

// The state kinds. Values travel in every message and are never
// renumbered.
const (
	StateAdmin    StateKind = 1 // Value: 0 auto, 1 up, 2 down
	StateExternal StateKind = 2 // Value: 0 down, 1 up
	StateShift    StateKind = 3 // Value: 0 cancel, 1 shift away for Duration
)

// StateChange is an admin or external change of one check's state, or a
// traffic shift of a region.
type StateChange struct {
	Kind  StateKind
	Value uint8
	Check string // the region, for StateShift
	// A shift's reason and how long it lasts from its arrival: each
	// receiver times it by its own clock, so a sender's clock does not
	// matter.
	Reason   string
	Duration time.Duration // whole milliseconds, up to 2^32-1
}

// Encode is the change as a KindState payload.
func (s StateChange) Encode() ([]byte, error) {
	if s.Kind == StateShift {
		return s.encodeShift()
	}
	if len(s.Check) > MaxStateID {
		return nil, fmt.Errorf("check id %q is longer than the %d bytes a state message holds", s.Check, MaxStateID)
	}
	b := make([]byte, StateSize)
	b[0], b[1] = byte(s.Kind), s.Value
	binary.LittleEndian.PutUint16(b[2:], uint16(len(s.Check)))
	copy(b[8:], s.Check)
	return b, nil
}

func (s StateChange) encodeShift() ([]byte, error) {
	ms := s.Duration.Milliseconds()
	switch {
	case len(s.Check)+len(s.Reason) > MaxShiftText:
		return nil, fmt.Errorf("region %q and reason %q are longer than the %d bytes a state message holds", s.Check, s.Reason, MaxShiftText)
	case ms < 0 || ms > 1<<32-1 || time.Duration(ms)*time.Millisecond != s.Duration:
		return nil, fmt.Errorf("a shift of %s is not whole milliseconds up to 2^32-1", s.Duration)
	}
	b := make([]byte, StateSize)
	b[0], b[1] = byte(s.Kind), s.Value
	binary.LittleEndian.PutUint16(b[2:], uint16(len(s.Check)))
	binary.LittleEndian.PutUint16(b[4:], uint16(len(s.Reason)))
	binary.LittleEndian.PutUint32(b[8:], uint32(ms))
	copy(b[shiftText:], s.Check)
	copy(b[shiftText+len(s.Check):], s.Reason)
	return b, nil
}

// DecodeState reads a KindState payload. The value is not checked against
// the kind: the receiver knows which values it takes.
func DecodeState(b []byte) (StateChange, error) {
	if len(b) != StateSize {
		return StateChange{}, fmt.Errorf("state message of %d bytes, want %d", len(b), StateSize)
	}
	if StateKind(b[0]) == StateShift {
		n, m := int(binary.LittleEndian.Uint16(b[2:])), int(binary.LittleEndian.Uint16(b[4:]))
		if n+m > MaxShiftText {
			return StateChange{}, errors.New("malformed state message")
		}
		return StateChange{Kind: StateShift, Value: b[1], Check: string(b[shiftText : shiftText+n]), Reason: string(b[shiftText+n : shiftText+n+m]),
			Duration: time.Duration(binary.LittleEndian.Uint32(b[8:])) * time.Millisecond}, nil
	}
	n := int(binary.LittleEndian.Uint16(b[2:]))
	if k := StateKind(b[0]); n > MaxStateID || (k != StateAdmin && k != StateExternal) {
		return StateChange{}, errors.New("malformed state message")
	}
	return StateChange{Kind: StateKind(b[0]), Value: b[1], Check: string(b[8 : 8+n])}, nil
}
