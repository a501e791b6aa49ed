package config

import (
	"maps"
	"slices"
	"sort"
	"strings"
)

// lineIndex maps key paths to their lines without a pointer per key. A
// Config lives as long as a host serves it, and a fleet's config of 65,536
// checks has half a million key paths: as a map of strings they are tens
// of megabytes of pointers that the garbage collector marks on every
// cycle, so an aggregator's cost per push would grow with its checks. As
// one string and two integer slices they are three pointers.
type lineIndex struct {
	keys  string   // every key path, sorted, one after the other
	ends  []uint32 // where key path i ends in keys
	lines []int32  // the line of key path i
}

func newLineIndex(m map[string]int) lineIndex {
	sorted := slices.Sorted(maps.Keys(m))
	n := 0
	for _, k := range sorted {
		n += len(k)
	}
	var b strings.Builder
	b.Grow(n)
	x := lineIndex{ends: make([]uint32, len(sorted)), lines: make([]int32, len(sorted))}
	for i, k := range sorted {
		b.WriteString(k)
		x.ends[i], x.lines[i] = uint32(b.Len()), int32(m[k])
	}
	x.keys = b.String()
	return x
}

func (x *lineIndex) key(i int) string {
	start := uint32(0)
	if i > 0 {
		start = x.ends[i-1]
	}
	return x.keys[start:x.ends[i]]
}

// get returns the line of key path k, if the file has it.
func (x *lineIndex) get(k string) (int, bool) {
	i, ok := sort.Find(len(x.ends), func(i int) int { return strings.Compare(k, x.key(i)) })
	if !ok {
		return 0, false
	}
	return int(x.lines[i]), true
}
