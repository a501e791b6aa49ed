package layers

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/steadydns/steadydns"

// layers places every package of the module, by the longest path prefix
// that matches it (a package's subpackages are in its layer unless listed
// themselves). A package may import packages of its own layer or a lower
// one; a test may import anything. From the bottom:
//
//  0. the XDP program and its layouts, and the health table's layout,
//     which the loader writes;
//  1. the loader, which puts the program and its maps in the kernel;
//  2. the control plane's parts, each a leaf or built on leaves, the
//     prober, and helpers under internal/;
//  3. the daemon, which composes the parts into one host;
//  4. the harnesses and the test environment, which only tests, the
//     benchmark and the binaries may import;
//  5. the binaries.
var layers = map[string]int{
	"bpf":                      0,
	"controlplane/healthtable": 0,
	"loader":                   1,
	"controlplane":             2,
	"prober":                   2,
	"internal":                 2,
	"controlplane/daemon":      3,
	"testenv":                  4,
	"bench":                    4,
	"deploy":                   4,
	"cmd":                      5,
}

// layerOf is the layer of a package path inside the module.
func layerOf(rel string) (int, bool) {
	for p := rel; ; {
		if l, ok := layers[p]; ok {
			return l, true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return 0, false
		}
		p = p[:i]
	}
}

type pkg struct {
	ImportPath string
	Imports    []string
}

// TestLayers lists the module's packages with `go list` and holds every
// non-test import to the layers above, and every package to a row of
// docs/architecture.md's layout, which a newcomer reads first.
func TestLayers(t *testing.T) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	arch, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel != "" && !strings.Contains(string(arch), "| `"+rel+"/` |") {
			t.Errorf("%s: no row in docs/architecture.md's layout", rel)
		}
		from, ok := layerOf(rel)
		if !ok {
			t.Errorf("%s: in no layer; add it to layers", rel)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			to, ok := layerOf(dep)
			if !ok {
				continue // reported as a package of its own
			}
			if to > from {
				t.Errorf("%s (layer %d) imports %s (layer %d), a layer above it", rel, from, dep, to)
			}
		}
	}
	if n < 10 {
		t.Fatalf("go list found %d packages: is the module there?", n)
	}
}

// TestLayerOf checks the prefix match itself: a subpackage takes its
// parent's layer unless listed, and a path merely sharing a prefix's
// letters does not match it.
func TestLayerOf(t *testing.T) {
	for rel, want := range map[string]int{
		"bpf":                             0,
		"controlplane/selection/xdprules": 2,
		"controlplane/daemon":             3,
		"controlplane/daemon/part":        3,
		"bench/xdpprog":                   4,
		"cmd/steadydns-bench":             5,
	} {
		if got, ok := layerOf(rel); !ok || got != want {
			t.Errorf("layerOf(%q) = %d, %v; want %d", rel, got, ok, want)
		}
	}
	if l, ok := layerOf("bpfx"); ok {
		t.Errorf("layerOf(bpfx) = %d: a name sharing bpf's letters matched bpf", l)
	}
}
