package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/prober"
)

// base is a valid config prefix of five lines; rows that append to it
// start at line 6.
const base = `server:
  listen: ["198.18.0.2:53"]
zones:
  - origin: example.test.
    file: example.test.zone
`

const geoBase = `server:
  listen: ["198.18.0.2:53"]
  geo:
    regions:
      eu: { prefixes: ["198.18.0.0/24"], next: [us] }
      us: { prefixes: ["198.18.1.0/24"] }
zones:
  - origin: example.test.
    file: example.test.zone
`

// answers returns n answer lines for a record at the indentation base uses.
func answers(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "      - value: 198.18.1.%d\n", i+1)
	}
	return b.String()
}

// testdata is the absolute path of testdata, for configs that load in
// another directory.
var testdata, _ = filepath.Abs("testdata")

// load runs Load on config in a fresh directory that also holds the zone
// file base refers to, so errors read "config.yaml:N: ...".
func load(t *testing.T, config string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("example.test.zone", []byte("@ SOA ns hostmaster 1 2 3 4 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("config.yaml", []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load("config.yaml")
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, config, want string
	}{
		// shape
		{"syntax", "server:\n  listen: [\n", `config.yaml:2: server.listen: did not find expected node content`},
		// The yaml package names the line before the bad one for its
		// parser's errors, and no key: the line and key are the ones at fault.
		{"syntax unclosed flow mapping", base + "health_checks:\n  web1: { type: tcp, target: 198.18.1.1, port: 80\nrecords: []\n", `config.yaml:7: health_checks.web1: did not find expected ',' or '}'`},
		{"syntax bad indent", "server:\n  listen: [\"198.18.0.2:53\"]\n  api: 127.0.0.1:9153\n bpffs: /sys/fs/bpf/x\n", `config.yaml:4: server.bpffs: did not find expected key`},
		{"syntax in a list item", base + "records:\n  - name: www.example.test.\n    type: A\n    answers:\n      - value: 198.18.1.1\n      - { value: 198.18.1.2\n  - name: x\n", `config.yaml:11: records[0].answers[1]: did not find expected ',' or '}'`},
		{"syntax scanner error", base + "aggregation:\n  push_interval: a: b\n", `config.yaml:7: aggregation.push_interval: mapping values are not allowed in this context`},
		{"syntax on the first line", "{ server\n", `config.yaml:1: did not find expected ',' or '}'`},
		{"not a mapping", "- a\n", `config.yaml:1: expected a mapping, got a list`},
		{"empty file", "", `config.yaml: server.listen: at least one address is required`},
		{"geo bad prefix", "server:\n  listen: [\"198.18.0.2:53\"]\n  geo:\n    regions:\n      eu: { prefixes: [\"198.18.0.0/33\"] }\n", `config.yaml:5: server.geo.regions.eu.prefixes[0]: invalid prefix "198.18.0.0/33", want a CIDR such as 198.18.0.0/24`},
		{"geo unknown next", "server:\n  listen: [\"198.18.0.2:53\"]\n  geo:\n    regions:\n      eu: { prefixes: [\"198.18.0.0/24\"], next: [mars] }\n", `config.yaml:5: server.geo.regions.eu.next[0]: unknown region "mars"`},
		{"geo prefix in two regions", "server:\n  listen: [\"198.18.0.2:53\"]\n  geo:\n    regions:\n      eu: { prefixes: [\"198.18.0.0/24\"] }\n      us: { prefixes: [\"198.18.0.0/24\"] }\n", `config.yaml:6: server.geo.regions.us: prefix 198.18.0.0/24 is also in region eu`},
		{"geo unknown key", "server:\n  listen: [\"198.18.0.2:53\"]\n  geo:\n    regions:\n      eu: { prefix: [\"198.18.0.0/24\"] }\n", `config.yaml:5: server.geo.regions.eu.prefix: unknown key`},
		{"answer in an unknown region", geoBase + "records:\n  - name: www.example.test.\n    type: A\n    answers:\n      - { value: 198.18.1.1, region: ap }\n", `config.yaml:14: records[0].answers[0].region: unknown region "ap": define it under server.geo.regions`},
		{"unknown top-level key", base + "clusters:\n  peers: []\n", `config.yaml:6: clusters: unknown key`},
		{"cluster unknown key", base + "cluster:\n  peers: []\n", `config.yaml:7: cluster.peers: unknown key`},
		{"cluster config nats without nats", base + "cluster:\n  config: nats\n", `config.yaml:7: cluster.config: nats needs cluster.nats to say where the servers are`},
		{"cluster config unknown", base + "cluster:\n  config: etcd\n", `config.yaml:7: cluster.config: unknown value "etcd", want one of file, nats`},
		{"cluster nats without urls", base + "cluster:\n  nats:\n    tls: null\n", "config.yaml:7: cluster.nats.urls: at least one server is required\nconfig.yaml:7: cluster.nats.hosts: required: every host of the fleet with its roles and its own NKey; steadydns keygen --id NAME prints a host's line"},
		{"cluster nats bad url", base + "cluster:\n  nats:\n    urls: [\"http://198.18.64.21:4222\"]\n", "config.yaml:7: cluster.nats.hosts: required: every host of the fleet with its roles and its own NKey; steadydns keygen --id NAME prints a host's line\nconfig.yaml:8: cluster.nats.urls[0]: invalid url \"http://198.18.64.21:4222\", want nats|tls://host:port"},
		{"cluster embed bad listen", base + "cluster:\n  nats:\n    urls: [\"nats://198.18.64.21:4222\"]\n    embed:\n      listen: 4222\n", "config.yaml:7: cluster.nats.hosts: required: every host of the fleet with its roles and its own NKey; steadydns keygen --id NAME prints a host's line\nconfig.yaml:9: cluster.nats.embed.cluster_listen: 0.0.0.0:6222 is beyond loopback without TLS: set cluster.nats.tls (ca, cert, key), or write insecure: true under cluster.nats.embed to accept plain TCP\nconfig.yaml:10: cluster.nats.embed.listen: invalid address \"4222\", want host:port such as 0.0.0.0:4222\nconfig.yaml:10: cluster.nats.embed.listen: 4222 is beyond loopback without TLS: set cluster.nats.tls (ca, cert, key), or write insecure: true under cluster.nats.embed to accept plain TCP"},
		{"cluster embed bad route", base + "cluster:\n  nats:\n    urls: [\"nats://198.18.64.21:4222\"]\n    embed:\n      routes: [\"198.18.64.22:6222\"]\n", "config.yaml:7: cluster.nats.hosts: required: every host of the fleet with its roles and its own NKey; steadydns keygen --id NAME prints a host's line\nconfig.yaml:9: cluster.nats.embed.listen: 0.0.0.0:4222 is beyond loopback without TLS: set cluster.nats.tls (ca, cert, key), or write insecure: true under cluster.nats.embed to accept plain TCP\nconfig.yaml:9: cluster.nats.embed.cluster_listen: 0.0.0.0:6222 is beyond loopback without TLS: set cluster.nats.tls (ca, cert, key), or write insecure: true under cluster.nats.embed to accept plain TCP\nconfig.yaml:10: cluster.nats.embed.routes[0]: invalid url \"198.18.64.22:6222\", want nats-route|nats|tls://host:port"},
		{"cluster bad host key", base + "cluster:\n  nats:\n    urls: [\"nats://198.18.64.21:4222\"]\n    hosts:\n      a1: { roles: [aggregator], key: SUAKEY }\n", `config.yaml:10: cluster.nats.hosts.a1.key: "SUAKEY" is not an NKey user public key (they start with U)`},
		{"cluster unknown host key", base + "cluster:\n  nats:\n    urls: [\"nats://198.18.64.21:4222\"]\n    hosts:\n      a1: { role: aggregator }\n", "config.yaml:10: cluster.nats.hosts.a1.role: unknown key"},
		{"cluster tls missing key", base + "cluster:\n  nats:\n    urls: [\"tls://198.18.64.21:4222\"]\n    tls:\n      ca: /nonexistent/ca.pem\n", "config.yaml:7: cluster.nats.hosts: required: every host of the fleet with its roles and its own NKey; steadydns keygen --id NAME prints a host's line\nconfig.yaml:9: cluster.nats.tls.cert: required\nconfig.yaml:9: cluster.nats.tls.key: required\nconfig.yaml:10: cluster.nats.tls.ca: open /nonexistent/ca.pem: no such file or directory"},
		{"checker timeout below push", base + "aggregation:\n  push_interval: 2s\n  checker_timeout: 1s\n", `config.yaml:8: aggregation.checker_timeout: 1s must be at least push_interval 2s`},
		{"unknown nested key", "server:\n  listn: [\"198.18.0.2:53\"]\n", `config.yaml:2: server.listn: unknown key`},
		{"duplicate key", base + "aggregation:\n  quorum: 10%\n  quorum: 20%\n", `config.yaml:8: aggregation.quorum: duplicate key, first at line 7`},
		{"list expected", "server:\n  listen: 198.18.0.2:53\n", `config.yaml:2: server.listen: expected a list, got "198.18.0.2:53"`},
		{"mapping expected", base + "aggregation: 1s\n", `config.yaml:6: aggregation: expected a mapping, got "1s"`},
		{"second document", base + "---\nserver: {}\n", `config.yaml:6: only one YAML document is allowed`},
		{"merge key", base + "health_checks:\n  a: &a {type: tcp, port: 80}\n  b:\n    type: tcp\n    <<: *a\n", `config.yaml:10: health_checks.b.<<: merge keys are not supported`},
		{"empty list item", "server:\n  listen:\n    -\n", `config.yaml:3: server.listen[0]: empty list item`},

		// server
		{"listen missing", "server:\n  api: 127.0.0.1:9153\n", `config.yaml:1: server.listen: at least one address is required`},
		{"listen invalid", "server:\n  listen: [\"198.18.0.2\"]\n", `config.yaml:2: server.listen[0]: invalid listen address "198.18.0.2", want ip:port such as 198.18.0.2:53 or [fd53::2]:53`},
		{"listen port 0", "server:\n  listen:\n    - 198.18.0.2:0\n", `config.yaml:3: server.listen[0]: port must not be 0`},
		{"listen duplicate", "server:\n  listen:\n    - 198.18.0.2:53\n    - 198.18.0.2:53\n", `config.yaml:4: server.listen[1]: duplicate listen address 198.18.0.2:53, first at line 3`},
		{"xdp_mode", "server:\n  listen: [\"198.18.0.2:53\"]\n  xdp_mode: skb\n", `config.yaml:3: server.xdp_mode: unknown value "skb", want one of auto, native, generic`},
		{"api", "server:\n  listen: [\"198.18.0.2:53\"]\n  api: localhost\n", `config.yaml:3: server.api: invalid address "localhost", want host:port such as 127.0.0.1:9153`},
		{"api empty", "server:\n  listen: [\"198.18.0.2:53\"]\n  api: \"\"\n", `config.yaml:3: server.api: invalid address "", want host:port such as 127.0.0.1:9153`},
		{"bpffs relative", "server:\n  listen: [\"198.18.0.2:53\"]\n  bpffs: bpf\n", `config.yaml:3: server.bpffs: must be an absolute path, got "bpf"`},
		{"state_dir relative", "server:\n  listen: [\"198.18.0.2:53\"]\n  state_dir: state\n", `config.yaml:3: server.state_dir: must be an absolute path, got "state"`},
		{"max_records 0", "server:\n  listen: [\"198.18.0.2:53\"]\n  max_records: 0\n", `config.yaml:3: server.max_records: 0 out of range 1-16777216`},
		{"max_records negative", "server:\n  listen: [\"198.18.0.2:53\"]\n  max_records: -1\n", `config.yaml:3: server.max_records: -1 out of range 1-16777216`},
		{"max_records too large", "server:\n  listen: [\"198.18.0.2:53\"]\n  max_records: 16777217\n", `config.yaml:3: server.max_records: 16777217 out of range 1-16777216`},
		{"max_records not an integer", "server:\n  listen: [\"198.18.0.2:53\"]\n  max_records: 64k\n", `config.yaml:3: server.max_records: expected an integer, got "64k"`},
		{"tcp zero", "server:\n  listen: [\"198.18.0.2:53\"]\n  tcp:\n    max_connections: 0\n", `config.yaml:4: server.tcp.max_connections: must be positive, got 0; leave the key out for the default`},
		{"tcp negative", "server:\n  listen: [\"198.18.0.2:53\"]\n  tcp:\n    max_per_prefix: -3\n", `config.yaml:4: server.tcp.max_per_prefix: must be positive, got -3; leave the key out for the default`},
		{"tcp idle zero", "server:\n  listen: [\"198.18.0.2:53\"]\n  tcp:\n    idle_timeout: 0s\n", `config.yaml:4: server.tcp.idle_timeout: must be positive, got 0s; leave the key out for the default`},
		{"tcp not an integer", "server:\n  listen: [\"198.18.0.2:53\"]\n  tcp:\n    max_pipelined: many\n", `config.yaml:4: server.tcp.max_pipelined: expected an integer, got "many"`},
		{"tcp lifetime negative", "server:\n  listen: [\"198.18.0.2:53\"]\n  tcp:\n    max_lifetime: -1m\n", `config.yaml:4: server.tcp.max_lifetime: must be positive, got -1m; leave the key out for the default`},
		{"tcp unknown key", "server:\n  listen: [\"198.18.0.2:53\"]\n  tcp:\n    max_clients: 5\n", `config.yaml:4: server.tcp.max_clients: unknown key`},
		{"rrl rate negative", "server:\n  listen: [\"198.18.0.2:53\"]\n  rrl:\n    rate: -1\n", `config.yaml:4: server.rrl.rate: -1 out of range 0-1000000`},
		{"rrl off, slip checked", "server:\n  listen: [\"198.18.0.2:53\"]\n  rrl:\n    rate: 0\n    slip: 11\n", `config.yaml:5: server.rrl.slip: 11 out of range 0-10`},
		{"rrl slip", "server:\n  listen: [\"198.18.0.2:53\"]\n  rrl:\n    rate: 10\n    slip: 11\n", `config.yaml:5: server.rrl.slip: 11 out of range 0-10`},
		{"rrl window short", "server:\n  listen: [\"198.18.0.2:53\"]\n  rrl:\n    rate: 10\n    window: 500ms\n", `config.yaml:5: server.rrl.window: 500ms out of range 1-3600 whole seconds`},
		{"rrl ipv4 prefix", "server:\n  listen: [\"198.18.0.2:53\"]\n  rrl:\n    rate: 10\n    ipv4_prefix: 33\n", `config.yaml:5: server.rrl.ipv4_prefix: 33 out of range 0-32`},
		{"rrl ipv6 prefix", "server:\n  listen: [\"198.18.0.2:53\"]\n  rrl:\n    rate: 10\n    ipv6_prefix: 128\n", `config.yaml:5: server.rrl.ipv6_prefix: 128 out of range 0-64`},
		{"rrl exempt", "server:\n  listen: [\"198.18.0.2:53\"]\n  rrl:\n    rate: 10\n    exempt: [198.18.0.1]\n", `config.yaml:5: server.rrl.exempt[0]: invalid prefix "198.18.0.1", want a CIDR such as 198.18.0.0/24`},
		{"rrl table small", "server:\n  listen: [\"198.18.0.2:53\"]\n  rrl:\n    rate: 10\n    table_size: 1000\n", `config.yaml:5: server.rrl.table_size: 1000 out of range 1024-16777216`},
		{"rrl unknown key", "server:\n  listen: [\"198.18.0.2:53\"]\n  rrl:\n    rate: 10\n    responses_per_second: 5\n", `config.yaml:5: server.rrl.responses_per_second: unknown key`},
		{"api token file missing", "server:\n  listen: [\"198.18.0.2:53\"]\n  api_token_file: /nonexistent/api.token\n", `config.yaml:3: server.api_token_file: open /nonexistent/api.token: no such file or directory`},
		{"api read token file missing", "server:\n  listen: [\"198.18.0.2:53\"]\n  api_read_token_file: /nonexistent/read.token\n", `config.yaml:3: server.api_read_token_file: open /nonexistent/read.token: no such file or directory`},
		{"api read token file is the write token's", "server:\n  listen: [\"198.18.0.2:53\"]\n  api_token_file: " + testdata + "/api.token\n  api_read_token_file: " + testdata + "/api.token\n", `config.yaml:4: server.api_read_token_file: is api_token_file too, so whoever may read could write; give the reads a token of their own`},
		{"api hosts with a port", "server:\n  listen: [\"198.18.0.2:53\"]\n  api_hosts:\n    - api.example.test\n    - api.example.test:9153\n", `config.yaml:5: server.api_hosts[1]: "api.example.test:9153" is not a host name; give a name without port or scheme, such as api.example.test`},
		{"api hosts with a scheme", "server:\n  listen: [\"198.18.0.2:53\"]\n  api_hosts: [\"https://api.example.test\"]\n", `config.yaml:3: server.api_hosts[0]: "https://api.example.test" is not a host name; give a name without port or scheme, such as api.example.test`},
		{"api hosts wildcard", "server:\n  listen: [\"198.18.0.2:53\"]\n  api_hosts: [\"*.example.test\"]\n", `config.yaml:3: server.api_hosts[0]: "*.example.test" is not a host name; give a name without port or scheme, such as api.example.test`},
		{"api hosts not a list", "server:\n  listen: [\"198.18.0.2:53\"]\n  api_hosts: api.example.test\n", `config.yaml:3: server.api_hosts: expected a list, got "api.example.test"`},
		{"api tls without key", "server:\n  listen: [\"198.18.0.2:53\"]\n  api_tls:\n    cert: " + testdata + "/api.crt\n", `config.yaml:3: server.api_tls.key: required: a PEM file`},
		{"api tls unreadable", "server:\n  listen: [\"198.18.0.2:53\"]\n  api_tls:\n    cert: /nonexistent/api.crt\n    key: .\n", "config.yaml:4: server.api_tls.cert: open /nonexistent/api.crt: no such file or directory\nconfig.yaml:5: server.api_tls.key: DIR is a directory"},
		{"api tls not a pair", "server:\n  listen: [\"198.18.0.2:53\"]\n  api_tls:\n    cert: " + testdata + "/api.crt\n    key: " + testdata + "/api.token\n", `config.yaml:3: server.api_tls: loading the certificate and key: tls: failed to find any PEM data in key input`},
		{"dot without listen", "server:\n  listen: [\"198.18.0.2:53\"]\n  tls:\n    cert: " + testdata + "/api.crt\n    key: " + testdata + "/api.key\n", `config.yaml:3: server.tls.listen: at least one address is required, such as 198.18.0.2:853`},
		{"dot on the dns port", "server:\n  listen: [\"198.18.0.2:53\"]\n  tls:\n    listen: [\"198.18.0.2:853\", \"198.18.0.2:53\"]\n    cert: " + testdata + "/api.crt\n    key: " + testdata + "/api.key\n", `config.yaml:4: server.tls.listen[1]: 198.18.0.2:53 is server.listen[0] too, whose TCP it would take; DNS over TLS wants a port of its own, 853`},
		{"dot bad address", "server:\n  listen: [\"198.18.0.2:53\"]\n  tls:\n    listen: [\"198.18.0.2\"]\n", "config.yaml:4: server.tls.listen[0]: invalid listen address \"198.18.0.2\", want ip:port such as 198.18.0.2:853 or [fd53::2]:853"},
		{"dot not a pair", "server:\n  listen: [\"198.18.0.2:53\"]\n  tls:\n    listen: [\"198.18.0.2:853\"]\n    cert: " + testdata + "/api.crt\n    key: " + testdata + "/api.token\n", `config.yaml:3: server.tls: loading the certificate and key: tls: failed to find any PEM data in key input`},
		{"api tls unknown key", "server:\n  listen: [\"198.18.0.2:53\"]\n  api_tls:\n    certificate: api.crt\n", `config.yaml:4: server.api_tls.certificate: unknown key`},
		{"interface too long", "server:\n  listen: [\"198.18.0.2:53\"]\n  interfaces: [abcdefghijklmnop]\n", `config.yaml:3: server.interfaces[0]: invalid interface name "abcdefghijklmnop"`},
		{"interface duplicate", "server:\n  listen: [\"198.18.0.2:53\"]\n  interfaces:\n    - eth0\n    - eth0\n", `config.yaml:5: server.interfaces[1]: duplicate interface "eth0", first at line 4`},

		// zones
		{"zone duplicate", base + "  - origin: EXAMPLE.test\n    file: example.test.zone\n", `config.yaml:6: zones[1].origin: duplicate zone "example.test.", first at line 4`},
		{"zone origin missing", base + "  - file: example.test.zone\n", `config.yaml:6: zones[1].origin: required`},
		{"zone file key missing", base + "  - origin: other.test.\n", `config.yaml:6: zones[1].file: required`},
		{"zone origin invalid", base + "  - origin: a..b\n    file: example.test.zone\n", `config.yaml:6: zones[1].origin: invalid domain name "a..b."`},
		{"string expected", "server:\n  listen: [\"198.18.0.2:53\"]\n  api: {host: x}\n", `config.yaml:3: server.api: expected a string, got a mapping`},
		{"zone file missing", base + "  - origin: other.test.\n    file: zones/other.zone\n", `config.yaml:7: zones[1].file: open ` + "DIR" + `/zones/other.zone: no such file or directory`},
		{"zone file is a directory", base + "  - origin: other.test.\n    file: .\n", `config.yaml:7: zones[1].file: DIR is a directory`},
		{"dnssec keys missing", base + "    dnssec:\n      algorithm: ed25519\n", `config.yaml:6: zones[0].dnssec.keys: required`},
		{"dnssec algorithm unknown", base + "    dnssec:\n      keys: k\n      algorithm: rsasha1\n", `config.yaml:8: zones[0].dnssec.algorithm: unknown algorithm "rsasha1", want one of ecdsap256sha256, ed25519`},
		{"dnssec unknown key", base + "    dnssec:\n      keys: k\n      nsec3: true\n", `config.yaml:8: zones[0].dnssec.nsec3: unknown key`},
		{"dnssec ttl not whole seconds", base + "    dnssec:\n      keys: k\n      dnskey_ttl: 1500ms\n", `config.yaml:8: zones[0].dnssec.dnskey_ttl: must be whole seconds, from 1s to 68 years, got 1.5s`},
		{"dnssec ttl not a duration", base + "    dnssec:\n      keys: k\n      ds_ttl: 2w\n", `config.yaml:8: zones[0].dnssec.ds_ttl: expected a duration such as 1h or 90d, got "2w"`},
		{"dnssec zsk lifetime of a csk", base + "    dnssec:\n      keys: k\n      zsk_lifetime: 30d\n", `config.yaml:8: zones[0].dnssec.zsk_lifetime: needs split: true; a CSK has no ZSK to roll`},
		{"dnssec zsk lifetime too short", base + "    dnssec:\n      keys: k\n      split: true\n      zsk_lifetime: 1d\n", `config.yaml:9: zones[0].dnssec.zsk_lifetime: must exceed a ZSK rollover, dnskey_ttl + max_ttl + 2 × propagation = 27h0m0s, got 24h0m0s`},
		{"dnssec split not a bool", base + "    dnssec:\n      keys: k\n      split: 2\n", `config.yaml:8: zones[0].dnssec.split: expected true or false, got "2"`},

		// health checks: shape
		{"check id", base + "health_checks:\n  web.1:\n    type: tcp\n    port: 80\n", `config.yaml:7: health_checks.web.1: check id "web.1" may contain only letters, digits, '_' and '-'`},
		{"check type missing", base + "health_checks:\n  web1:\n    port: 80\n", `config.yaml:7: health_checks.web1.type: required, one of http, https, tcp, udp, icmp, dns, metric, calculated, external`},
		{"check type unknown", base + "health_checks:\n  web1:\n    type: smtp\n", `config.yaml:8: health_checks.web1.type: unknown check type "smtp", want one of http, https, tcp, udp, icmp, dns, metric, calculated, external`},
		{"check key does not apply", base + "health_checks:\n  web1:\n    type: tcp\n    port: 80\n    path: /healthz\n", `config.yaml:10: health_checks.web1.path: does not apply to tcp checks`},
		{"check unknown key", base + "health_checks:\n  web1:\n    type: tcp\n    port: 80\n    retries: 3\n", `config.yaml:10: health_checks.web1.retries: unknown key`},
		{"port out of range", base + "health_checks:\n  web1:\n    type: http\n    port: 70000\n", `config.yaml:9: health_checks.web1.port: 70000 out of range 0-65535`},
		{"port required", base + "health_checks:\n  db:\n    type: tcp\n", `config.yaml:7: health_checks.db.port: required for tcp checks`},
		{"port zero", base + "health_checks:\n  web1:\n    type: http\n    port: 0\n", `config.yaml:9: health_checks.web1.port: must not be 0`},
		{"bool", base + "health_checks:\n  web1:\n    type: http\n    invert: yes\n", `config.yaml:9: health_checks.web1.invert: expected true or false, got "yes"`},
		{"integer", base + "health_checks:\n  web1:\n    type: http\n    healthy_threshold: two\n", `config.yaml:9: health_checks.web1.healthy_threshold: expected an integer, got "two"`},
		{"duration", base + "health_checks:\n  web1:\n    type: http\n    interval: 10\n", `config.yaml:9: health_checks.web1.interval: expected a duration such as 500ms or 10s, got "10"`},

		// health checks: values
		{"target with port", base + "health_checks:\n  web1:\n    type: http\n    target: 198.18.1.1:80\n", `config.yaml:9: health_checks.web1.target: invalid target "198.18.1.1:80", want an IP address or hostname without a port`},
		{"timeout over interval", base + "health_checks:\n  web1:\n    type: http\n    interval: 1s\n    timeout: 1500ms\n", `config.yaml:10: health_checks.web1.timeout: 1.5s exceeds interval 1s`},
		{"interval too short", base + "health_checks:\n  web1:\n    type: http\n    interval: 50ms\n", `config.yaml:9: health_checks.web1.interval: 50ms is below the minimum of 100ms`},
		{"threshold range", base + "health_checks:\n  web1:\n    type: http\n    unhealthy_threshold: 11\n", `config.yaml:9: health_checks.web1.unhealthy_threshold: 11 out of range 1-10`},
		{"path", base + "health_checks:\n  web1:\n    type: http\n    path: healthz\n", `config.yaml:9: health_checks.web1.path: must start with /, got "healthz"`},
		{"method", base + "health_checks:\n  web1:\n    type: http\n    method: get\n", `config.yaml:9: health_checks.web1.method: invalid HTTP method "get"`},
		{"expect_status", base + "health_checks:\n  web1:\n    type: http\n    expect_status: [200, \"2xx\"]\n", `config.yaml:9: health_checks.web1.expect_status[1]: expected a status code such as 200 or a range such as 200-399, got "2xx"`},
		{"expect_status range", base + "health_checks:\n  web1:\n    type: http\n    expect_status: 399-200\n", `config.yaml:9: health_checks.web1.expect_status: status range "399-200" must lie within 100-599, low end first`},
		{"expect_status empty", base + "health_checks:\n  web1:\n    type: http\n    expect_status: []\n", `config.yaml:9: health_checks.web1.expect_status: at least one status is required`},
		{"regexp", base + "health_checks:\n  web1:\n    type: http\n    expect_body_regexp: \"(ok\"\n", "config.yaml:9: health_checks.web1.expect_body_regexp: invalid regexp: error parsing regexp: missing closing ): `(ok`"},
		{"body and regexp", base + "health_checks:\n  web1:\n    type: http\n    expect_body: ok\n    expect_body_regexp: ok\n", `config.yaml:10: health_checks.web1.expect_body_regexp: set expect_body or expect_body_regexp, not both`},
		{"tcp expect and regexp", base + "health_checks:\n  db:\n    type: tcp\n    port: 6379\n    expect: PONG\n    expect_regexp: PONG\n", `config.yaml:11: health_checks.db.expect_regexp: set expect or expect_regexp, not both`},
		{"tcp regexp", base + "health_checks:\n  db:\n    type: tcp\n    port: 6379\n    expect_regexp: \"[P\"\n", "config.yaml:10: health_checks.db.expect_regexp: invalid regexp: error parsing regexp: missing closing ]: `[P`"},
		{"tcp send escape", base + "health_checks:\n  db:\n    type: tcp\n    port: 6379\n    send: 'PING\\q'\n", `config.yaml:10: health_checks.db.send: unknown escape \q; use \r, \n, \t, \\ or \xHH`},
		{"tcp send hex", base + "health_checks:\n  db:\n    type: tcp\n    port: 6379\n    send: 'PING\\xg0'\n", `config.yaml:10: health_checks.db.send: \x takes two hex digits, as in \x00, got \xg0`},
		{"tcp send short hex", base + "health_checks:\n  db:\n    type: tcp\n    port: 6379\n    send: 'PING\\x0'\n", `config.yaml:10: health_checks.db.send: \x takes two hex digits, as in \x00`},
		{"tcp send lone backslash", base + "health_checks:\n  db:\n    type: tcp\n    port: 6379\n    send: 'PING\\'\n", `config.yaml:10: health_checks.db.send: a lone \ ends the string; write \\ for a backslash`},
		{"send on udp", base + "health_checks:\n  syslog:\n    type: udp\n    port: 514\n    payload: ping\n    send: ping\n", `config.yaml:11: health_checks.syslog.send: does not apply to udp checks`},
		{"expect on udp", base + "health_checks:\n  syslog:\n    type: udp\n    port: 514\n    payload: ping\n    expect: pong\n", `config.yaml:11: health_checks.syslog.expect: does not apply to udp checks`},
		{"expect_regexp on http", base + "health_checks:\n  web1:\n    type: http\n    expect_regexp: ok\n", `config.yaml:9: health_checks.web1.expect_regexp: does not apply to http checks`},
		{"expect_reply on tcp", base + "health_checks:\n  db:\n    type: tcp\n    port: 6379\n    expect_reply: PONG\n", `config.yaml:10: health_checks.db.expect_reply: does not apply to tcp checks`},
		{"udp reply and regexp", base + "health_checks:\n  syslog:\n    type: udp\n    port: 514\n    payload: ping\n    expect_reply: pong\n    expect_regexp: pong\n", `config.yaml:12: health_checks.syslog.expect_regexp: set expect_reply or expect_regexp, not both`},
		{"sni", base + "health_checks:\n  web1:\n    type: https\n    sni: a/b\n", `config.yaml:9: health_checks.web1.sni: invalid hostname "a/b"`},
		{"udp payload", base + "health_checks:\n  syslog:\n    type: udp\n    port: 514\n", `config.yaml:7: health_checks.syslog.payload: required for udp checks`},
		{"dns qname", base + "health_checks:\n  ns:\n    type: dns\n", `config.yaml:7: health_checks.ns.qname: a domain name is required for dns checks, got ""`},
		{"dns qtype", base + "health_checks:\n  ns:\n    type: dns\n    qname: example.test\n    qtype: BOGUS\n", `config.yaml:10: health_checks.ns.qtype: unknown query type "BOGUS"`},
		{"dns rcode", base + "health_checks:\n  ns:\n    type: dns\n    qname: example.test\n    expect_rcode: NOPE\n", `config.yaml:10: health_checks.ns.expect_rcode: unknown rcode "NOPE", want a name such as NXDOMAIN or a number from 0 to 4095`},
		{"external initial", base + "health_checks:\n  deploy: { type: external, initial: maybe }\n", `config.yaml:7: health_checks.deploy.initial: unknown value "maybe", want one of healthy, unhealthy`},
		{"initial on a probe", base + "health_checks:\n  web: { type: tcp, target: 198.18.1.1, port: 80, initial: unhealthy }\n", `config.yaml:7: health_checks.web.initial: does not apply to tcp checks`},
		{"external ttl", base + "health_checks:\n  deploy:\n    type: external\n    ttl: 0s\n", `config.yaml:9: health_checks.deploy.ttl: must be positive, got 0s`},
		{"admin", base + "health_checks:\n  web1:\n    type: http\n    admin: off\n", `config.yaml:9: health_checks.web1.admin: unknown value "off", want one of auto, up, down`},

		// calculated checks
		{"children missing", base + "health_checks:\n  all:\n    type: calculated\n", `config.yaml:7: health_checks.all.children: at least one child is required`},
		{"child unknown", base + "health_checks:\n  all:\n    type: calculated\n    children:\n      - web9\n", `config.yaml:10: health_checks.all.children[0]: unknown health check "web9"`},
		{"child duplicate", base + "health_checks:\n  a:\n    type: icmp\n  all:\n    type: calculated\n    children: [a, a]\n    min_healthy: 1\n", `config.yaml:11: health_checks.all.children[1]: duplicate child "a"`},
		{"min_healthy range", base + "health_checks:\n  a:\n    type: icmp\n  all:\n    type: calculated\n    children: [a]\n    min_healthy: 2\n", `config.yaml:12: health_checks.all.min_healthy: 2 out of range 1-1 (the number of children)`},
		{"cycle", base + "health_checks:\n  a:\n    type: calculated\n    children: [b]\n  b:\n    type: calculated\n    children:\n      - c\n  c:\n    type: calculated\n    children:\n      - a\n", `config.yaml:17: health_checks.c.children[0]: cycle a -> b -> c -> a`},
		{"self cycle", base + "health_checks:\n  a:\n    type: calculated\n    children:\n      - a\n", `config.yaml:10: health_checks.a.children[0]: cycle a -> a`},

		// records
		{"unknown check", base + `health_checks:
  web1:
    type: http
records:
  - name: www.example.test.
    type: A
    answers:
      - { value: 198.18.1.1, check: web1 }
      - { value: 198.18.1.2, check: web9 }
`, `config.yaml:14: records[0].answers[1].check: unknown health check "web9"`},
		{"name outside zones", base + "records:\n  - name: www.other.test\n    type: A\n    answers: [{value: 198.18.1.1}]\n", `config.yaml:7: records[0].name: www.other.test. is not inside any zone in zones`},
		{"name missing", base + "records:\n  - type: A\n    answers: [{value: 198.18.1.1}]\n", `config.yaml:7: records[0].name: required`},
		{"type missing", base + "records:\n  - name: www.example.test.\n    answers: [{value: 198.18.1.1}]\n", `config.yaml:7: records[0].type: required, A, AAAA or CNAME`},
		{"type unsupported", base + "records:\n  - name: www.example.test.\n    type: MX\n    answers: [{value: 198.18.1.1}]\n", `config.yaml:8: records[0].type: unsupported type "MX", want A, AAAA or CNAME`},
		{"duplicate record", base + "records:\n  - name: www.example.test.\n    type: A\n    answers: [{value: 198.18.1.1}]\n  - name: WWW.example.test\n    type: a\n    answers: [{value: 198.18.1.2}]\n", `config.yaml:10: records[1].name: duplicate record www.example.test. A, first at line 7`},
		{"answers missing", base + "records:\n  - name: www.example.test.\n    type: A\n", `config.yaml:7: records[0].answers: at least one answer is required`},
		{"too many answers", base + "records:\n  - name: www.example.test.\n    type: A\n    answers:\n" + answers(65), `config.yaml:9: records[0].answers: record has 65 answers, at most 64 are allowed`},
		{"only backups", base + "records:\n  - name: www.example.test.\n    type: A\n    answers:\n      - { value: 198.18.1.1, backup: true }\n", `config.yaml:9: records[0].answers: every answer is a backup: at least one must not be`},
		{"duplicate answer", base + "records:\n  - name: www.example.test.\n    type: A\n    answers:\n      - value: 198.18.1.1\n      - value: 198.18.1.1\n", `config.yaml:11: records[0].answers[1].value: duplicate answer 198.18.1.1, first at line 10`},
		{"answer value missing", base + "records:\n  - name: www.example.test.\n    type: A\n    answers:\n      - weight: 2\n", `config.yaml:10: records[0].answers[0].value: required: an address, or alias: a name`},
		{"answer value invalid", base + "records:\n  - name: www.example.test.\n    type: A\n    answers:\n      - value: 198.18.1\n", `config.yaml:10: records[0].answers[0].value: invalid IP address "198.18.1"`},
		{"answer family", base + "records:\n  - name: www.example.test.\n    type: A\n    answers:\n      - value: fd53::1\n", `config.yaml:10: records[0].answers[0].value: fd53::1 is not an IPv4 address, as type A needs`},
		{"answer family v6", base + "records:\n  - name: www.example.test.\n    type: AAAA\n    answers:\n      - value: 198.18.1.1\n", `config.yaml:10: records[0].answers[0].value: 198.18.1.1 is not an IPv6 address, as type AAAA needs`},
		{"weight", base + "records:\n  - name: www.example.test.\n    type: A\n    answers:\n      - { value: 198.18.1.1, weight: 256 }\n", `config.yaml:10: records[0].answers[0].weight: 256 out of range 0-255`},
		{"weight negative", base + "records:\n  - name: www.example.test.\n    type: A\n    answers:\n      - { value: 198.18.1.1, weight: -1 }\n", `config.yaml:10: records[0].answers[0].weight: -1 out of range 0-255`},
		{"policy", base + "records:\n  - name: www.example.test.\n    type: A\n    policy: random\n    answers: [{value: 198.18.1.1}]\n", `config.yaml:9: records[0].policy: unknown value "random", want one of multivalue, failover, weighted, round_robin`},
		{"when_all_down", base + "records:\n  - name: www.example.test.\n    type: A\n    when_all_down: drop\n    answers: [{value: 198.18.1.1}]\n", `config.yaml:9: records[0].when_all_down: unknown value "drop", want one of answer_all, nodata, servfail`},
		{"stale_policy", base + "records:\n  - name: www.example.test.\n    type: A\n    stale_policy: drop\n    answers: [{value: 198.18.1.1}]\n", `config.yaml:9: records[0].stale_policy: unknown value "drop", want one of keep, answer_all`},
		{"max_answers", base + "records:\n  - name: www.example.test.\n    type: A\n    max_answers: 9\n    answers: [{value: 198.18.1.1}]\n", `config.yaml:9: records[0].max_answers: 9 out of range 1-8`},
		{"min_healthy count", base + "records:\n  - name: www.example.test.\n    type: A\n    min_healthy: \"2\"\n    answers: [{value: 198.18.1.1}]\n", `config.yaml:9: records[0].min_healthy: 2 out of range 0-1 (the number of answers)`},
		{"min_healthy percent", base + "records:\n  - name: www.example.test.\n    type: A\n    min_healthy: 150%\n    answers: [{value: 198.18.1.1}]\n", `config.yaml:9: records[0].min_healthy: 150% out of range 0-100%`},
		{"min_healthy syntax", base + "records:\n  - name: www.example.test.\n    type: A\n    min_healthy: half\n    answers: [{value: 198.18.1.1}]\n", `config.yaml:9: records[0].min_healthy: expected a count such as 2 or a percentage such as 50%, got "half"`},
		{"ttl", base + "records:\n  - name: www.example.test.\n    type: A\n    ttl: 4294967295\n    answers: [{value: 198.18.1.1}]\n", `config.yaml:9: records[0].ttl: 4294967295 exceeds 2147483647`},
		{"ttl_degraded", base + "records:\n  - name: www.example.test.\n    type: A\n    ttl: 30\n    ttl_degraded: 60\n    answers: [{value: 198.18.1.1}]\n", `config.yaml:10: records[0].ttl_degraded: 60 exceeds ttl 30`},

		// aliases and CNAMEs
		{"alias and value", base + "records:\n  - name: example.test.\n    type: A\n    answers:\n      - { value: 198.18.1.1, alias: lb.example.test }\n", `config.yaml:10: records[0].answers[0].value: give value or alias, not both`},
		{"alias outside zones", base + "records:\n  - name: example.test.\n    type: A\n    answers:\n      - alias: lb.other.test\n", `config.yaml:10: records[0].answers[0].alias: lb.other.test. is not inside any zone in zones: an alias answers a set this server serves`},
		{"alias to itself", base + "records:\n  - name: example.test.\n    type: A\n    answers:\n      - alias: Example.Test\n", `config.yaml:10: records[0].answers[0].alias: alias loop: example.test. A aliases itself`},
		{"alias loop", base + "records:\n  - name: a.example.test.\n    type: A\n    answers: [{alias: b.example.test}]\n  - name: b.example.test.\n    type: A\n    answers: [{alias: a.example.test}]\n",
			"config.yaml:9: records[0].answers[0].alias: alias loop: a.example.test. → b.example.test. → a.example.test. (records[1], line 10)\n" +
				"config.yaml:12: records[1].answers[0].alias: alias loop: b.example.test. → a.example.test. → b.example.test. (records[0], line 7)"},
		{"alias chain", base + "records:\n  - name: a.example.test.\n    type: A\n    answers: [{alias: b.example.test}]\n  - name: b.example.test.\n    type: A\n    answers: [{alias: c.example.test}, {value: 198.18.1.1}]\n",
			`config.yaml:9: records[0].answers[0].alias: alias chain: b.example.test. A holds aliases too (records[1], line 10); point at the end of the chain`},
		{"alias to a CNAME", base + "records:\n  - name: a.example.test.\n    type: A\n    answers: [{alias: b.example.test}]\n  - name: b.example.test.\n    type: CNAME\n    answers: [{value: c.example.test}]\n",
			`config.yaml:9: records[0].answers[0].alias: alias chain: b.example.test. is a CNAME (records[1], line 10); an alias points at an A or AAAA set`},
		{"evaluate_target_health with check", base + "health_checks:\n  web1: { type: tcp, target: 198.18.1.1, port: 80 }\nrecords:\n  - name: a.example.test.\n    type: A\n    answers:\n      - { alias: b.example.test, evaluate_target_health: true, check: web1 }\n",
			`config.yaml:12: records[0].answers[0].check: evaluate_target_health takes the health of the alias's target: give a check or evaluate_target_health, not both`},
		{"evaluate_target_health on a value", base + "records:\n  - name: a.example.test.\n    type: A\n    answers:\n      - { value: 198.18.1.1, evaluate_target_health: true }\n", `config.yaml:10: records[0].answers[0].evaluate_target_health: applies to an alias only`},
		{"alias check without target", base + "health_checks:\n  web1: { type: tcp, port: 80 }\nrecords:\n  - name: a.example.test.\n    type: A\n    answers:\n      - { alias: b.example.test, check: web1 }\n",
			`config.yaml:12: records[0].answers[0].check: check web1 has no target, and this answer has no address for it to probe: give the check a target`},
		{"cname at apex", base + "records:\n  - name: example.test.\n    type: CNAME\n    answers: [{value: lb.example.test}]\n", `config.yaml:7: records[0].name: example.test. is a zone apex, which holds the SOA and NS: a CNAME cannot be there; give the A and AAAA records alias answers instead`},
		{"cname beside A", base + "records:\n  - name: www.example.test.\n    type: A\n    answers: [{value: 198.18.1.1}]\n  - name: www.example.test.\n    type: CNAME\n    answers: [{value: lb.example.test}]\n", `config.yaml:10: records[1].name: www.example.test. has a CNAME, so it can hold no other record, but records[0] (line 7) is its A set`},
		{"cname max_answers", base + "records:\n  - name: www.example.test.\n    type: CNAME\n    max_answers: 2\n    answers: [{value: a.example.test}, {value: b.example.test}]\n", `config.yaml:9: records[0].max_answers: a CNAME set answers one target: set 1 or leave the key out`},
		{"cname to itself", base + "records:\n  - name: www.example.test.\n    type: CNAME\n    answers: [{value: WWW.example.test}]\n", `config.yaml:9: records[0].answers[0].value: CNAME loop: www.example.test. points to itself`},
		{"cname duplicate target", base + "records:\n  - name: www.example.test.\n    type: CNAME\n    answers:\n      - value: a.example.test\n      - value: a.example.test.\n", `config.yaml:11: records[0].answers[1].value: duplicate target a.example.test., first at line 10`},
		{"cname with alias", base + "records:\n  - name: www.example.test.\n    type: CNAME\n    answers:\n      - alias: a.example.test\n", `config.yaml:10: records[0].answers[0].alias: a CNAME answer names its target in value; alias is for A and AAAA records`},
		{"cname value missing", base + "records:\n  - name: www.example.test.\n    type: CNAME\n    answers:\n      - weight: 1\n", `config.yaml:10: records[0].answers[0].value: required: the name the CNAME points to`},

		// aggregation
		{"push_interval", base + "aggregation:\n  push_interval: 10ms\n", `config.yaml:7: aggregation.push_interval: 10ms is below the minimum of 50ms`},
		{"quorum range", base + "aggregation:\n  quorum: 100%\n", `config.yaml:7: aggregation.quorum: 100% out of range 0-99.99%`},
		{"quorum syntax", base + "aggregation:\n  quorum: 0.18\n", `config.yaml:7: aggregation.quorum: expected a percentage such as 18%, got "0.18"`},
		{"stale_after", base + "aggregation:\n  push_interval: 2s\n  stale_after: 2s\n", `config.yaml:8: aggregation.stale_after: 2s must be longer than push_interval 2s (or 0 for never)`},
		{"stale_after negative", base + "aggregation:\n  stale_after: -1s\n", `config.yaml:7: aggregation.stale_after: must not be negative, got -1s`},
		{"table_size", base + "aggregation:\n  table_size: 1000\n", `config.yaml:7: aggregation.table_size: 1000 is not a power of two from 16 to 4194304`},
		{"table_size too small", base + "aggregation:\n  table_size: 8\n", `config.yaml:7: aggregation.table_size: 8 is not a power of two from 16 to 4194304`},
		{"hysteresis order", base + "aggregation:\n  hysteresis:\n    down: 85%\n    up: 20%\n", `config.yaml:7: aggregation.hysteresis: want 0% <= down < up <= 100%, got down 85% and up 20%`},
		{"hysteresis missing up", base + "aggregation:\n  hysteresis:\n    down: 20%\n", `config.yaml:7: aggregation.hysteresis.up: required`},
		{"hysteresis and quorum", base + "aggregation:\n  quorum: 50%\n  hysteresis: { down: 20%, up: 85% }\n", `config.yaml:7: aggregation.quorum: hysteresis replaces the quorum: give one or the other, not both`},
		{"invert on calculated", base + "health_checks:\n  a: { type: tcp, target: 198.18.1.1, port: 80 }\n  c: { type: calculated, children: [a], invert: true }\n", `config.yaml:8: health_checks.c.invert: does not apply to calculated checks`},
		{"invert on external", base + "health_checks:\n  e: { type: external, invert: true }\n", `config.yaml:7: health_checks.e.invert: does not apply to external checks`},
		{"regions too few", base + "health_checks:\n  web:\n    type: tcp\n    port: 80\n    regions: [eu, us]\n", `config.yaml:10: health_checks.web.regions: 2 distinct regions, at least 3 are required`},
		{"regions empty", base + "health_checks:\n  web: { type: tcp, port: 80, regions: [] }\n", `config.yaml:7: health_checks.web.regions: 0 distinct regions, at least 3 are required`},
		{"regions duplicate", base + "health_checks:\n  web:\n    type: tcp\n    port: 80\n    regions:\n      - eu\n      - us\n      - eu\n", "config.yaml:10: health_checks.web.regions: 2 distinct regions, at least 3 are required\nconfig.yaml:13: health_checks.web.regions[2]: duplicate region \"eu\", first at line 11"},
		{"region too long", base + "health_checks:\n  web: { type: tcp, port: 80, regions: [eu, us, " + strings.Repeat("a", 33) + "] }\n", `config.yaml:7: health_checks.web.regions[2]: region "` + strings.Repeat("a", 33) + `" must be 1-32 bytes`},
		{"regions on calculated", base + "health_checks:\n  a: { type: tcp, target: 198.18.1.1, port: 80 }\n  c: { type: calculated, children: [a], regions: [eu, us, ap] }\n", `config.yaml:8: health_checks.c.regions: does not apply to calculated checks`},
		{"regions on external", base + "health_checks:\n  e: { type: external, regions: [eu, us, ap] }\n", `config.yaml:7: health_checks.e.regions: does not apply to external checks`},

		// several errors come back together, in file order
		{"joined", base + "health_checks:\n  web1:\n    type: http\n    admin: off\n    path: x\nrecords:\n  - name: www.other.test.\n    type: A\n    answers: [{value: 198.18.1.1, check: web1}]\n",
			"config.yaml:9: health_checks.web1.admin: unknown value \"off\", want one of auto, up, down\n" +
				"config.yaml:10: health_checks.web1.path: must start with /, got \"x\"\n" +
				"config.yaml:12: records[0].name: www.other.test. is not inside any zone in zones"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, tt.config)
			if err == nil {
				t.Fatalf("loaded %+v, want error %q", c, tt.want)
			}
			dir, _ := os.Getwd()
			want := strings.ReplaceAll(tt.want, "DIR", dir)
			if got := err.Error(); got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func TestFull(t *testing.T) {
	c, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	zone, err := filepath.Abs("testdata/zones/example.test.zone")
	if err != nil {
		t.Fatal(err)
	}
	tokenFile, err := filepath.Abs("testdata/api.token") // relative to the config's directory
	if err != nil {
		t.Fatal(err)
	}
	testdata := filepath.Dir(tokenFile)
	http := func(id string) Check {
		return Check{ID: id, Type: "http", Port: 80, Path: "/", Method: "GET", ExpectStatus: []prober.StatusRange{{Lo: 200, Hi: 399}},
			Interval: 10 * time.Second, Timeout: 2 * time.Second, UnhealthyThreshold: 3, HealthyThreshold: 3, Admin: "auto", Cell: "red"}
	}
	web1 := http("web1")
	web1.Target, web1.Port, web1.Path, web1.Method, web1.Host = "198.18.1.1", 8080, "/healthz", "HEAD", "www.example.test"
	web1.ExpectStatus = []prober.StatusRange{{Lo: 200, Hi: 200}, {Lo: 204, Hi: 204}, {Lo: 300, Hi: 399}}
	web1.ExpectBody = "ok"
	web1.Interval, web1.Timeout, web1.UnhealthyThreshold, web1.HealthyThreshold = time.Second, 500*time.Millisecond, 2, 4
	web2 := http("web2")
	web2.Type, web2.Target, web2.Port, web2.SNI = "https", "web2.backend.test", 443, "www.example.test"
	web2.ExpectStatus, web2.KeepAlive = []prober.StatusRange{{Lo: 200, Hi: 200}}, true
	probed := func(id string, typ CheckType) Check {
		return Check{ID: id, Type: typ, Interval: 10 * time.Second, Timeout: 2 * time.Second, UnhealthyThreshold: 3, HealthyThreshold: 3, Admin: "auto", Cell: "red"}
	}
	db := probed("db", "tcp")
	db.Port, db.Admin = 5432, "up"
	syslog := probed("syslog", "udp")
	syslog.Target, syslog.Port, syslog.Payload, syslog.ExpectReply = "198.18.1.9", 514, "ping", "pong"
	gw := probed("gw", "icmp")
	gw.Target, gw.Invert = "fd53::1", true
	ns := probed("ns", "dns")
	ns.Target, ns.Port, ns.QName, ns.QType, ns.ExpectRcode, ns.ExpectAnswer = "198.18.0.2", 53, "www.example.test.", dns.TypeAAAA, dns.RcodeNameError, "fd53::10"
	orders := probed("orders", "metric")
	orders.URL, orders.Query, orders.InsufficientData = "http://198.18.1.8:9090", "sum(rate(orders_total[5m])) > 0", "unhealthy"
	wantChecks := []Check{web1, web2, db, syslog, gw, ns, orders,
		{ID: "web", Type: "calculated", Children: []string{"web1", "web2", "gw"}, MinHealthy: 2, Admin: "down", Cell: "red"},
		{ID: "deploy", Type: "external", TTL: time.Minute, Admin: "auto", Cell: "blue", Initial: "healthy"},
		{ID: "alias:www.example.test.:A", Type: "calculated", Children: []string{"web1", "web2", "web"}, MinHealthy: 1, Admin: "auto", Cell: "red"},
	}

	var ids, wantIDs []string
	for i := range c.Checks.Len() {
		ids = append(ids, c.Checks.ID(i))
	}
	for _, w := range wantChecks {
		wantIDs = append(wantIDs, w.ID)
		got, ok := c.Checks.Get(w.ID)
		if w.ID == "web2" {
			if got, want := got.ExpectBodyRegexp.String(), `"status":\s*"(ok|degraded)"`; got != want {
				t.Errorf("web2 regexp %q, want %q", got, want)
			}
			got.ExpectBodyRegexp = nil // compared above; compiled programs are not comparable
		}
		if !ok || !reflect.DeepEqual(got, w) {
			t.Errorf("check %s:\ngot  %+v\nwant %+v", w.ID, got, w)
		}
	}
	same(t, "check ids", ids, wantIDs)
	same(t, "File", c.File, "testdata/full.yaml")
	same(t, "Server", c.Server, Server{
		Interfaces: []string{"eth0", "eth1"},
		XDPMode:    "native",
		Listen:     []netip.AddrPort{netip.MustParseAddrPort("198.18.0.2:53"), netip.MustParseAddrPort("[fd53::2]:53")},
		API:        "127.0.0.1:9153",
		BPFFS:      "/sys/fs/bpf/steadydns-test",
		StateDir:   "/var/lib/steadydns-test",
		MaxRecords: 4096,
		IDServer:   true,
		NSID:       []byte("edge-ams-1"),
		Debug:      Debug{Name: "_debug.example.test.", Allow: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24"), netip.MustParsePrefix("fd53::/64")}},
		TCP:        TCP{MaxConnections: 500, MaxPerPrefix: 20, IdleTimeout: 5 * time.Second, MaxPipelined: 50, MaxLifetime: 90 * time.Second},
		RRL: &RRL{Rate: 20, Slip: 3, Window: 5 * time.Second, IPv4Prefix: 28, IPv6Prefix: 48, TableSize: 20000,
			Exempt: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24"), netip.MustParsePrefix("fd53::/64")}},
		APITokenFile:     tokenFile,
		APIReadTokenFile: filepath.Join(testdata, "api.read.token"),
		APIHosts:         []string{"api.example.test", "steadydns.example.test"},
		APITLS:           &APITLS{Cert: filepath.Join(testdata, "api.crt"), Key: filepath.Join(testdata, "api.key")},
		DoT: &DoT{Listen: []netip.AddrPort{netip.MustParseAddrPort("198.18.0.2:853"), netip.MustParseAddrPort("[fd53::2]:853")},
			Cert: filepath.Join(testdata, "api.crt"), Key: filepath.Join(testdata, "api.key")},
		Geo: &Geo{Regions: []Region{
			{Name: "eu", Prefixes: []netip.Prefix{
				netip.MustParsePrefix("198.18.0.0/25"), netip.MustParsePrefix("fd53::/64"),
				netip.MustParsePrefix("198.18.2.0/24"), netip.MustParsePrefix("fd53:2::/48"),
			}, Next: []string{"us"}},
			{Name: "us", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.128/25")}},
		}},
	})
	same(t, "Zones", c.Zones, []Zone{{Origin: "example.test.", File: zone}})
	addr := netip.MustParseAddr
	same(t, "Records", c.Records, []Record{{
		Name: "www.example.test.", Type: dns.TypeA, TTL: 30, Policy: "failover", MaxAnswers: 2, WhenAllDown: "nodata",
		MinHealthy: MinHealthy{Percent: 50}, TTLDegraded: 10, Stale: "answer_all",
		Answers: []Answer{
			{Value: addr("198.18.1.1"), Check: "web1", Weight: 1, Region: "eu"},
			{Value: addr("198.18.1.2"), Check: "web2", Weight: 10, Priority: 1, Region: "us"},
			{Value: addr("198.18.1.3"), Check: "web", Backup: true},
		},
	}, {
		Name: "www.example.test.", Type: dns.TypeAAAA, TTL: 60, Policy: "weighted", MaxAnswers: MaxAnswers, WhenAllDown: "answer_all",
		MinHealthy: MinHealthy{Count: 1}, Stale: "keep",
		Answers: []Answer{
			{Value: addr("fd53::10"), Check: "deploy", Weight: 255},
			{Value: addr("fd53::11"), Weight: 1},
		},
	}, {
		Name: "example.test.", Type: dns.TypeA, TTL: 60, Policy: "multivalue", MaxAnswers: MaxAnswers, WhenAllDown: "answer_all", Stale: "keep",
		Answers: []Answer{{Alias: "www.example.test.", EvaluateTargetHealth: true, Weight: 1}},
	}, {
		Name: "cdn.example.test.", Type: dns.TypeCNAME, TTL: 60, Policy: "multivalue", MaxAnswers: MaxAnswers, WhenAllDown: "answer_all", Stale: "keep",
		Answers: []Answer{{Target: "www.example.test.", Check: "web1", Weight: 1}},
	}})
	same(t, "Aggregation", c.Aggregation, Aggregation{
		PushInterval: 500 * time.Millisecond, Quorum: 0.18, StaleAfter: 5 * time.Second, TableSize: 1024,
		Hysteresis: &Hysteresis{Down: 0.20, Up: 0.85}, CheckerTimeout: 1500 * time.Millisecond,
	})

	same(t, "Cluster", c.Cluster, Cluster{Config: ConfigFile,
		Cells:    []Cell{{Name: "red", Probers: 3, Aggregators: 2}, {Name: "blue", Probers: 2, Aggregators: 2}},
		Capacity: Capacity{ChecksPerProber: 2000, CheckerChecksPerAggregator: 100000, EdgesPerAggregator: 50}, Edges: 10,
	})

	// Lines let other packages report their own errors at the right place.
	same(t, "Line", c.Line("records[0].answers[1].check"), lineOf(t, "testdata/full.yaml", "{ value: 198.18.1.2, check: web2,"))
	same(t, "Line of a missing key", c.Line("records[0].answers[1].nope"), 0)
	same(t, "Errorf", c.Errorf("records[1].answers[1].check", "not %s", "here").Error(),
		fmt.Sprintf("testdata/full.yaml:%d: records[1].answers[1].check: not here", lineOf(t, "testdata/full.yaml", "- value: fd53::11")))
}

func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\ngot  %+v\nwant %+v", what, got, want)
	}
}

func TestDefaults(t *testing.T) {
	c, err := load(t, base+`health_checks:
  h: {type: http}
  s: {type: https}
  t: {type: tcp, port: 22}
  u: {type: udp, port: 53, payload: x}
  i: {type: icmp}
  d: {type: dns, qname: example.test}
  c: {type: calculated, children: [h, s]}
  e: {type: external}
  fast: {type: tcp, port: 22, interval: 1s}
records:
  - name: www.example.test.
    type: A
    answers: [{value: 198.18.1.1}]
`)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "Server", c.Server, Server{
		XDPMode: "auto", Listen: []netip.AddrPort{netip.MustParseAddrPort("198.18.0.2:53")},
		API: "127.0.0.1:9153", BPFFS: "/sys/fs/bpf/steadydns", StateDir: "/var/lib/steadydns", MaxRecords: 65536, VersionServer: true,
		Debug: Debug{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}},
		// Rate limiting is on by default.
		RRL: &RRL{Rate: 200, Slip: 2, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56, TableSize: 65536},
	})
	same(t, "Aggregation", c.Aggregation, Aggregation{PushInterval: time.Second, Quorum: 0.18, StaleAfter: 10 * time.Second, TableSize: 65536, CheckerTimeout: 3 * time.Second})
	same(t, "Record", c.Records[0], Record{
		Name: "www.example.test.", Type: dns.TypeA, TTL: 60, Policy: "multivalue", MaxAnswers: 8, WhenAllDown: "answer_all", Stale: "keep",
		Answers: []Answer{{Value: netip.MustParseAddr("198.18.1.1"), Weight: 1}},
	})
	probed := func(id string, typ CheckType, port uint16) Check {
		return Check{ID: id, Type: typ, Port: port, Interval: 10 * time.Second, Timeout: 2 * time.Second, UnhealthyThreshold: 3, HealthyThreshold: 3, Admin: "auto", Cell: DefaultCell}
	}
	h := probed("h", "http", 80)
	h.Path, h.Method, h.ExpectStatus = "/", "GET", []prober.StatusRange{{Lo: 200, Hi: 399}}
	s := h
	s.ID, s.Type, s.Port, s.TLSVerify = "s", "https", 443, true
	u := probed("u", "udp", 53)
	u.Payload = "x"
	d := probed("d", "dns", 53)
	d.QName, d.QType = "example.test.", dns.TypeA
	fast := probed("fast", "tcp", 22)
	fast.Interval, fast.Timeout = time.Second, time.Second // the timeout default never exceeds the interval
	for _, want := range []Check{h, s, probed("t", "tcp", 22), u, probed("i", "icmp", 0), d, fast,
		{ID: "c", Type: "calculated", Children: []string{"h", "s"}, MinHealthy: 2, Admin: "auto", Cell: DefaultCell},
		{ID: "e", Type: "external", TTL: 30 * time.Second, Admin: "auto", Cell: DefaultCell, Initial: "healthy"},
	} {
		got, _ := c.Checks.Get(want.ID)
		same(t, "check "+want.ID, got, want)
	}
}

// TestTalkingChecks: send's escapes are decoded whatever the quoting, and
// expect and expect_regexp reach the check of their type.
func TestTalkingChecks(t *testing.T) {
	c, err := load(t, base+`health_checks:
  redis: {type: tcp, port: 6379, send: 'PING\r\n', expect: "+PONG"}
  quoted: {type: tcp, port: 6379, send: "PING\r\n", expect_regexp: '^\+PONG\r\n'}
  binary: {type: tcp, port: 9, send: 'a\x00\xff\t\\b'}
  syslog: {type: udp, port: 514, payload: ping, expect_regexp: '^po+ng$'}
records:
  - name: www.example.test.
    type: A
    answers: [{value: 198.18.1.1}]
`)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]struct{ send, expect, re string }{
		"redis":  {"PING\r\n", "+PONG", ""},
		"quoted": {"PING\r\n", "", `^\+PONG\r\n`},
		"binary": {"a\x00\xff\t\\b", "", ""},
		"syslog": {"", "", "^po+ng$"},
	} {
		got, _ := c.Checks.Get(id)
		re := ""
		if got.ExpectRegexp != nil {
			re = got.ExpectRegexp.String()
		}
		same(t, id+" send, expect, expect_regexp", []string{got.Send, got.Expect, re}, []string{want.send, want.expect, want.re})
	}
}

// TestCheckRegions: a probed check keeps its regions in order; one
// without them names none.
func TestCheckRegions(t *testing.T) {
	c, err := load(t, base+`health_checks:
  web: {type: tcp, port: 80, regions: [eu-west, us-east, ap-south]}
  db: {type: tcp, port: 5432}
records:
  - name: www.example.test.
    type: A
    answers: [{value: 198.18.1.1}]
`)
	if err != nil {
		t.Fatal(err)
	}
	web, _ := c.Checks.Get("web")
	same(t, "web regions", web.Regions, []string{"eu-west", "us-east", "ap-south"})
	db, _ := c.Checks.Get("db")
	same(t, "db regions", db.Regions, []string(nil))
	k, _ := c.Checks.Find("web")
	for r, want := range map[string]bool{"eu-west": true, "ap-south": true, "sa-east": false, "": false} {
		if got := c.Checks.InRegion(k, r); got != want {
			t.Errorf("web InRegion(%q) = %v, want %v", r, got, want)
		}
	}
	k, _ = c.Checks.Find("db")
	for _, r := range []string{"eu-west", ""} {
		if !c.Checks.InRegion(k, r) {
			t.Errorf("db, without regions, not InRegion(%q)", r)
		}
	}
}

func TestHash(t *testing.T) {
	const (
		web1 = "  web1:\n    type: http\n    interval: 1s\n    expect_status: [\"200-399\"]\n"
		web2 = "  web2:\n    type: tcp\n    port: 443\n"
	)
	const a = base + "health_checks:\n" + web1 + web2 + `records:
  - name: www.example.test.
    type: A
    answers:
      - value: 198.18.1.1
        check: web1
      - value: 198.18.1.2
        check: web2
        weight: 2
aggregation:
  quorum: 18%
`
	// The same config: flow style, keys reordered, defaults spelled out,
	// other duration spellings, comments, and a different server section,
	// which other hosts do not share.
	const reformatted = `# comment
zones: [{file: example.test.zone, origin: EXAMPLE.TEST}]
server: {api: "127.0.0.1:9999", listen: ["[fd53::2]:53"]}
aggregation: {table_size: 65536, quorum: 18.0%, push_interval: 1000ms}
records:
  - answers: [{check: web1, value: 198.18.1.1, weight: 1}, {weight: 2, check: web2, value: 198.18.1.2}]
    type: a
    ttl: 60
    name: WWW.Example.Test
health_checks:
  web1: {interval: 1000ms, type: http, port: 80, path: /, timeout: 1s, expect_status: 200-399}
  web2: {port: 443, type: tcp}
`
	hash := func(config string) uint64 {
		t.Helper()
		c, err := load(t, config)
		if err != nil {
			t.Fatal(err)
		}
		return c.Hash
	}
	h := hash(a)
	if got := hash(reformatted); got != h {
		t.Errorf("reformatted config hashes to %#x, want %#x", got, h)
	}
	changed := map[string]string{
		"check interval": strings.Replace(a, "interval: 1s", "interval: 2s", 1),
		"answer weight":  strings.Replace(a, "weight: 2", "weight: 3", 1),
		"quorum":         strings.Replace(a, "quorum: 18%", "quorum: 19%", 1),
		// Table indexes may follow check order, so the order is part of the hash.
		"check order": strings.Replace(a, web1+web2, web2+web1, 1),
	}
	for name, config := range changed {
		if hash(config) == h {
			t.Errorf("%s: hash unchanged", name)
		}
	}
}

func TestHashFull(t *testing.T) {
	// full.yaml sets every field, so this also proves the encoder handles
	// every field's kind.
	a, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash == 0 || a.Hash != b.Hash {
		t.Errorf("hashes %#x and %#x, want equal and non-zero", a.Hash, b.Hash)
	}
}

func TestErrorValue(t *testing.T) {
	_, err := load(t, base+"records:\n  - name: www.example.test.\n    type: A\n    answers: [{value: 198.18.1.1, check: nope}]\n")
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a *config.Error", err)
	}
	same(t, "Error", *e, Error{File: "config.yaml", Line: 9, Key: "records[0].answers[0].check", Msg: `unknown health check "nope"`})
	same(t, "without line or key", (&Error{File: "c.yaml", Msg: "m"}).Error(), "c.yaml: m")
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "nope.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v, want a not-exist error", err)
	}
}

