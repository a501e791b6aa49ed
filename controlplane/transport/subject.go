package transport

import (
	"fmt"
	"slices"
	"strings"
)

// Kind is what a message carries. Each kind has its own subjects, its own
// reassembler and its own permissions.
type Kind uint8

// The kinds. Values travel in every chunk header and are never renumbered.
const (
	KindFrame Kind = 1 // prober → aggregators: a result frame (prober.Encode)
	KindTable Kind = 2 // aggregator → edges: the health table
	KindState Kind = 3 // edge → aggregators: admin and external state changes
)

func (k Kind) String() string {
	switch k {
	case KindFrame:
		return "frame"
	case KindTable:
		return "table"
	case KindState:
		return "state"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k >= KindFrame && k <= KindState }

// Subjects. A frame or table of kind K from sender S of cell C goes to
// "steadydns.K.C.S"; a state change, which every aggregator of every cell
// takes, to "steadydns.state.S". Receivers subscribe with wildcards and
// learn the cell and sender from the subject; the sender must equal the
// one in the chunk header.
const (
	SubjectPrefix = "steadydns"

	// AllCells, as a cell in SubjectAll and Subscribe, matches every cell.
	AllCells = "*"

	// ConfigBucket is the key-value bucket that holds the fleet's config,
	// and ConfigKey the key its latest version is stored under.
	ConfigBucket = "steadydns-config"
	ConfigKey    = "fleet"
)

// celled reports whether messages of kind k belong to a cell: frames go
// only to their cell's aggregators, tables come from a cell's aggregators.
func (k Kind) celled() bool { return k == KindFrame || k == KindTable }

// Subject is the subject sender, of cell, publishes messages of kind k on.
// A state change's subject has no cell.
func Subject(k Kind, cell, sender string) string {
	if !k.celled() {
		return SubjectPrefix + "." + k.String() + "." + sender
	}
	return SubjectPrefix + "." + k.String() + "." + cell + "." + sender
}

// SubjectAll is the subject that matches every sender's messages of kind k
// in cell, or in every cell with AllCells.
func SubjectAll(k Kind, cell string) string { return Subject(k, cell, "*") }

// parseSubject returns the kind, cell and sender of a message subject; the
// cell is "" for a state change.
func parseSubject(subj string) (k Kind, cell, sender string, ok bool) {
	rest, ok := strings.CutPrefix(subj, SubjectPrefix+".")
	if !ok {
		return 0, "", "", false
	}
	tokens := strings.Split(rest, ".")
	for k = KindFrame; k <= KindState; k++ {
		if k.String() == tokens[0] {
			break
		}
	}
	want := 2
	if k.celled() {
		want = 3
	}
	if !k.valid() || len(tokens) != want || slices.Contains(tokens, "") {
		return 0, "", "", false
	}
	if k.celled() {
		cell = tokens[1]
	}
	return k, cell, tokens[len(tokens)-1], true
}

// ValidCell reports why name cannot name a cell: it must be 1 to
// MaxSenderID bytes and one subject token, as a host id.
func ValidCell(name string) error {
	if name == "" || len(name) > MaxSenderID || strings.ContainsAny(name, ".*> \t\r\n") {
		return fmt.Errorf("cell %q: want 1 to %d bytes without '.', '*', '>' or white space", name, MaxSenderID)
	}
	return nil
}

// MaxSenderID is the longest host id a chunk header holds, in bytes; it
// equals the prober id a result frame holds.
const MaxSenderID = 32

// ValidSenderID reports why id cannot name a sender: it must be 1 to
// MaxSenderID bytes and one NATS subject token (no '.', '*', '>' or space).
func ValidSenderID(id string) error {
	if id == "" || len(id) > MaxSenderID {
		return fmt.Errorf("host id %q: want 1 to %d bytes", id, MaxSenderID)
	}
	if strings.ContainsAny(id, ".*> \t\r\n") {
		return fmt.Errorf("host id %q: '.', '*', '>' and white space are not allowed", id)
	}
	return nil
}

// Role is what a host does in the fleet; it decides what the host's NKey
// may publish and subscribe to (Permissions).
type Role string

// The roles. A host that plays several roles lists its key under each.
const (
	RoleProber     Role = "prober"
	RoleAggregator Role = "aggregator"
	RoleEdge       Role = "edge"
	RoleAdmin      Role = "admin" // steadydns config push: writes the config bucket
)

// Roles lists every role, in the order documentation shows them.
var Roles = []Role{RoleProber, RoleAggregator, RoleEdge, RoleAdmin}
