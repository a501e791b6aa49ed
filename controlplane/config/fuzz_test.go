package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// FuzzParse gives the config loader arbitrary files. It never panics, and
// every problem it reports names the file, with a line whenever the file
// is a mapping, so an operator can jump to it.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/full.yaml", "../../examples/quickstart/steadydns.yaml", "../../examples/fleet/fleet.yaml", "../../examples/fleet/e1.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("server:\n  listen: [\"198.18.0.2:53\"]\nzones: []\n"))
	f.Add([]byte("a: 1\n---\nb: 2\n"))
	f.Add([]byte("server: &a {listen: *a}\n"))
	f.Add([]byte("records:\n  - name: www.example.test.\n    type: A\n    min_healthy: 150%\n    answers: [{value: 198.18.1.1, check: nope}]\n"))
	f.Add([]byte("\t"))
	// Relative zone and prefix files resolve against testdata, as full.yaml's do.
	file := filepath.Join("testdata", "fuzz.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(file, data)
		if err == nil {
			if cfg == nil {
				t.Fatal("no config and no error")
			}
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.HasPrefix(line, file+":") {
				t.Errorf("error line %q does not start with %s:", line, file)
			}
		}
		// A file whose document is a mapping has lines to point into; an
		// empty one, a comment or a bare tag has none.
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			return
		}
		for _, e := range configErrors(err) {
			if e.Line <= 0 {
				t.Errorf("error %q has no line in a file with content:\n%s", e, data)
			}
		}
	})
}

// configErrors are the *Error values in err, joined or single.
func configErrors(err error) []*Error {
	var out []*Error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, configErrors(e)...)
		}
		return out
	}
	var e *Error
	if errors.As(err, &e) {
		out = append(out, e)
	}
	return out
}
