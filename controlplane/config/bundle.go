package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Bundle is a revision of the fleet sections as `steadydns config push`
// stores it in the config bucket: the pushed config file and every zone
// file it names, so a host needs nothing but the bucket.
type Bundle struct {
	Config []byte            `json:"config"` // the pushed file as written
	Files  map[string][]byte `json:"files"`  // zone files by path relative to the config's directory
}

// BundleName is the name of the config file inside a materialized bundle.
const BundleName = "config.yaml"

// NewBundle packs the config at path, which must load and validate, with
// its zone files. Zone files must lie under the config's directory, so
// that their relative paths mean the same on every host.
func NewBundle(path string) (*Bundle, *Config, error) {
	c, err := Load(path)
	if err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, nil, fmt.Errorf("resolving %s: %w", path, err)
	}
	b := &Bundle{Config: data, Files: map[string][]byte{}}
	for i, z := range c.Zones {
		rel, err := filepath.Rel(dir, z.File)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, nil, c.Errorf(fmt.Sprintf("zones[%d].file", i), "%s is outside %s: a pushed config takes only zone files under its own directory", z.File, dir)
		}
		if b.Files[rel], err = os.ReadFile(z.File); err != nil {
			return nil, nil, c.Errorf(fmt.Sprintf("zones[%d].file", i), "%v", err)
		}
	}
	return b, c, nil
}

// Marshal encodes the bundle for the bucket.
func (b *Bundle) Marshal() ([]byte, error) {
	out, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encoding the config bundle: %w", err)
	}
	return out, nil
}

// UnmarshalBundle decodes a bundle read from the bucket.
func UnmarshalBundle(data []byte) (*Bundle, error) {
	var b Bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("decoding the config bundle: %w", err)
	}
	if len(b.Config) == 0 {
		return nil, fmt.Errorf("decoding the config bundle: no config file in it")
	}
	for rel := range b.Files {
		if filepath.IsAbs(rel) || !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("decoding the config bundle: file %q is not a relative path inside the bundle", rel)
		}
	}
	return &b, nil
}

// Materialize writes the bundle under dir and returns the config file's
// path, which names the revision in errors and anchors its zone files.
func (b *Bundle) Materialize(dir string) (string, error) {
	for rel, data := range b.Files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", fmt.Errorf("writing the config bundle: %w", err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return "", fmt.Errorf("writing the config bundle: %w", err)
		}
	}
	p := filepath.Join(dir, BundleName)
	if err := os.WriteFile(p, b.Config, 0o644); err != nil {
		return "", fmt.Errorf("writing the config bundle: %w", err)
	}
	return p, nil
}

// LoadFleet loads a host's config from its own file at localPath and a
// bundle of the fleet sections, materialized under dir.
func LoadFleet(localPath string, b *Bundle, dir string) (*Config, error) {
	local, err := os.ReadFile(localPath)
	if err != nil {
		return nil, err // *fs.PathError already names the file
	}
	fleetPath, err := b.Materialize(dir)
	if err != nil {
		return nil, err
	}
	return ParseFleet(localPath, local, fleetPath, b.Config)
}
