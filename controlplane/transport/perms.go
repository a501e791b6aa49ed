package transport

import (
	"fmt"
	"slices"
	"strings"
)

// Subjects a role may publish and subscribe to. Everything else is denied.
// The config bucket is a JetStream stream, KV_<bucket>, reached through the
// JetStream API; these are the API subjects nats.go uses to read, watch and
// write a key-value bucket, and nothing that reaches other streams.
var (
	// readConfigPub lets every role open, read and watch the config bucket:
	// stream info, direct gets, ordered push consumers for watches and
	// their flow-control replies.
	readConfigPub = []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO.KV_" + ConfigBucket,
		"$JS.API.STREAM.MSG.GET.KV_" + ConfigBucket,
		"$JS.API.DIRECT.GET.KV_" + ConfigBucket,
		"$JS.API.DIRECT.GET.KV_" + ConfigBucket + ".>",
		"$JS.API.CONSUMER.CREATE.KV_" + ConfigBucket,
		"$JS.API.CONSUMER.CREATE.KV_" + ConfigBucket + ".>",
		"$JS.API.CONSUMER.INFO.KV_" + ConfigBucket + ".>",
		"$JS.API.CONSUMER.DELETE.KV_" + ConfigBucket + ".>",
		"$JS.FC.KV_" + ConfigBucket + ".>",
	}
	// readConfigSub: API replies and watch deliveries come to inboxes.
	readConfigSub = []string{"_INBOX.>"}

	rolePub = map[Role][]string{
		RoleProber: {SubjectAll(KindFrame, AllCells)},
		// An aggregator's API sends state changes to the others, as an
		// edge's does.
		RoleAggregator: {SubjectAll(KindTable, AllCells), SubjectAll(KindState, "")},
		RoleEdge:       {SubjectAll(KindState, "")},
		RoleAdmin: {
			"$KV." + ConfigBucket + ".>",
			"$JS.API.STREAM.CREATE.KV_" + ConfigBucket,
			"$JS.API.STREAM.UPDATE.KV_" + ConfigBucket,
		},
	}
	roleSub = map[Role][]string{
		RoleAggregator: {SubjectAll(KindFrame, AllCells), SubjectAll(KindState, "")},
		RoleEdge:       {SubjectAll(KindTable, AllCells)},
	}
)

// Permissions returns the subjects a key holding roles may publish and
// subscribe to: the union of the roles' permissions, sorted.
func Permissions(roles ...Role) (pub, sub []string) {
	pub = append(pub, readConfigPub...)
	sub = append(sub, readConfigSub...)
	for _, r := range roles {
		pub = append(pub, rolePub[r]...)
		sub = append(sub, roleSub[r]...)
	}
	slices.Sort(pub)
	slices.Sort(sub)
	return slices.Compact(pub), slices.Compact(sub)
}

// keyRoles inverts users, role → keys, into key → roles, so a key listed
// under several roles gets one user with every role's permissions. Only
// known roles and NKey user public keys (starting with U) are accepted.
func keyRoles(users map[Role][]string) (map[string][]Role, []string, error) {
	keys := map[string][]Role{}
	var order []string
	for _, r := range Roles {
		for _, k := range users[r] {
			if len(k) != 56 || k[0] != 'U' {
				return nil, nil, fmt.Errorf("role %s: %q is not an nkey user public key", r, k)
			}
			if keys[k] == nil {
				order = append(order, k)
			}
			keys[k] = append(keys[k], r)
		}
	}
	for r := range users {
		if !slices.Contains(Roles, r) {
			return nil, nil, fmt.Errorf("unknown role %q", r)
		}
	}
	if len(order) == 0 {
		return nil, nil, fmt.Errorf("no nkey users")
	}
	return keys, order, nil
}

// AuthorizationConfig renders users as a nats-server configuration block
// with the same permissions an embedded server enforces, for a fleet that
// runs its own NATS cluster.
func AuthorizationConfig(users map[Role][]string) (string, error) {
	keys, order, err := keyRoles(users)
	if err != nil {
		return "", fmt.Errorf("rendering nats authorization: %w", err)
	}
	var b strings.Builder
	b.WriteString("authorization {\n  users = [\n")
	for _, k := range order {
		pub, sub := Permissions(keys[k]...)
		roles := make([]string, len(keys[k]))
		for i, r := range keys[k] {
			roles[i] = string(r)
		}
		fmt.Fprintf(&b, "    # %s\n    {\n      nkey: %s\n      permissions: {\n", strings.Join(roles, ", "), k)
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
