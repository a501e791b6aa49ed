package edge_test

import (
	"testing"
	"time"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/edge"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/loader"
)

// memStore holds a table as the data plane's map would.
type memStore struct{ table []byte }

func (m *memStore) PushHealthAt(table []byte, version, configHash, staleAfterNs, arrivedNs uint64) (bpf.SteadydnsTableMeta, error) {
	m.table = append(m.table[:0], table...)
	return bpf.SteadydnsTableMeta{Version: version, ConfigHash: configHash, ArrivedNs: arrivedNs, StaleAfterNs: staleAfterNs}, nil
}

func (m *memStore) HealthUpAt(i uint32) bool { return healthtable.Up(m.table, i) }

var (
	keep      = uint8(bpf.SteadydnsStalePolicySTALE_KEEP)
	answerAll = uint8(bpf.SteadydnsStalePolicySTALE_ANSWER_ALL)
)

// TestCold: until a table arrives every record answers all candidates,
// whatever its stale policy, and the table says so.
func TestCold(t *testing.T) {
	tb := edge.New(&memStore{}, bpf.SteadydnsTableMeta{})
	if !tb.Open(keep) || !tb.Open(answerAll) {
		t.Error("no table yet, and a record does not answer all candidates")
	}
	if m := tb.Meta(); !m.Cold || m.Version != 0 {
		t.Errorf("meta %+v, want cold", m)
	}
	table := make([]byte, healthtable.Bytes(4))
	healthtable.Put(table, 1, true, 0)
	if err := tb.WriteHealth(table, 7, 1, uint64(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if tb.Open(keep) || tb.Open(answerAll) {
		t.Error("open with a fresh table")
	}
	if m := tb.Meta(); m.Cold || m.Stale || m.Version != 7 || m.Age < 0 || m.Age > time.Second {
		t.Errorf("meta %+v, want version 7, fresh", m)
	}
	if !tb.Up(1) || tb.Up(2) {
		t.Errorf("entries 1, 2: %v %v, want what was written: up, down", tb.Up(1), tb.Up(2))
	}
}

// TestStale: a table that arrived longer than stale_after ago opens the
// records whose policy is answer_all, and only those. The metadata comes
// from the data plane at start: a restarted server keeps its table's age.
func TestStale(t *testing.T) {
	arrived := loader.BootNs() - uint64(2*time.Second)
	tb := edge.New(&memStore{}, bpf.SteadydnsTableMeta{Version: 3, ArrivedNs: arrived, StaleAfterNs: uint64(time.Second)})
	if !tb.Open(answerAll) || tb.Open(keep) {
		t.Errorf("stale table: open %v under answer_all, %v under keep; want true, false", tb.Open(answerAll), tb.Open(keep))
	}
	if m := tb.Meta(); !m.Stale || m.Cold || m.Age < 2*time.Second {
		t.Errorf("meta %+v, want stale, 2s old", m)
	}
	never := edge.New(&memStore{}, bpf.SteadydnsTableMeta{Version: 3, ArrivedNs: arrived})
	if never.Open(answerAll) || never.Meta().Stale {
		t.Error("stale_after 0: the table went stale")
	}
}

// TestWriteHealthAt: a table written with an earlier arrival is as old as
// that arrival, and goes stale by it.
func TestWriteHealthAt(t *testing.T) {
	tb := edge.New(&memStore{}, bpf.SteadydnsTableMeta{})
	table := make([]byte, healthtable.Bytes(4))
	if err := tb.WriteHealthAt(table, 9, 1, uint64(time.Second), loader.BootNs()-uint64(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if m := tb.Meta(); m.Age < 2*time.Second || !m.Stale || m.Version != 9 {
		t.Errorf("meta %+v, want version 9, 2s old and stale", m)
	}
}
