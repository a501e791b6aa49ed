package transport

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Host is one host of the fleet as the servers know it: the key it
// proves, the id and cell its subjects carry, and its roles.
type Host struct {
	ID    string
	Key   string // NKey user public key
	Roles []Role
	Cell  string // where its frames and tables go; unused by edges and admins
}

// Subjects a host may publish and subscribe to. Everything else is
// denied. The config bucket is a JetStream stream, KV_<bucket>, reached
// through the JetStream API; these are the API subjects nats.go uses to
// read and watch a key-value bucket, and nothing that reaches other
// streams. No role may delete a consumer: watches are ordered consumers,
// which the server removes once their watcher is gone, and a delete
// permission would reach every host's consumers, since their names are
// random.
var (
	readConfigPub = []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO.KV_" + ConfigBucket,
		"$JS.API.STREAM.MSG.GET.KV_" + ConfigBucket,
		"$JS.API.DIRECT.GET.KV_" + ConfigBucket,
		"$JS.API.DIRECT.GET.KV_" + ConfigBucket + ".>",
		"$JS.API.CONSUMER.CREATE.KV_" + ConfigBucket,
		"$JS.API.CONSUMER.CREATE.KV_" + ConfigBucket + ".>",
		"$JS.API.CONSUMER.INFO.KV_" + ConfigBucket + ".>",
		"$JS.FC.KV_" + ConfigBucket + ".>",
	}
	adminPub = []string{
		"$KV." + ConfigBucket + ".>",
		"$JS.API.STREAM.CREATE.KV_" + ConfigBucket,
		"$JS.API.STREAM.UPDATE.KV_" + ConfigBucket,
	}
)

// InboxPrefix is where host id receives replies: its own inbox, so no host
// reads another's JetStream replies or watch deliveries.
func InboxPrefix(id string) string { return "_INBOX." + id }

// Permissions returns the subjects host h may publish and subscribe to:
// the union of its roles' permissions, each scoped to its own id and cell,
// sorted. A prober publishes only its own frames, an aggregator only its
// own tables and events, and only aggregators and admins publish state
// changes.
func Permissions(h Host) (pub, sub []string) {
	pub = append(pub, readConfigPub...)
	sub = append(sub, InboxPrefix(h.ID)+".>")
	for _, r := range h.Roles {
		switch r {
		case RoleProber:
			pub = append(pub, Subject(KindFrame, h.Cell, h.ID))
		case RoleAggregator:
			pub = append(pub, Subject(KindTable, h.Cell, h.ID), Subject(KindState, "", h.ID), EventsSubject(h.Cell, h.ID))
			// Its cell's other aggregators' events: the first live one
			// posts to the webhooks.
			sub = append(sub, SubjectAll(KindFrame, h.Cell), SubjectAll(KindState, ""), EventsSubject(h.Cell, "*"))
		case RoleEdge:
			sub = append(sub, SubjectAll(KindTable, AllCells), EventsSubject(AllCells, "*"))
		case RoleAdmin:
			pub = append(pub, Subject(KindState, "", h.ID))
			pub = append(pub, adminPub...)
			// An operator follows the changes with a tool of its own.
			sub = append(sub, EventsSubject(AllCells, "*"))
		}
	}
	slices.Sort(pub)
	slices.Sort(sub)
	return slices.Compact(pub), slices.Compact(sub)
}

// checkHosts checks what the servers need of every host: a valid id, a
// user public key used once, known roles, and a cell where one is used.
func checkHosts(hosts []Host) error {
	if len(hosts) == 0 {
		return errors.New("no hosts")
	}
	keys := map[string]string{}
	ids := map[string]bool{}
	for _, h := range hosts {
		if err := ValidSenderID(h.ID); err != nil {
			return err
		}
		if ids[h.ID] {
			return fmt.Errorf("host %s is listed twice", h.ID)
		}
		ids[h.ID] = true
		if len(h.Key) != 56 || h.Key[0] != 'U' {
			return fmt.Errorf("host %s: %q is not an nkey user public key", h.ID, h.Key)
		}
		if other, dup := keys[h.Key]; dup {
			return fmt.Errorf("host %s: key is already %s's", h.ID, other)
		}
		keys[h.Key] = h.ID
		for _, r := range h.Roles {
			if !slices.Contains(Roles, r) {
				return fmt.Errorf("host %s: unknown role %q", h.ID, r)
			}
			if (r == RoleProber || r == RoleAggregator) && ValidCell(h.Cell) != nil {
				return fmt.Errorf("host %s: %w", h.ID, ValidCell(h.Cell))
			}
		}
	}
	return nil
}

// AuthorizationConfig renders hosts as a nats-server configuration block
// with the same permissions an embedded server enforces, for a fleet that
// runs its own NATS cluster.
func AuthorizationConfig(hosts []Host) (string, error) {
	if err := checkHosts(hosts); err != nil {
		return "", fmt.Errorf("rendering nats authorization: %w", err)
	}
	var b strings.Builder
	b.WriteString("authorization {\n  users = [\n")
	for _, h := range hosts {
		pub, sub := Permissions(h)
		roles := make([]string, len(h.Roles))
		for i, r := range h.Roles {
			roles[i] = string(r)
		}
		fmt.Fprintf(&b, "    # %s: %s\n    {\n      nkey: %s\n      permissions: {\n", h.ID, strings.Join(roles, ", "), h.Key)
		fmt.Fprintf(&b, "        publish: {allow: [\n%s        ]}\n", quoted(pub))
		fmt.Fprintf(&b, "        subscribe: {allow: [\n%s        ]}\n", quoted(sub))
		b.WriteString("      }\n    }\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String(), nil
}

// quoted lists ss one per line, quoted, as a config array's elements.
func quoted(ss []string) string {
	var b strings.Builder
	for i, s := range ss {
		sep := ","
		if i == len(ss)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "          %q%s\n", s, sep)
	}
	return b.String()
}
