package zone

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// splitZones are zone files whose records a parser begun at the wrong
// place would read differently: owner-like text inside parentheses,
// quotes that span lines and hold ';' and '(', escapes, comments holding
// quotes and parentheses, directives changing the origin and the TTL
// midway, blank owners and CRLF line ends.
var splitZones = map[string]string{
	"directives": "$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\nns1 A 198.18.0.1\n" +
		"$ORIGIN sub.example.test.\n$TTL 120\nwww A 198.18.0.2\n\tAAAA fd53::2\n" +
		"$ORIGIN deeper\nx 30 A 198.18.0.3\ny A 198.18.0.4\n$ttl 1h\nz A 198.18.0.5\n",
	"parentheses": "$TTL 60\n@ SOA ns1 h ( 1 2 ; a comment\n3 4 5 )\n@ NS ns1\n" +
		"t TXT ( \"a\"\nb-looks-like-an-owner\n\"c\" )\nu A 198.18.0.6\n",
	"quotes": "$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\n" +
		"t TXT \"spans\nfake A 198.18.0.9\n; ( not a comment\"\nu TXT \"esc \\\" ; ( still\"\nv A 198.18.0.7\n" +
		"w TXT \"\\\\\"\nx A 198.18.0.8\n",
	"comments": "$TTL 60\n@ SOA ns1 h 1 2 3 4 5 ; \" ( \\\n@ NS ns1 ; )\n; \"\na A 198.18.0.10\n" +
		"b A 198.18.0.11 ; \\\nc A 198.18.0.12\n",
	"crlf": "$TTL 60\r\n@ SOA ns1 h 1 2 3 4 5\r\n@ NS ns1\r\n\r\na A 198.18.0.13\r\n AAAA fd53::d\r\nc A 198.18.0.14\r\n",
}

// dump is a zone's records, name by name in order, as text.
func dump(z *Zone) string {
	var b strings.Builder
	for _, nodes := range []map[string]*node{z.nodes, z.hashed} {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range nodes {
				if !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			b.WriteString(k + "\n")
			for _, rrs := range nodes[k].sets.all() {
				for _, rr := range rrs {
					b.WriteString("\t" + rr.String() + "\n")
				}
			}
		}
	}
	return b.String()
}

// loadBoth loads text whole and cut before every owner line it can be,
// and fails unless both give the same zone or the same error.
func loadBoth(t *testing.T, path, text string) (*Zone, error) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	whole, werr := load("example.test.", path, 0)
	cut, cerr := load("example.test.", path, 1)
	switch {
	case (werr == nil) != (cerr == nil):
		t.Fatalf("whole: %v; in pieces: %v", werr, cerr)
	case werr != nil && werr.Error() != cerr.Error():
		t.Fatalf("errors differ: whole %q, in pieces %q", werr, cerr)
	case werr == nil && dump(whole) != dump(cut):
		t.Fatalf("zones differ:\nwhole:\n%s\nin pieces:\n%s", dump(whole), dump(cut))
	}
	return whole, werr
}

func TestSplitMatchesWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "z.zone")
	for name, text := range splitZones {
		t.Run(name, func(t *testing.T) {
			pieces, ok := split([]byte(text), 1)
			if !ok || len(pieces) < 3 {
				t.Fatalf("split: ok %v, %d pieces; want at least 3", ok, len(pieces))
			}
			var joined strings.Builder
			for _, p := range pieces {
				joined.Write(p.text)
			}
			if joined.String() != text {
				t.Fatal("the pieces do not add up to the file")
			}
			if _, err := loadBoth(t, path, text); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSplitCuts checks where split cuts: never inside parentheses or a
// quote, and after the directives it carries into the piece.
func TestSplitCuts(t *testing.T) {
	text := "$TTL 60\n@ SOA ns1 h (\n1 2 3 4 5 )\nt TXT \"x\ny A 198.18.0.1\"\n$ORIGIN sub\nz A 198.18.0.2\n"
	pieces, ok := split([]byte(text), 1)
	if !ok {
		t.Fatal("split refused the file")
	}
	var got []string
	for _, p := range pieces {
		got = append(got, string(p.pre)+"|"+string(p.text))
	}
	want := []string{
		"|$TTL 60\n",
		"$TTL 60\n|@ SOA ns1 h (\n1 2 3 4 5 )\n",
		"$TTL 60\n|t TXT \"x\ny A 198.18.0.1\"\n$ORIGIN sub\n",
		"$TTL 60\n$ORIGIN sub\n|z A 198.18.0.2\n",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pieces %q, want %q", got, want)
	}
	// A piece is at least size bytes.
	if pieces, _ := split([]byte(text), 40); len(pieces) != 2 || len(pieces[0].text) < 40 || string(pieces[1].pre) != "$TTL 60\n$ORIGIN sub\n" {
		t.Fatalf("size 40: %d pieces, the first of %d bytes", len(pieces), len(pieces[0].text))
	}
	for _, bad := range []string{
		"$TTL 60\n$INCLUDE other\na A 198.18.0.1\n",
		"$TTL 60\n$GENERATE 1-2 a$ A 198.18.0.$\n",
		"@ 60 SOA ns1 h 1 2 3 4 5\na A 198.18.0.1\nb A 198.18.0.2\n", // no $TTL: b's TTL is a's
		"$TTL 60\na A 198.18.0.1 )\nb A 198.18.0.2\n",
	} {
		if pieces, ok := split([]byte(bad), 1); ok && len(pieces) > 1 {
			t.Errorf("%q cut into %d pieces", bad, len(pieces))
		}
	}
}

// TestSplitErrors: a syntax error in a piece is reported at its line in
// the file, as the whole file's parser reports it.
func TestSplitErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "z.zone")
	head := "$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\n"
	for _, text := range []string{
		head + "a A 198.18.0.1\nb A 198.18.0.\nc A 198.18.0.3\n",
		head + "a A 198.18.0.1\nb TXT ( \"x\"\nc A 198.18.0.3\n",
		head + "a A 198.18.0.1\nb CH A 198.18.0.2\n",
		head + "a A 198.18.0.1\nb.other.test. A 198.18.0.2\nc A 198.18.0.\n",
	} {
		_, err := loadBoth(t, path, text)
		if err == nil || !strings.HasPrefix(err.Error(), path+":") {
			t.Errorf("%q: error %v, want one naming %s", text, err, path)
		}
	}
	_, err := loadBoth(t, path, head+"a A 198.18.0.1\nb A 198.18.0.\n")
	if want := path + ":5:"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v, want it at %s", err, want)
	}
}

// FuzzSplit: any file loads the same, or fails with the same error, whole
// and in pieces.
func FuzzSplit(f *testing.F) {
	for _, text := range splitZones {
		f.Add([]byte(text))
	}
	path := filepath.Join(f.TempDir(), "fuzz.zone")
	f.Fuzz(func(t *testing.T, data []byte) {
		loadBoth(t, path, string(data))
	})
}
