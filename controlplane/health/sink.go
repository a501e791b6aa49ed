package health

import "fmt"

// Sink takes every table the aggregator pushes. An edge's table
// (controlplane/edge) writes it into this host's data plane and remembers
// what it wrote; a fleet's aggregator without XDP hands it to the
// transport instead. table is only valid during the call.
type Sink interface {
	WriteHealth(table []byte, version, configHash, staleAfterNs uint64) error
}

// Seed is a table pushed before, from which the checks take their first
// states: a restarted aggregator reads the pinned one, so its first push
// does not make every endpoint flap. The zero Seed seeds nothing and every
// check starts healthy.
type Seed struct {
	ConfigHash uint64 // the config the table was computed under
	Table      []byte // entries as loader encodes them; nil for no seed
}

// check reports a seed that is not a table of this many bytes.
func (s Seed) check(bytes int) error {
	if s.Table != nil && len(s.Table) != bytes {
		return fmt.Errorf("seeding the health table: %d bytes, want %d", len(s.Table), bytes)
	}
	return nil
}
