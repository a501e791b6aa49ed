package config

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/steadydns/steadydns/bpf"
)

// MaxRegions bounds the regions of server.geo: the data plane ranks
// MAX_REGIONS region ids, and id 0 means none.
const MaxRegions = int(bpf.SteadydnsLimitsMAX_REGIONS) - 1

// Region maps client prefixes to a region and says where its clients go
// when it has nothing healthy.
type Region struct {
	Name     string
	Prefixes []netip.Prefix // from prefixes and from file, masked
	Next     []string       // regions to try after this one, in order
}

// Geo is server.geo. Regions are in file order; a region's id in the data
// plane is its position plus one.
type Geo struct {
	Regions []Region
}

// RegionID is the data-plane id of a region name, 0 if unknown.
func (g *Geo) RegionID(name string) uint8 {
	if g == nil {
		return 0
	}
	for i, r := range g.Regions {
		if r.Name == name {
			return uint8(i + 1)
		}
	}
	return 0
}

var regionKeys = []string{"prefixes", "file", "next"}

func (d *decoder) geo(f fields) *Geo {
	g := &Geo{}
	for _, e := range d.entries(f.get("regions"), f.key("regions")) {
		rf := d.mapping(e.val, e.path, regionKeys)
		r := Region{Name: e.key}
		rf.prefixes("prefixes", &r.Prefixes)
		if n := rf.get("file"); n != nil {
			if s, ok := d.scalar(n, rf.key("file"), "a file name"); ok {
				if !filepath.IsAbs(s) {
					s = filepath.Join(filepath.Dir(d.fileOf("server")), s)
				}
				ps, err := readPrefixes(s)
				if err != nil {
					d.errorf(n, rf.key("file"), "%v", err)
				}
				r.Prefixes = append(r.Prefixes, ps...)
			}
		}
		rf.strs("next", &r.Next)
		g.Regions = append(g.Regions, r)
	}
	return g
}

// readPrefixes reads one CIDR per line; '#' starts a comment.
func readPrefixes(path string) ([]netip.Prefix, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading prefixes: %w", err)
	}
	defer f.Close()
	var out []netip.Prefix
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s, _, _ := strings.Cut(sc.Text(), "#")
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: invalid prefix %q", path, line, s)
		}
		out = append(out, p.Masked())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return out, nil
}

func (v *validator) geo() {
	g := v.c.Server.Geo
	if g == nil {
		return
	}
	if len(g.Regions) > MaxRegions {
		v.errorf("server.geo.regions", "%d regions, at most %d are allowed", len(g.Regions), MaxRegions)
	}
	owner := map[netip.Prefix]string{}
	for _, r := range g.Regions {
		key := "server.geo.regions." + r.Name
		for _, p := range r.Prefixes {
			if o, dup := owner[p]; dup && o != r.Name {
				v.errorf(key, "prefix %s is also in region %s", p, o)
			}
			owner[p] = r.Name
		}
		for i, n := range r.Next {
			if g.RegionID(n) == 0 {
				v.errorf(fmt.Sprintf("%s.next[%d]", key, i), "unknown region %q", n)
			}
		}
	}
}
