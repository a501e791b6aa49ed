package health

import "fmt"

// Sink takes every table the aggregator pushes. An edge's table
// (controlplane/edge) writes it into this host's data plane and remembers
// what it wrote; a fleet's aggregator without XDP hands it to the
// transport instead. table is only valid during the call.
type Sink interface {
	WriteHealth(table []byte, version, configHash, staleAfterNs uint64) error
}

// Seed is what a restarted aggregator knew, from which the checks take
// their first states, so its first push does not make every endpoint
// flap, nor answer a backend known dead until its checks fail again. The
// zero Seed seeds nothing and every check starts healthy.
type Seed struct {
	// Saved is every check's state as Aggregator.Saved returned it, by
	// id: whatever the table's layout, a known check starts where it
	// was, with its admin override and external report.
	Saved map[string]Saved
	// Table is a table pushed before, as loader encodes it, and
	// ConfigHash the config it was computed under: when that is the
	// running config's, it is newer than Saved (the pinned table is
	// written every push). nil for none.
	Table      []byte
	ConfigHash uint64
	// Shifts are the traffic shifts in force, as Aggregator.Shifts
	// returned them.
	Shifts []Shift
}

// check reports a seed that is not a table of this many bytes.
func (s Seed) check(bytes int) error {
	if s.Table != nil && len(s.Table) != bytes {
		return fmt.Errorf("seeding the health table: %d bytes, want %d", len(s.Table), bytes)
	}
	return nil
}
