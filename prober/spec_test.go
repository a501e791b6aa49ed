package prober

import (
	"go/build"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNewRejects: a spec no checker can run is refused when built, not
// when it first runs.
func TestNewRejects(t *testing.T) {
	target := netip.MustParseAddr("198.18.0.1")
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Type: "ftp", Timeout: time.Second}, `building checker: unknown type "ftp"`},
		{Spec{Type: TCP}, "building tcp checker: timeout must be positive, got 0s"},
	} {
		if _, err := New(tc.spec, target); err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v): got error %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestStatusRangeContains(t *testing.T) {
	r := StatusRange{200, 399}
	for code, want := range map[int]bool{199: false, 200: true, 302: true, 399: true, 400: false} {
		if got := r.Contains(code); got != want {
			t.Errorf("Contains(%d) = %v, want %v", code, got, want)
		}
	}
}

// TestImportsNoControlPlane: the prober is a leaf that probers on other
// hosts run alone, so neither it nor anything of this module it imports
// may reach up into the control plane.
func TestImportsNoControlPlane(t *testing.T) {
	const module = "github.com/steadydns/steadydns"
	seen := map[string]bool{}
	var walk func(path, dir string)
	walk = func(path, dir string) {
		if seen[path] {
			return
		}
		seen[path] = true
		if strings.HasPrefix(path, module+"/controlplane") {
			t.Errorf("prober imports %s", path)
			return
		}
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pkg.Imports {
			if rest, ok := strings.CutPrefix(imp, module+"/"); ok {
				walk(imp, filepath.Join("..", filepath.FromSlash(rest)))
			}
		}
	}
	walk(module+"/prober", ".")
}
