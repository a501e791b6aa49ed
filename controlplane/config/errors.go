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

var yamlLine = regexp.MustCompile(`(?s)^yaml: (?:line (\d+): )?(.*)$`)

// parserProblems are the yaml package's parser errors, as opposed to its
// scanner's. For these it reports a 0-based line, the line before the one
// at fault, and none at all for the first line; its scanner errors carry
// the right, 1-based line.
var parserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// syntaxError reads the yaml package's message like every other config
// error: the 1-based line at fault and the key written on it, or the key
// it lies under.
func syntaxError(file string, data []byte, err error) *Error {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return &Error{File: file, Msg: err.Error()}
	}
	line, _ := strconv.Atoi(m[1]) // the pattern admits only digits, or nothing: 0
	if slices.Contains(parserProblems, m[2]) {
		line++
	}
	if line == 0 {
		return &Error{File: file, Msg: m[2]}
	}
	// A problem found at the end of the input is reported on the line after
	// the last; the construct left open is on the last line.
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	line = min(line, len(lines))
	return &Error{File: file, Line: line, Key: keyAt(lines, line), Msg: m[2]}
}

// yamlKey is a block mapping's key at the start of a line's content.
var yamlKey = regexp.MustCompile(`^("[^"]*"|'[^']*'|[^\s:#'"{}\[\],&*!|>%@-][^:#]*?|-[^\s:#][^:#]*?)\s*:(?:\s|$)`)

// keyAt names the key path of a block-style YAML document at a 1-based
// line, such as records[0].answers, from the indentation of the lines up to
// it: the document does not parse, so there is no tree to ask.
func keyAt(lines []string, line int) string {
	type frame struct {
		col   int
		name  string
		item  bool // a sequence item, named [i]
		items int  // a key's items seen so far
		open  bool // a key whose value is on the lines below it
	}
	var stack []*frame
	key := func(col int, content string) {
		k := yamlKey.FindStringSubmatch(content)
		if k == nil {
			return
		}
		for len(stack) > 0 && stack[len(stack)-1].col >= col {
			stack = stack[:len(stack)-1]
		}
		rest := strings.TrimSpace(content[len(k[0]):])
		stack = append(stack, &frame{col: col, name: strings.Trim(k[1], `"'`), open: rest == "" || strings.HasPrefix(rest, "#")})
	}
	for _, l := range lines[:line] {
		content := strings.TrimLeft(l, " ")
		col := len(l) - len(content)
		if content == "" || strings.HasPrefix(content, "#") {
			continue
		}
		for content == "-" || strings.HasPrefix(content, "- ") {
			for len(stack) > 0 {
				top := stack[len(stack)-1]
				if top.col < col || top.col == col && !top.item && top.open {
					break
				}
				stack = stack[:len(stack)-1]
			}
			idx := 0
			if len(stack) > 0 {
				idx = stack[len(stack)-1].items
				stack[len(stack)-1].items++
			}
			stack = append(stack, &frame{col: col, name: fmt.Sprintf("[%d]", idx), item: true})
			rest := strings.TrimLeft(content[1:], " ")
			col += len(content) - len(rest)
			content = rest
		}
		key(col, content)
	}
	var b strings.Builder
	for _, f := range stack {
		if !f.item && b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(f.name)
	}
	return b.String()
}

func newError(file string, line func(key string) (int, bool), key, format string, args ...any) *Error {
	return &Error{File: file, Line: nearestLine(line, key), Key: key, Msg: fmt.Sprintf(format, args...)}
}
