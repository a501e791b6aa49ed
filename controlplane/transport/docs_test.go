package transport

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// The example hosts in docs/nats-accounts.md (public keys only).
var docHosts = []Host{
	{ID: "p1a", Key: "UDOZ66VIP2B4XIX3JWRS3GVYNBCOVQUV5BKAQIBKITRJXMCTDJQPKOKT", Roles: []Role{RoleProber}, Cell: "eu"},
	{ID: "a1", Key: "UBK5Z2K2ZUGHPGHURX26YG72RT66JGCV55NN3RBHHRPIM6HGQB2U5C3J", Roles: []Role{RoleAggregator}, Cell: "eu"},
	{ID: "e1", Key: "UAPHI4NYFBUAWFTYOX64PNY7OS7SGZ43YYDVQCQZWA42TVVWDWFVYGZM", Roles: []Role{RoleEdge}},
	{ID: "ops", Key: "UBTUBFKB3SUP42SKHCIDJDOTA7CY5UCMV46CEZ5MLCBGBZWOYW5VFYJX", Roles: []Role{RoleAdmin}},
}

// The external-cluster config in docs/nats-accounts.md is what
// AuthorizationConfig renders, so it grants what an embedded server does.
func TestDocumentedAuthorization(t *testing.T) {
	want, err := AuthorizationConfig(docHosts)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/nats-accounts.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), want) {
		t.Fatalf("docs/nats-accounts.md does not hold the current permissions; they are:\n%s", want)
	}

	// nats-server reads it and grants each key what Embed grants it.
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte(want), 0o600); err != nil {
		t.Fatal(err)
	}
	so, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := serverOptions(EmbedOptions{Listen: "127.0.0.1:0", ServerName: "a1", StoreDir: t.TempDir(), Hosts: docHosts}, &serverLog{})
	if err != nil {
		t.Fatal(err)
	}
	if len(so.Nkeys) != len(embedded.Nkeys) {
		t.Fatalf("config has %d users, embedded %d", len(so.Nkeys), len(embedded.Nkeys))
	}
	for i, u := range so.Nkeys {
		e := embedded.Nkeys[i]
		if u.Nkey != e.Nkey || !slices.Equal(u.Permissions.Publish.Allow, e.Permissions.Publish.Allow) ||
			!slices.Equal(u.Permissions.Subscribe.Allow, e.Permissions.Subscribe.Allow) {
			t.Fatalf("user %s: config grants %+v %+v, embedded %+v %+v", u.Nkey, u.Permissions.Publish, u.Permissions.Subscribe,
				e.Permissions.Publish, e.Permissions.Subscribe)
		}
	}
}
