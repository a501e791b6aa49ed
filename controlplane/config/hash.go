package config

import (
	"encoding"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"reflect"
)

// hash encodes the decoded health_checks, records and aggregation, after
// defaults, so the result does not depend on formatting, key order or
// spelled-out defaults. It walks the structs by reflection so that a field
// added later cannot be left out of the hash by mistake.
//
// Checks go in file order: the order may decide health-table indexes, so
// two configs that differ only in it must not share a hash.
func (c *Config) hash() uint64 {
	e := encoder{fnv.New64a()}
	e.uint(uint64(c.Checks.Len()))
	for i := range c.Checks.Len() {
		ch := c.Checks.Check(i)
		e.value(reflect.ValueOf(&ch))
	}
	e.value(reflect.ValueOf(c.Records))
	e.value(reflect.ValueOf(c.Aggregation))
	return e.h.Sum64()
}

// encoder writes an unambiguous encoding: every variable-length value is
// prefixed with its length and every pointer with whether it is nil.
type encoder struct{ h hash.Hash64 }

func (e encoder) uint(v uint64) {
	e.h.Write(binary.AppendUvarint(nil, v))
}

func (e encoder) bytes(b []byte) {
	e.uint(uint64(len(b)))
	e.h.Write(b)
}

func (e encoder) value(v reflect.Value) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			e.uint(0)
			return
		}
		e.uint(1)
	}
	// netip.Addr and *regexp.Regexp have no exported fields; their text is
	// their identity.
	if m, ok := v.Interface().(encoding.TextMarshaler); ok {
		text, err := m.MarshalText()
		if err != nil {
			panic(fmt.Sprintf("config hash: %v", err)) // neither type fails
		}
		e.bytes(text)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		e.value(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			e.value(v.Field(i))
		}
	case reflect.Slice:
		e.uint(uint64(v.Len()))
		for i := range v.Len() {
			e.value(v.Index(i))
		}
	case reflect.String:
		e.bytes([]byte(v.String()))
	case reflect.Bool:
		var b uint64
		if v.Bool() {
			b = 1
		}
		e.uint(b)
	case reflect.Int, reflect.Int64:
		e.uint(uint64(v.Int()))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		e.uint(v.Uint())
	case reflect.Float64:
		e.uint(math.Float64bits(v.Float()))
	default:
		// Reached only when a field of a new kind is added; the tests hash
		// a config that sets every field.
		panic(fmt.Sprintf("config hash: cannot encode %s", v.Type()))
	}
}
