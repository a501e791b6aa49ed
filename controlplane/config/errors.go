package config

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Error is one problem in a config file. Its text starts with file:line so
// that editors and CI logs can jump to it, then names the key path.
type Error struct {
	File string
	Line int    // 1-based; 0 when the problem has no position, as in an empty file
	Key  string // such as records[0].answers[1].check; "" for the file as a whole
	Msg  string
}

// Error returns "file:line: key: msg", leaving out the parts that are unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// joinErrors reports errors in file order, so the first one printed is the
// first one a reader meets. A single error is returned as itself so that
// callers can type-assert it without errors.As.
func joinErrors(errs []*Error) error {
	slices.SortStableFunc(errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}

var yamlLine = regexp.MustCompile(`(?s)^yaml: line (\d+): (.*)$`)

// syntaxError moves the line number out of the yaml package's message so
// that syntax errors read like every other config error.
func syntaxError(file string, err error) *Error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1]) // the pattern admits only digits
		return &Error{File: file, Line: line, Msg: m[2]}
	}
	return &Error{File: file, Msg: err.Error()}
}

func newError(file string, lines map[string]int, key, format string, args ...any) *Error {
	return &Error{File: file, Line: nearestLine(lines, key), Key: key, Msg: fmt.Sprintf(format, args...)}
}
