package history_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/history"
)

var t0 = time.Unix(1_800_000_000, 0).UTC() // a multiple of both steps

// TestBuckets: results count in the bucket of each step that holds their
// start, with failures, mean and maximum latency.
func TestBuckets(t *testing.T) {
	s := history.New()
	s.Add("web1", t0.Add(1*time.Second), true, 10*time.Millisecond)
	s.Add("web1", t0.Add(9*time.Second), false, 30*time.Millisecond)
	s.Add("web1", t0.Add(10*time.Second), true, 2*time.Millisecond)
	s.Add("web1", t0.Add(5*time.Second), true, 5*time.Millisecond) // late, into its own bucket
	h, ok := s.Of("web1", t0.Add(time.Minute))
	if !ok {
		t.Fatal("no history for web1")
	}
	wantHour := []history.Point{
		{Start: t0, Results: 3, Failures: 1, Mean: 15 * time.Millisecond, Max: 30 * time.Millisecond},
		{Start: t0.Add(10 * time.Second), Results: 1, Mean: 2 * time.Millisecond, Max: 2 * time.Millisecond},
	}
	wantDay := []history.Point{{Start: t0, Results: 4, Failures: 1, Mean: 11750 * time.Microsecond, Max: 30 * time.Millisecond}}
	if !reflect.DeepEqual(h.Hour, wantHour) || !reflect.DeepEqual(h.Day, wantDay) {
		t.Errorf("history\n%+v\n%+v\nwant\n%+v\n%+v", h.Hour, h.Day, wantHour, wantDay)
	}
	if _, ok := s.Of("web2", t0); ok {
		t.Error("web2 has a history without a result")
	}
}

// TestBounded: a day of results every second keeps an hour of fine
// buckets and a day of coarse ones, and Of shows only those within the
// span of now.
func TestBounded(t *testing.T) {
	s := history.New()
	for i := range 2 * 86400 {
		s.Add("web1", t0.Add(time.Duration(i)*time.Second), i%2 == 0, time.Millisecond)
	}
	end := t0.Add(2 * 86400 * time.Second)
	snap := s.Snapshot()["web1"]
	if len(snap.Fine) != 360 || len(snap.Coarse) != 288 {
		t.Fatalf("kept %d fine and %d coarse buckets, want 360 and 288", len(snap.Fine), len(snap.Coarse))
	}
	h, _ := s.Of("web1", end)
	if len(h.Hour) != 360 || h.Hour[0].Start != end.Add(-time.Hour) || h.Hour[0].Results != 10 || h.Hour[0].Failures != 5 {
		t.Errorf("hour: %d points from %+v, want 360 from %v of 10 results, 5 failed", len(h.Hour), h.Hour[0], end.Add(-time.Hour))
	}
	h, _ = s.Of("web1", end.Add(50*time.Minute))
	if len(h.Hour) != 60 || len(h.Day) != 278 {
		t.Errorf("50 minutes on: %d fine and %d coarse points, want 60 and 278", len(h.Hour), len(h.Day))
	}
	s.Add("web1", end.Add(-25*time.Hour), true, time.Millisecond) // older than the day kept
	if after := s.Snapshot()["web1"]; !reflect.DeepEqual(after, snap) {
		t.Error("a result older than both spans changed the buckets")
	}
}

// TestRestore: a snapshot restores checks without results, cut to the
// spans and sorted, and leaves those with results as they are; Retain
// drops the rest.
func TestRestore(t *testing.T) {
	s := history.New()
	s.Add("web1", t0, true, time.Millisecond)
	saved := map[string]history.Series{
		"web1": {Fine: []history.Bucket{{t0.Unix() - 10, 1, 1, 5, 5}}},
		"web2": {Fine: []history.Bucket{{t0.Unix(), 1, 0, 7, 7}, {t0.Unix() - 7200, 1, 0, 7, 7}, {t0.Unix(), 1, 0, 7, 7}}},
	}
	s.Restore(saved)
	snap := s.Snapshot()
	if len(snap["web1"].Fine) != 1 || snap["web1"].Fine[0][0] != t0.Unix() {
		t.Errorf("web1 %+v: want its own result alone", snap["web1"])
	}
	if want := []history.Bucket{{t0.Unix(), 1, 0, 7, 7}}; !reflect.DeepEqual(snap["web2"].Fine, want) {
		t.Errorf("web2 %+v, want %v", snap["web2"].Fine, want)
	}
	s.Retain(func(id string) bool { return id == "web2" })
	if _, ok := s.Of("web1", t0); ok {
		t.Error("Retain kept web1")
	}
}
