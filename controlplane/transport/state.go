package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// State changes travel as fixed-size messages, like everything else: a
// kind byte, a value byte, the check id's length and the id.
const (
	// StateSize is the payload length of every KindState message.
	StateSize = 96
	// MaxStateID is the longest check id a state message holds.
	MaxStateID = StateSize - 8
)

// StateKind is what a state change sets.
type StateKind uint8

// The state kinds. Values travel in every message and are never
// renumbered.
const (
	StateAdmin    StateKind = 1 // Value: 0 auto, 1 up, 2 down
	StateExternal StateKind = 2 // Value: 0 down, 1 up
)

// StateChange is an admin or external change of one check's state.
type StateChange struct {
	Kind  StateKind
	Value uint8
	Check string
}

// Encode is the change as a KindState payload.
func (s StateChange) Encode() ([]byte, error) {
	if len(s.Check) > MaxStateID {
		return nil, fmt.Errorf("check id %q is longer than the %d bytes a state message holds", s.Check, MaxStateID)
	}
	b := make([]byte, StateSize)
	b[0], b[1] = byte(s.Kind), s.Value
	binary.LittleEndian.PutUint16(b[2:], uint16(len(s.Check)))
	copy(b[8:], s.Check)
	return b, nil
}

// DecodeState reads a KindState payload. The value is not checked against
// the kind: the receiver knows which values it takes.
func DecodeState(b []byte) (StateChange, error) {
	if len(b) != StateSize {
		return StateChange{}, fmt.Errorf("state message of %d bytes, want %d", len(b), StateSize)
	}
	n := int(binary.LittleEndian.Uint16(b[2:]))
	if k := StateKind(b[0]); n > MaxStateID || (k != StateAdmin && k != StateExternal) {
		return StateChange{}, errors.New("malformed state message")
	}
	return StateChange{Kind: StateKind(b[0]), Value: b[1], Check: string(b[8 : 8+n])}, nil
}
