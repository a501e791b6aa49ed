package zone

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzLoad gives the zone loader arbitrary zone files. It never panics;
// every error starts with the file's path, and a syntax error with its
// line and column; a problem found after parsing names the record. A zone that loads answers lookups of every name it
// holds, of every type, without panicking, and its SOA at the apex.
func FuzzLoad(f *testing.F) {
	for _, p := range []string{"testdata/example.test.zone", "../fallback/testdata/example.test.zone", "../../examples/quickstart/example.test.zone"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	const head = "$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\n"
	for _, s := range []string{
		head + "www A 1.2.3\n",
		head + "www CNAME x\nwww A 192.0.2.1\n",
		head + "$INCLUDE /etc/hosts\n",
		head + "$ORIGIN sub.example.test.\n@ NS ns\nns A 198.18.0.9\n* TXT \"wild\"\n",
		head + "d DNAME other.test.\nd DNAME x.test.\n",
		head + "( a\n",
		"$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n",
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "fuzz.zone")
	syntax := regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `:\d+:\d+: `)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		z, err := Load("example.test.", path)
		if err != nil {
			if !strings.HasPrefix(err.Error(), path+":") {
				t.Fatalf("error %q does not start with %s:", err, path)
			}
			// A syntax error the position was not moved to the front of
			// still reads "dns: … at line: l:c".
			if strings.Contains(err.Error(), "dns: ") && !syntax.MatchString(err.Error()) {
				t.Fatalf("syntax error %q does not start with its line and column", err)
			}
			return
		}
		if r := z.Lookup("example.test.", dns.TypeSOA, false); r.Kind != Answer || len(r.Answer) != 1 {
			t.Fatalf("apex SOA lookup: kind %d, %d records", r.Kind, len(r.Answer))
		}
		for name := range z.nodes {
			for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeNS, dns.TypeCNAME, dns.TypeDS, dns.TypeANY, dns.TypeTXT} {
				for _, do := range []bool{false, true} {
					z.Lookup(name, qt, do)
					z.Lookup("nx."+name, qt, do)
				}
			}
		}
	})
}