// TestProbed: the daemon hands exactly the probed types to the prober, as
// the prober's type of the same name.
func TestProbed(t *testing.T) {
	for _, tc := range []struct {
		typ    CheckType
		want   prober.Type
		probed bool
	}{
		{"http", prober.HTTP, true}, {"https", prober.HTTPS, true}, {"tcp", prober.TCP, true},
		{"udp", prober.UDP, true}, {"icmp", prober.ICMP, true}, {"dns", prober.DNS, true},
		{"metric", prober.Metric, true}, {"calculated", "", false}, {"external", "", false},
	} {
		got, ok := tc.typ.Probed()
		if ok != tc.probed || got != tc.want {
			t.Errorf("%s.Probed() = %q, %v; want %q, %v", tc.typ, got, ok, tc.want, tc.probed)
		}
	}
}

// TestIdentityKeys: id.server is off and version.server on by default, as
// in BIND; the debug name is off and, once named, answers loopback alone
// unless told otherwise.
func TestIdentityKeys(t *testing.T) {
	c, err := load(t, base)
	if err != nil {
		t.Fatal(err)
	}
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	if s := c.Server; s.IDServer || !s.VersionServer || s.Debug.Name != "" || !slices.Equal(s.Debug.Allow, loopback) {
		t.Errorf("defaults: id_server %v, version_server %v, debug %+v", s.IDServer, s.VersionServer, s.Debug)
	}
	set := strings.Replace(base, "server:\n", "server:\n  id_server: true\n  version_server: false\n  debug: { name: _Debug.Example.Net, allow: [198.18.0.7/24] }\n", 1)
	if c, err = load(t, set); err != nil {
		t.Fatal(err)
	}
	if s := c.Server; !s.IDServer || s.VersionServer || s.Debug.Name != "_debug.example.net." || !slices.Equal(s.Debug.Allow, []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24")}) {
		t.Errorf("set: id_server %v, version_server %v, debug %+v", s.IDServer, s.VersionServer, s.Debug)
	}
	for _, tc := range []struct{ config, want string }{
		{strings.Replace(base, "server:\n", "server:\n  debug: { allow: [198.18.0.300/24] }\n", 1), `config.yaml:2: server.debug.allow[0]: invalid prefix "198.18.0.300/24", want a CIDR such as 198.18.0.0/24`},
		{strings.Replace(base, "server:\n", "server:\n  id_server: yes please\n", 1), `config.yaml:2: server.id_server: expected true or false`},
	} {
		if _, err := load(t, tc.config); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// lineOf is the 1-based line of file that holds text, which must occur once.
func lineOf(t *testing.T, file, text string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), text) != 1 {
		t.Fatalf("%s: %q is not on exactly one line", file, text)
	}
	return strings.Count(string(b[:strings.Index(string(b), text)]), "\n") + 1
}

