package api_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/prober"
)

// TestDebugVotes: the debug TXT answer says, after the candidates, how
// each checker of each region voted on the record's checks.
func TestDebugVotes(t *testing.T) {
	s := newServer(t)
	now := time.Now()
	s.push(t, now)
	s.fail(t, now.Add(time.Second)) // p1, no region: web1 down
	f := prober.Frame{Version: 1, ConfigHash: s.cfg.Hash, Prober: "p2", Region: "eu", Entries: make([]prober.Entry, s.cfg.Aggregation.TableSize)}
	f.Entries[0] = prober.Entry{Index: s.entry("web1"), Seq: 1, Reason: prober.ReasonOK, Healthy: true}
	f.Entries[1] = prober.Entry{Index: s.entry("web2"), Seq: 1, Reason: prober.ReasonOK, Healthy: true}
	b, err := prober.Encode(nil, &f)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.agg.IngestFrame(b, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	s.push(t, now.Add(time.Second))
	got := api.DebugTXT(s, "www.example.test.")
	// p1 never reported web2: its vote there is the initial one, not
	// counted.
	want := []string{
		"check web1 votes healthy=1/2: p1=down eu/p2=up",
		"check web2 votes healthy=1/1: p1=up(stale) eu/p2=up",
	}
	if len(got) < 2 || !slices.Equal(got[len(got)-2:], want) {
		t.Errorf("debug TXT %q, want it to end with %q", got, want)
	}
}

// TestDebugVotesSplit: votes that do not fit one TXT string go on in the
// next, each string at most 255 bytes and naming the check.
func TestDebugVotesSplit(t *testing.T) {
	s := newServer(t)
	now := time.Now()
	for i := range 40 {
		f := prober.Frame{Version: 1, ConfigHash: s.cfg.Hash, Prober: fmt.Sprintf("prober-%02d", i), Region: "region-a", Entries: make([]prober.Entry, s.cfg.Aggregation.TableSize)}
		f.Entries[0] = prober.Entry{Index: s.entry("web1"), Seq: 1, Reason: prober.ReasonOK, Healthy: true}
		b, err := prober.Encode(nil, &f)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.agg.IngestFrame(b, now); err != nil {
			t.Fatal(err)
		}
	}
	s.push(t, now)
	var votes []string
	for _, line := range api.DebugTXT(s, "www.example.test.") {
		rest, ok := strings.CutPrefix(line, "check web1 votes healthy=40/40: ")
		if !ok {
			continue
		}
		if len(line) > 255 {
			t.Errorf("a string of %d bytes: %q", len(line), line)
		}
		votes = append(votes, strings.Fields(rest)...)
	}
	if len(votes) != 40 || votes[0] != "region-a/prober-00=up" || votes[39] != "region-a/prober-39=up" {
		t.Errorf("votes %q, want the 40 probers' up", votes)
	}
}
