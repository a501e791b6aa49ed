package geo

import (
	"net/netip"
	"testing"

	"github.com/steadydns/steadydns/controlplane/config"
)

func TestLookupAndRanks(t *testing.T) {
	g := New(&config.Geo{Regions: []config.Region{
		{Name: "eu", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/16"), netip.MustParsePrefix("fd53::/16")}, Next: []string{"us", "ap"}},
		{Name: "us", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.7.0/24"), netip.MustParsePrefix("fd53:7::/32")}},
		{Name: "ap", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16")}},
	}})
	for _, c := range []struct {
		addr    string
		maxBits int
		region  uint8
		bits    int
		found   bool
	}{
		{"198.18.7.9", 32, 2, 24, true},         // the longest prefix wins
		{"198.18.8.9", 32, 1, 16, true},         // only the /16 holds it
		{"198.18.7.0", 20, 1, 16, true},         // a /20 source cannot choose the /24
		{"198.19.1.1", 32, 3, 16, true},         // ap
		{"198.20.1.1", 32, 0, 0, false},         // no region
		{"fd53:7::1", 128, 2, 32, true},         // v6 longest
		{"fd53:8::1", 128, 1, 16, true},         // v6 shorter
		{"::ffff:198.18.7.1", 128, 2, 24, true}, // v4-mapped is v4
	} {
		region, bits, found := g.Lookup(netip.MustParseAddr(c.addr), c.maxBits)
		if region != c.region || bits != c.bits || found != c.found {
			t.Errorf("Lookup(%s, %d) = %d/%d/%v, want %d/%d/%v", c.addr, c.maxBits, region, bits, found, c.region, c.bits, c.found)
		}
	}
	eu := g.Ranks(1)
	if eu(1) != 0 || eu(2) != 1 || eu(3) != 2 || eu(0) != 0 {
		t.Errorf("eu ranks: own %d, us %d, ap %d, none %d; want 0 1 2 0", eu(1), eu(2), eu(3), eu(0))
	}
	us := g.Ranks(2)
	if us(2) != 0 || us(1) != 3 || us(3) != 3 {
		t.Errorf("us ranks: own %d, eu %d, ap %d; want 0 3 3", us(2), us(1), us(3))
	}
	none := g.Ranks(0)
	if none(1) != 0 || none(2) != 0 {
		t.Errorf("a client with no region prefers a region")
	}
	v4, v6 := g.Entries()
	if len(v4) != 3 || len(v6) != 2 {
		t.Errorf("%d v4 and %d v6 entries, want 3 and 2", len(v4), len(v6))
	}
	if len(New(nil).Orders()) != MaxRegions {
		t.Errorf("a table without geo has no orders")
	}
}