func TestNSID(t *testing.T) {
	withNSID := func(v string) string {
		return strings.Replace(base, "server:\n", "server:\n  nsid: "+v+"\n", 1)
	}
	for _, tt := range []struct {
		name, value string
		want        []byte
		err         string
	}{
		{"text", "edge-ams-1", []byte("edge-ams-1"), ""},
		{"hex", "hex:00ff0a", []byte{0, 0xff, 0x0a}, ""},
		{"longest", strings.Repeat("n", MaxNSID), []byte(strings.Repeat("n", MaxNSID)), ""},
		{"empty is off", `""`, nil, ""},
		{"too long", strings.Repeat("n", MaxNSID+1), nil, fmt.Sprintf("config.yaml:2: server.nsid: %d bytes, more than %d", MaxNSID+1, MaxNSID)},
		{"too long in hex", "hex:" + strings.Repeat("ab", MaxNSID+1), nil, fmt.Sprintf("config.yaml:2: server.nsid: %d bytes, more than %d", MaxNSID+1, MaxNSID)},
		{"bad hex", "hex:0g", nil, `config.yaml:2: server.nsid: invalid hex "0g" after hex:, want pairs of hex digits such as hex:0a01`},
		{"odd hex", "hex:abc", nil, `config.yaml:2: server.nsid: invalid hex "abc" after hex:, want pairs of hex digits such as hex:0a01`},
		{"empty hex", `"hex:"`, nil, "config.yaml:2: server.nsid: hex: without a value; leave the key out to turn nsid off"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, withNSID(tt.value))
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(c.Server.NSID, tt.want) {
				t.Errorf("nsid %q, want %q", c.Server.NSID, tt.want)
			}
		})
	}
}

