package transport

import (
	"fmt"
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

// Subjects. A message of kind K from sender S goes to "steadydns.K.S";
// receivers subscribe to "steadydns.K.*" and learn the sender from the
// subject's last token, which must equal the sender in the chunk header.
const (
	SubjectPrefix = "steadydns"

	// ConfigBucket is the key-value bucket that holds the fleet's config,
	// and ConfigKey the key its latest version is stored under.
	ConfigBucket = "steadydns-config"
	ConfigKey    = "fleet"
)

// Subject is the subject sender publishes messages of kind k on.
func Subject(k Kind, sender string) string { return SubjectPrefix + "." + k.String() + "." + sender }

// SubjectAll is the subject that matches every sender's messages of kind k.
func SubjectAll(k Kind) string { return SubjectPrefix + "." + k.String() + ".*" }

// parseSubject returns the kind and sender of a message subject.
func parseSubject(subj string) (Kind, string, bool) {
	rest, ok := strings.CutPrefix(subj, SubjectPrefix+".")
	if !ok {
		return 0, "", false
	}
	name, sender, ok := strings.Cut(rest, ".")
	if !ok || sender == "" || strings.Contains(sender, ".") {
		return 0, "", false
	}
	for k := KindFrame; k <= KindState; k++ {
		if k.String() == name {
			return k, sender, true
		}
	}
	return 0, "", false
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
