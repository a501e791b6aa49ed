package config

import (
	"fmt"
	"reflect"
	"regexp"
	"testing"
	"time"
	"unsafe"

	"github.com/steadydns/steadydns/prober"
)

// TestChecksRoundTrip: every field of every check comes back from the
// packed store as it went in, and checks are found by id.
func TestChecksRoundTrip(t *testing.T) {
	full := &Check{ID: "web", Type: CheckHTTPS, Target: "198.18.0.10", Port: 8443, Path: "/health", Method: "HEAD",
		Host: "www.example.test", SNI: "sni.example.test", TLSVerify: true,
		ExpectStatus: []prober.StatusRange{{Lo: 200, Hi: 204}, {Lo: 301, Hi: 301}}, ExpectBody: "ok",
		ExpectBodyRegexp: regexp.MustCompile(`"up":\s*true`), KeepAlive: true,
		Send: "PING\r\n", Expect: "+PONG", ExpectRegexp: regexp.MustCompile(`^\+PONG`), Payload: "ping", ExpectReply: "pong",
		QName: "www.example.test.", QType: 28, ExpectRcode: 3, ExpectAnswer: "fd53::10",
		Children: []string{"db", "web"}, MinHealthy: 1, TTL: time.Minute, Interval: 5 * time.Second, Timeout: time.Second,
		UnhealthyThreshold: 4, HealthyThreshold: 2, Invert: true, Admin: "down", Cell: "blue", Initial: "unhealthy",
		Regions: []string{"eu-west", "us-east", "ap-south"}, URL: "http://198.18.1.2:9090", Query: `up{job="web"}`, InsufficientData: "unhealthy"}
	// A field added to Check and not to the store would come back zero.
	v := reflect.ValueOf(*full)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test's check leaves %s zero", v.Type().Field(i).Name)
		}
	}
	db := &Check{ID: "db", Type: CheckTCP, Target: "198.18.0.10", Port: 5432, Interval: 10 * time.Second,
		Timeout: 2 * time.Second, UnhealthyThreshold: 3, HealthyThreshold: 3, Admin: "auto", Cell: "blue"}
	calc := &Check{ID: "all", Type: CheckCalculated, Children: []string{"web"}, MinHealthy: 1, Admin: "auto", Cell: "red"}
	in := []*Check{full, db, calc}
	s := NewChecks(in)

	if s.Len() != len(in) {
		t.Fatalf("Len %d, want %d", s.Len(), len(in))
	}
	for i, want := range in {
		same(t, fmt.Sprintf("ID(%d)", i), s.ID(i), want.ID)
		same(t, fmt.Sprintf("Type(%d)", i), s.Type(i), want.Type)
		same(t, fmt.Sprintf("Cell(%d)", i), s.Cell(i), want.Cell)
		same(t, fmt.Sprintf("Check(%d)", i), s.Check(i), *want)
		k, ok := s.Find(want.ID)
		if !ok || k != i {
			t.Errorf("Find(%s) = %d, %v, want %d", want.ID, k, ok, i)
		}
		got, ok := s.Get(want.ID)
		if !ok || !reflect.DeepEqual(got, *want) {
			t.Errorf("Get(%s) = %+v, %v", want.ID, got, ok)
		}
	}
	for _, id := range []string{"", "a", "webx", "zzz"} {
		if s.Has(id) {
			t.Errorf("Has(%q) for a check the store does not hold", id)
		}
	}
	// Children are the caller's own: changing them changes no other read.
	c := s.Check(0)
	c.Children[0] = "x"
	same(t, "children after a caller's change", s.Check(0).Children, []string{"db", "web"})

	var empty Checks
	if empty.Len() != 0 || empty.Has("web") {
		t.Error("the zero Checks holds checks")
	}
}

// TestChecksPointerFree: what the store holds per check has no pointer,
// so that the garbage collector does not walk it: the point of packing.
func TestChecksPointerFree(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[checkHead](), reflect.TypeFor[checkBody](), reflect.TypeFor[span](), reflect.TypeFor[prober.StatusRange]()} {
		if p := pointerField(typ); p != "" {
			t.Errorf("%s holds a pointer: %s", typ, p)
		}
	}
}

// pointerField names a field of t that is or holds a pointer, or "".
func pointerField(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if p := pointerField(t.Field(i).Type); p != "" {
				return t.Field(i).Name + "." + p
			}
		}
		return ""
	case reflect.Array:
		return pointerField(t.Elem())
	case reflect.Pointer, reflect.Slice, reflect.String, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return t.String()
	}
	return ""
}

// TestCheckClone: a cloned check equals the original and shares none of
// the store's memory, so keeping it does not keep every check's strings.
func TestCheckClone(t *testing.T) {
	s := NewChecks([]*Check{{ID: "web", Type: CheckHTTP, Target: "198.18.0.10", Path: "/", Method: "GET", Admin: "auto", Cell: "blue",
		ExpectStatus: []prober.StatusRange{{Lo: 200, Hi: 399}}, Children: []string{"db"}}})
	c := s.Check(0)
	cl := c.Clone()
	same(t, "clone", cl, c)
	shared := func(a, b string) bool { return len(a) > 0 && unsafe.StringData(a) == unsafe.StringData(b) }
	v, w := reflect.ValueOf(c), reflect.ValueOf(cl)
	for i := range v.NumField() {
		if v.Field(i).Kind() == reflect.String && shared(v.Field(i).String(), w.Field(i).String()) {
			t.Errorf("the clone's %s shares the store's memory", v.Type().Field(i).Name)
		}
	}
	if &cl.ExpectStatus[0] == &c.ExpectStatus[0] || shared(cl.Children[0], c.Children[0]) {
		t.Error("the clone's lists share the store's memory")
	}
}

// TestChecksShareBodies: checks that differ only in id and target share
// one body and one status list, and each still comes back as it went in.
func TestChecksShareBodies(t *testing.T) {
	var in []*Check
	for i := range 1000 {
		in = append(in, &Check{ID: fmt.Sprintf("web%d", i), Type: CheckHTTP, Target: fmt.Sprintf("198.18.%d.%d", i/256, i%256),
			Port: 80, Path: "/", Method: "GET", ExpectStatus: []prober.StatusRange{{Lo: 200, Hi: 399}},
			ExpectBodyRegexp: regexp.MustCompile("ok"), Interval: time.Second, Admin: "auto", Cell: "blue"})
	}
	s := NewChecks(in)
	if len(s.bodies) != 1 || len(s.status) != 1 || len(s.regexps) != 1 {
		t.Errorf("%d bodies, %d status ranges, %d regexps for checks of one kind, want 1 each", len(s.bodies), len(s.status), len(s.regexps))
	}
	for i, want := range in {
		got := s.Check(i)
		if got.ExpectBodyRegexp.String() != "ok" {
			t.Fatalf("check %d: regexp %v", i, got.ExpectBodyRegexp)
		}
		got.ExpectBodyRegexp, want.ExpectBodyRegexp = nil, nil // compiled programs are not comparable
		same(t, want.ID, got, *want)
	}
}