// TestRRLDefaults: rate limiting is on without server.rrl, at NSD's
// rate with BIND's other defaults; a section without rate takes the
// default rate; rate 0 alone turns it off.
func TestRRLDefaults(t *testing.T) {
	on := &RRL{Rate: 200, Slip: 2, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56, TableSize: 65536}
	for _, c := range []struct {
		name, yaml string
		want       *RRL
	}{
		{"absent", "", on},
		{"empty", "  rrl: {}\n", on},
		{"rate alone", "  rrl:\n    rate: 10\n", &RRL{Rate: 10, Slip: 2, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56, TableSize: 65536}},
		{"slip alone", "  rrl:\n    slip: 3\n", &RRL{Rate: 200, Slip: 3, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56, TableSize: 65536}},
		{"off", "  rrl:\n    rate: 0\n", nil},
		{"off, other keys kept", "  rrl:\n    rate: 0\n    slip: 3\n", nil},
	} {
		c2, err := Parse("config.yaml", []byte("server:\n  listen: [\"198.18.0.2:53\"]\n"+c.yaml))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		same(t, c.name, c2.Server.RRL, c.want)
	}
}

// Decoding drops each check and record from the YAML tree once decoded;
// what an alias reads again must still be whole when the alias is reached.
func TestAliasesAfterRelease(t *testing.T) {
	c, err := load(t, base+`health_checks:
  a: &web {type: tcp, port: 22}
  b: *web
records:
  - name: www.example.test.
    type: A
    answers: &two [{value: 198.18.1.1, check: a}, {value: 198.18.1.2, check: b}]
  - name: api.example.test.
    type: A
    answers: *two
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		got, ok := c.Checks.Get(id)
		if !ok || got.Type != CheckTCP || got.Port != 22 {
			t.Errorf("check %s: got %+v, %v; want a tcp check of port 22", id, got, ok)
		}
	}
	if len(c.Records) != 2 {
		t.Fatalf("got %d records, want 2", len(c.Records))
	}
	for _, r := range c.Records {
		if len(r.Answers) != 2 || r.Answers[1].Check != "b" {
			t.Errorf("record %s: got answers %+v, want the two of the anchor", r.Name, r.Answers)
		}
	}
}

func TestZoneDNSSEC(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       *DNSSEC
	}{
		{"off", "", nil},
		{"defaults", "    dnssec:\n      keys: keys/example.test\n", &DNSSEC{Keys: "DIR/keys/example.test", Algorithm: "ecdsap256sha256",
			DNSKEYTTL: time.Hour, MaxTTL: 24 * time.Hour, DSTTL: 24 * time.Hour, Propagation: time.Hour}},
		{"split ed25519", "    dnssec:\n      keys: /var/lib/k\n      algorithm: ED25519\n      split: true\n", &DNSSEC{Keys: "/var/lib/k", Algorithm: "ed25519", Split: true,
			DNSKEYTTL: time.Hour, MaxTTL: 24 * time.Hour, DSTTL: 24 * time.Hour, Propagation: time.Hour}},
		{"schedule", "    dnssec:\n      keys: /var/lib/k\n      split: true\n      dnskey_ttl: 5m\n      max_ttl: 2d\n      ds_ttl: 2h\n      propagation: 0s\n      zsk_lifetime: 90d\n",
			&DNSSEC{Keys: "/var/lib/k", Algorithm: "ecdsap256sha256", Split: true,
				DNSKEYTTL: 5 * time.Minute, MaxTTL: 48 * time.Hour, DSTTL: 2 * time.Hour, ZSKLifetime: 90 * 24 * time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, base+tc.yaml)
			if err != nil {
				t.Fatal(err)
			}
			dir, _ := os.Getwd()
			got := c.Zones[0].DNSSEC
			if tc.want != nil {
				tc.want.Keys = strings.ReplaceAll(tc.want.Keys, "DIR", dir)
			}
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Fatalf("dnssec %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestDnstap: server.dnstap takes a socket, resolved against the config's
// directory, or a TCP address, one of the two, and XDP's sample rate,
// one in 100 unless set, 0 for none.
func TestDnstap(t *testing.T) {
	with := func(v string) string { return strings.Replace(base, "server:\n", "server:\n  dnstap: "+v+"\n", 1) }
	c, err := load(t, base)
	if err != nil || c.Server.Dnstap != nil {
		t.Fatalf("default: %+v, %v; want none", c.Server.Dnstap, err)
	}
	c, err = load(t, with("{socket: tap.sock}"))
	if err != nil || c.Server.Dnstap == nil || !filepath.IsAbs(c.Server.Dnstap.Socket) || filepath.Base(c.Server.Dnstap.Socket) != "tap.sock" || c.Server.Dnstap.TCP != "" {
		t.Errorf("socket: %+v, %v; want tap.sock made absolute", c.Server.Dnstap, err)
	}
	c, err = load(t, with("{tcp: \"198.18.0.10:6000\"}"))
	if err != nil || c.Server.Dnstap == nil || c.Server.Dnstap.TCP != "198.18.0.10:6000" || c.Server.Dnstap.Sample != 100 {
		t.Errorf("tcp: %+v, %v; want sample 100", c.Server.Dnstap, err)
	}
	for _, n := range []int{0, 1, 16777216} {
		c, err = load(t, with(fmt.Sprintf("{tcp: \"198.18.0.10:6000\", sample: %d}", n)))
		if err != nil || c.Server.Dnstap.Sample != n {
			t.Errorf("sample %d: %+v, %v", n, c.Server.Dnstap, err)
		}
	}
	for _, tc := range []struct{ config, want string }{
		{with("{}"), "server.dnstap: give one of socket and tcp"},
		{with("{socket: /run/tap.sock, tcp: \"198.18.0.10:6000\"}"), "server.dnstap: give one of socket and tcp"},
		{with("{tcp: tap.example:6000}"), `server.dnstap.tcp: "tap.example:6000" is not an address and port`},
		{with("{file: /tmp/x}"), `server.dnstap.file`},
		{with("{socket: tap.sock, sample: -1}"), "server.dnstap.sample: -1 out of range 0-16777216"},
		{with("{socket: tap.sock, sample: 16777217}"), "server.dnstap.sample: 16777217 out of range 0-16777216"},
	} {
		if _, err := load(t, tc.config); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}
