// Package edge holds the health table as this edge's data plane has it:
// every table given to it goes into the data plane, and it answers, for the
// fallback and the API, what the XDP program reads. In a fleet its Merger
// builds that table from each cell's aggregators.
package edge

import (
	"sync/atomic"
	"time"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/selection"
	"github.com/steadydns/steadydns/loader"
)

// Store is the data plane's health table; *loader.Objects is one.
type Store interface {
	// PushHealthAt writes a whole table, stamped as arrived at arrivedNs
	// on the boot clock, and returns the metadata it wrote.
	PushHealthAt(table []byte, version, configHash, staleAfterNs, arrivedNs uint64) (bpf.SteadydnsTableMeta, error)
	// HealthUpAt reads entry i's state as the data plane reads it.
	HealthUpAt(i uint32) bool
}

// Table is the health table installed in the data plane. It is a
// health.Sink: whatever produces tables (the aggregator in process, or a
// transport from a fleet's aggregators) writes them through it. Its
// methods are safe for concurrent use.
type Table struct {
	store Store
	// meta is what the last write put in the data plane's metadata,
	// kept here so the fallback's Open costs no system call per query.
	meta atomic.Pointer[bpf.SteadydnsTableMeta]
	// written is told of every table written, for work that follows
	// health, such as signing the answers it makes possible.
	written atomic.Pointer[func()]
}

// OnWrite makes f run after every table written into the data plane.
func (t *Table) OnWrite(f func()) { t.written.Store(&f) }

// New returns the table in store. meta is the metadata already there
// (loader's ReadHealth): a restarted server is not cold while the table it
// pushed before is fresh.
func New(store Store, meta bpf.SteadydnsTableMeta) *Table {
	t := &Table{store: store}
	t.meta.Store(&meta)
	return t
}

// WriteHealth writes a table into the data plane, stamped on arrival with
// this host's boot clock, as the XDP program reads it.
func (t *Table) WriteHealth(table []byte, version, configHash, staleAfterNs uint64) error {
	return t.WriteHealthAt(table, version, configHash, staleAfterNs, loader.BootNs())
}

// WriteHealthAt is WriteHealth for a table whose age started earlier, at
// arrivedNs on the boot clock: a table merged from several cells is as old
// as its oldest part.
func (t *Table) WriteHealthAt(table []byte, version, configHash, staleAfterNs, arrivedNs uint64) error {
	meta, err := t.store.PushHealthAt(table, version, configHash, staleAfterNs, arrivedNs)
	if err != nil {
		return err
	}
	t.meta.Store(&meta)
	if f := t.written.Load(); f != nil {
		(*f)()
	}
	return nil
}

// Up reports an entry's state as the data plane reads it.
func (t *Table) Up(index uint32) bool { return t.store.HealthUpAt(index) }

// Open reports whether a record with the given stale policy answers every
// candidate: no table yet (cold start), or a stale table under answer_all.
func (t *Table) Open(stale uint8) bool {
	return selection.Open(*t.meta.Load(), stale, loader.BootNs())
}

// Meta describes the table now in the data plane.
type Meta struct {
	Version uint64        // its push slot; 0 before the first table
	Age     time.Duration // since it arrived
	Cold    bool          // no table yet: every record answers all candidates
	Stale   bool          // older than its stale_after
}

// Meta reports the table's version and age.
func (t *Table) Meta() Meta {
	m := t.meta.Load()
	if m.Version == 0 {
		return Meta{Cold: true}
	}
	age := time.Duration(loader.BootNs() - m.ArrivedNs)
	return Meta{Version: m.Version, Age: age, Stale: m.StaleAfterNs != 0 && uint64(age) > m.StaleAfterNs}
}
