package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// decoder walks yaml.Nodes rather than unmarshalling into structs, because
// only nodes know the line of every key, and because unknown and duplicate
// keys must be errors.
type decoder struct {
	file     string
	sections map[string]string // top-level key -> the file it came from, when not file
	lines    map[string]int    // key path -> line, while decoding; the Config keeps them as a lineIndex
	errs     []*Error
	treeDone func() // called once the YAML tree is decoded (lowerGC)
}

// fileOf is the file a key path was read from: a fleet's hosts read some
// sections from their own file and the rest from a pushed revision.
func (d *decoder) fileOf(key string) string { return sectionFile(d.file, d.sections, key) }

func sectionFile(file string, sections map[string]string, key string) string {
	top := key
	if i := strings.IndexAny(key, ".["); i >= 0 {
		top = key[:i]
	}
	if f, ok := sections[top]; ok {
		return f
	}
	return file
}

func (d *decoder) errorf(n *yaml.Node, key, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.fileOf(key), Line: n.Line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// line is the line of a key path decoded so far.
func (d *decoder) line(key string) (int, bool) {
	l, ok := d.lines[key]
	return l, ok
}

// missing reports a required key that is absent, at its parent's line.
func (d *decoder) missing(key, format string, args ...any) {
	d.errs = append(d.errs, newError(d.fileOf(key), d.line, key, format, args...))
}

// value follows aliases and turns null into nil, so that "key:" with
// nothing after it means the same as leaving the key out.
func value(n *yaml.Node) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind == 0 || n.ShortTag() == "!!null" {
		return nil
	}
	return n
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

type entry struct {
	key     string
	keyNode *yaml.Node
	val     *yaml.Node // nil when null
	path    string
}

// entries lists a mapping's keys in file order and records their lines.
func (d *decoder) entries(n *yaml.Node, path string) []entry {
	var out []entry
	d.each(n, path, false, func(e entry) { out = append(out, e) })
	return out
}

// each calls fn for each of a mapping's keys in file order and records
// their lines. With release, each key and value leaves the tree once fn
// has decoded it (see release).
func (d *decoder) each(n *yaml.Node, path string, release bool, fn func(entry)) {
	if n == nil {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		p := join(path, k.Value)
		line, dup := first[k.Value]
		switch {
		case k.Kind != yaml.ScalarNode:
			d.errorf(k, path, "expected a key, got %s", describe(k))
		case dup:
			d.errorf(k, p, "duplicate key, first at line %d", line)
		default:
			first[k.Value] = k.Line
			d.lines[p] = k.Line
			fn(entry{key: k.Value, keyNode: k, val: value(n.Content[i+1]), path: p})
		}
		if release {
			d.release(n, i, i+1)
		}
	}
}

// release drops items lo to hi of a collection from the tree once they
// are decoded. The yaml package builds the whole document before decoding
// starts, and a fleet's 65,536 checks are 150 MB of nodes: dropped as they
// are decoded, the tree shrinks while the decoded config grows, and the
// heap a start peaks at is the tree's, not the tree and the config
// together. A collection with an anchor stays whole, since an alias
// elsewhere reads it again.
func (d *decoder) release(n *yaml.Node, lo, hi int) {
	if n.Anchor != "" {
		return
	}
	for i := lo; i <= hi; i++ {
		n.Content[i] = nil
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fields is a decoded mapping whose keys are all known. The getters set
// their destination only when the key is present, so defaults go in first.
type fields struct {
	d    *decoder
	path string
	vals map[string]entry
}

// mapping decodes n as a mapping that may hold only the known keys. An
// absent or invalid mapping yields empty fields, so defaults still apply.
func (d *decoder) mapping(n *yaml.Node, path string, known []string) fields {
	f := fields{d: d, path: path, vals: map[string]entry{}}
	for _, e := range d.entries(n, path) {
		switch {
		case e.key == "<<":
			d.errorf(e.keyNode, e.path, "merge keys are not supported")
			continue
		case !slices.Contains(known, e.key):
			d.errorf(e.keyNode, e.path, "unknown key")
			continue
		}
		f.vals[e.key] = e
	}
	return f
}

func (f fields) key(k string) string { return join(f.path, k) }

// get returns the value of k, or nil when it is absent or null.
func (f fields) get(k string) *yaml.Node { return f.vals[k].val }

func (f fields) has(k string) bool { return f.get(k) != nil }

func (f fields) mapping(k string, known []string) fields {
	return f.d.mapping(f.get(k), f.key(k), known)
}

// list calls fn for each item of the list at k, recording item lines.
func (f fields) list(k string, fn func(path string, n *yaml.Node)) {
	f.d.list(f.get(k), f.key(k), false, fn)
}

// list calls fn for each item of list n, recording item lines. With
// release, each item leaves the tree once fn has decoded it (release).
func (d *decoder) list(n *yaml.Node, path string, release bool, fn func(path string, n *yaml.Node)) {
	if n == nil {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "expected a list, got %s", describe(n))
		return
	}
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.lines[p] = item.Line
		if v := value(item); v != nil {
			fn(p, v)
		} else {
			d.errorf(item, p, "empty list item")
		}
		if release {
			d.release(n, i, i)
		}
	}
}

// scalar returns n's text, reporting an error when n is a list or mapping.
func (d *decoder) scalar(n *yaml.Node, path, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "expected %s, got %s", want, describe(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) int(n *yaml.Node, path string) (int, bool) {
	s, ok := d.scalar(n, path, "an integer")
	if !ok {
		return 0, false
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		d.errorf(n, path, "expected an integer, got %q", s)
		return 0, false
	}
	return v, true
}

// percent parses "18%" or "12.5%" as a fraction.
func (d *decoder) percent(n *yaml.Node, path string) (float64, bool) {
	s, ok := d.scalar(n, path, "a percentage")
	if !ok {
		return 0, false
	}
	num, isPercent := strings.CutSuffix(s, "%")
	v, err := strconv.ParseFloat(num, 64)
	if !isPercent || err != nil {
		d.errorf(n, path, "expected a percentage such as 18%%, got %q", s)
		return 0, false
	}
	return v / 100, true
}

func (f fields) str(k string, dst *string) { strField(f, k, dst) }

// strField decodes a string into a string type such as Policy; validate
// checks that it is one of the type's values.
func strField[T ~string](f fields, k string, dst *T) {
	if n := f.get(k); n != nil {
		if s, ok := f.d.scalar(n, f.key(k), "a string"); ok {
			*dst = T(s)
		}
	}
}

func (f fields) strs(k string, dst *[]string) {
	f.list(k, func(path string, n *yaml.Node) {
		if s, ok := f.d.scalar(n, path, "a string"); ok {
			*dst = append(*dst, s)
		}
	})
}

// prefixes appends list k's CIDR prefixes, masked, to dst.
func (f fields) prefixes(k string, dst *[]netip.Prefix) {
	f.list(k, func(path string, n *yaml.Node) {
		v, ok := f.d.scalar(n, path, "a prefix")
		if !ok {
			return
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			f.d.errorf(n, path, "invalid prefix %q, want a CIDR such as 198.18.0.0/24", v)
			return
		}
		*dst = append(*dst, p.Masked())
	})
}

func (f fields) int(k string, dst *int) {
	if n := f.get(k); n != nil {
		if v, ok := f.d.int(n, f.key(k)); ok {
			*dst = v
		}
	}
}

// uintField decodes an unsigned integer that must fit in T, so a weight of
// 256 is reported instead of wrapping to 0.
func uintField[T uint8 | uint16 | uint32](f fields, k string, dst *T) {
	n := f.get(k)
	if n == nil {
		return
	}
	v, ok := f.d.int(n, f.key(k))
	if !ok {
		return
	}
	if v < 0 || uint64(v) > uint64(^T(0)) {
		f.d.errorf(n, f.key(k), "%d out of range 0-%d", v, ^T(0))
		return
	}
	*dst = T(v)
}

func (f fields) bool(k string, dst *bool) {
	n := f.get(k)
	if n == nil {
		return
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		*dst, _ = strconv.ParseBool(n.Value) // yaml's bool spellings all parse
		return
	}
	f.d.errorf(n, f.key(k), "expected true or false, got %s", describe(n))
}

func (f fields) duration(k string, dst *time.Duration) {
	n := f.get(k)
	if n == nil {
		return
	}
	s, ok := f.d.scalar(n, f.key(k), "a duration")
	if !ok {
		return
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		f.d.errorf(n, f.key(k), "expected a duration such as 500ms or 10s, got %q", s)
		return
	}
	*dst = v
}

func (f fields) percent(k string, dst *float64) {
	if n := f.get(k); n != nil {
		if v, ok := f.d.percent(n, f.key(k)); ok {
			*dst = v
		}
	}
}
