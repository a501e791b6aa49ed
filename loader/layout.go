package loader

import (
	"fmt"
	"hash/fnv"
	"io"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// layoutVersion names the pin directory after everything that decides
// whether a pinned map can be reused: type, sizes, flags and the BTF layout
// of keys and values. The kernel itself only compares type, sizes and flags.
// Maps that are not pinned, the load-time constants' .rodata above all,
// belong to one load and take no part: a build of the same source with
// other flags, whose constants clang lays out otherwise, loads onto the
// same pins.
func layoutVersion(spec *ebpf.CollectionSpec) string {
	names := make([]string, 0, len(spec.Maps))
	for name, m := range spec.Maps {
		if m.Pinning != ebpf.PinNone {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	h := fnv.New64a()
	for _, name := range names {
		m := spec.Maps[name]
		fmt.Fprintf(h, "%s %v %d %d %d %d;", name, m.Type, m.KeySize, m.ValueSize, m.MaxEntries, m.Flags)
		writeType(h, m.Key, 0)
		writeType(h, m.Value, 0)
	}
	return fmt.Sprintf("v%016x", h.Sum64())
}

func writeType(w io.Writer, t btf.Type, depth int) {
	if t == nil || depth > 8 {
		return
	}
	switch t := t.(type) {
	case *btf.Struct:
		fmt.Fprintf(w, "struct %s %d{", t.Name, t.Size)
		for _, m := range t.Members {
			fmt.Fprintf(w, "%s@%d:", m.Name, m.Offset)
			writeType(w, m.Type, depth+1)
		}
		fmt.Fprint(w, "}")
	case *btf.Array:
		fmt.Fprintf(w, "[%d]", t.Nelems)
		writeType(w, t.Type, depth+1)
	case *btf.Typedef:
		writeType(w, t.Type, depth+1)
	case *btf.Int:
		fmt.Fprintf(w, "int%d", t.Size)
	case *btf.Enum:
		fmt.Fprintf(w, "enum%d", t.Size)
	default:
		fmt.Fprintf(w, "%T", t)
	}
}
