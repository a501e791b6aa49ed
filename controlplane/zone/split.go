package zone

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/miekg/dns"
)

// pieceSize is about how many bytes of a zone file one parser takes at a
// time. A zone of millions of records spends most of its load in the
// parser, which is sequential; in pieces, every CPU parses.
const pieceSize = 1 << 20

// piece is a run of whole records of a zone file, and the directives
// ($ORIGIN and $TTL) before it, which a parser reads first to begin the
// piece in the state a parser of the whole file is in there.
type piece struct {
	pre, text []byte
}

// split cuts a zone file into pieces of at least size bytes, each ending
// before a line that starts with an owner name outside parentheses,
// quotes and comments: there the parser has finished a record and begins
// the next from nothing but its origin and default TTL. It follows the
// lexer of miekg/dns byte for byte (escapes, quotes that span lines,
// comments, parentheses). ok is false for a file it cannot cut that way:
// one with a directive other than $ORIGIN or $TTL, or no $TTL before a
// cut, where a record's TTL may come from the record before it. A size
// of 0 or less cuts before every such line.
func split(text []byte, size int) (pieces []piece, ok bool) {
	var (
		dirs         []byte // the $ORIGIN and $TTL lines so far
		ttl          bool   // a $TTL was among them
		cur          piece  // the piece being read, from start
		start        int
		dirAt        = -1 // where the directive line being read starts, or -1
		quote, commt bool
		escape       bool
		brace        int
		lineStart    = true
	)
	for i := 0; i < len(text); i++ {
		if lineStart {
			lineStart = false
			if dirAt >= 0 {
				dirs = append(dirs, text[dirAt:i]...)
				dirAt = -1
			}
			switch {
			case text[i] == '$':
				switch directive(text[i:]) {
				case "$TTL":
					ttl, dirAt = true, i
				case "$ORIGIN":
					dirAt = i
				default:
					return nil, false
				}
			case ownerAt(text[i:]) && ttl && i-start >= max(size, 1):
				cur.text = text[start:i]
				pieces = append(pieces, cur)
				cur = piece{pre: bytes.Clone(dirs)}
				start = i
			}
		}
		switch x := text[i]; x {
		case ' ', '\t':
			if escape || quote {
				escape = false
			}
		case ';':
			if escape || quote {
				escape = false
				break
			}
			commt = true
		case '\r':
			escape = false
		case '\n':
			escape = false
			if quote {
				break
			}
			commt = false
			lineStart = brace == 0
		case '\\':
			if commt {
				break
			}
			escape = !escape
		case '"':
			if commt {
				break
			}
			if escape {
				escape = false
				break
			}
			quote = !quote
		case '(', ')':
			if commt {
				break
			}
			if escape || quote {
				escape = false
				break
			}
			if x == '(' {
				brace++
			} else if brace--; brace < 0 {
				return nil, false // the parser refuses it
			}
		default:
			escape = false
		}
	}
	cur.text = text[start:]
	return append(pieces, cur), true
}

// directive is the directive a line starting with '$' names, upper case:
// the bytes up to the first blank, as the lexer reads it.
func directive(line []byte) string {
	end := bytes.IndexAny(line, " \t\r\n;(\"")
	if end < 0 {
		end = len(line)
	}
	return string(bytes.ToUpper(line[:end]))
}

// ownerAt reports whether line starts with an owner name: a token of
// plain bytes ended by a blank. The lexer reads a line's first token as
// its owner only when a blank ends it: a token alone on its line, or
// ended by a comment or a quote, is a type or data under the previous
// record's owner.
func ownerAt(line []byte) bool {
	for i, c := range line {
		switch c {
		case ' ', '\t':
			return i > 0
		case '\r', '\n', ';', '$', '(', ')', '"', '\\':
			return false
		}
	}
	return false
}

// moreLines follows every piece but the last, in place of the lines of
// the pieces after it: a blank line, which the parser skips.
var moreLines = []byte("\n")

// parsePieces parses the pieces on every CPU and yields their records in
// order, a piece's at a time, until yield returns false. It returns the
// first parse error, in which piece it arose: the caller parses the
// whole file again to report it with its place in the file.
func parsePieces(pieces []piece, origin, path string, yield func([]dns.RR) bool) error {
	type result struct {
		rrs []dns.RR
		err error
	}
	workers := min(runtime.GOMAXPROCS(0), runtime.NumCPU(), len(pieces))
	// A piece's records wait for those before it: at most 2*workers
	// pieces are parsed ahead of the one yielded.
	results := make([]chan result, len(pieces))
	for i := range results {
		results[i] = make(chan result, 1)
	}
	ahead := make(chan struct{}, 2*workers)
	stop := make(chan struct{})
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				p := pieces[i]
				r := io.MultiReader(bytes.NewReader(p.pre), bytes.NewReader(p.text))
				if i < len(pieces)-1 {
					// The parser reads a record at the end of its input
					// otherwise than one with a line after it: it takes
					// an A without an address there, for one.
					r = io.MultiReader(r, bytes.NewReader(moreLines))
				}
				zp := dns.NewZoneParser(r, origin, path)
				var rrs []dns.RR
				for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
					rrs = append(rrs, rr)
				}
				results[i] <- result{rrs, zp.Err()}
			}
		})
	}
	go func() {
		defer close(next)
		for i := range pieces {
			select {
			case ahead <- struct{}{}:
			case <-stop:
				return
			}
			select {
			case next <- i:
			case <-stop:
				return
			}
		}
	}()
	defer wg.Wait()
	defer close(stop)
	for i := range pieces {
		r := <-results[i]
		<-ahead
		if r.err != nil {
			return fmt.Errorf("%w: %w", errParse, r.err)
		}
		if !yield(r.rrs) {
			return nil
		}
	}
	return nil
}
