package prober

import (
	"net/netip"
	"testing"
	"time"
)

// TestNewRejects: a spec no checker can run is refused when built, not
// when it first runs.
func TestNewRejects(t *testing.T) {
	target := netip.MustParseAddr("198.18.0.1")
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Type: "ftp", Timeout: time.Second}, `building checker: unknown type "ftp"`},
		{Spec{Type: TCP}, "building tcp checker: timeout must be positive, got 0s"},
	} {
		if _, err := New(tc.spec, target); err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v): got error %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestStatusRangeContains(t *testing.T) {
	r := StatusRange{200, 399}
	for code, want := range map[int]bool{199: false, 200: true, 302: true, 399: true, 400: false} {
		if got := r.Contains(code); got != want {
			t.Errorf("Contains(%d) = %v, want %v", code, got, want)
		}
	}
}
