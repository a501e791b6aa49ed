package loader

import (
	"fmt"

	"github.com/cilium/ebpf/btf"

	"github.com/steadydns/steadydns/bpf"
)

// Outcomes sums the per-CPU outcome counts, indexed by outcome.
func (o *Objects) Outcomes() ([]uint64, error) {
	// struct outcome_counts is one 64-bit count per outcome, in the
	// enum's order.
	var perCPU [][bpf.SteadydnsOutcomeOUT_MAX]uint64
	if err := o.Counters.Lookup(uint32(0), &perCPU); err != nil {
		return nil, fmt.Errorf("reading the outcome counts: %w", err)
	}
	out := make([]uint64, bpf.SteadydnsOutcomeOUT_MAX)
	for _, c := range perCPU {
		for i, v := range c {
			out[i] += v
		}
	}
	return out, nil
}

// OutcomeNames are the metric labels of the outcomes, "answered",
// "not_found"…, in the enum's order: the field names of struct
// outcome_counts, the counters map's value, read from its BTF so that C
// stays the one definition and bpftool prints the same names.
func OutcomeNames() ([]string, error) {
	spec, err := bpf.LoadSteadydns()
	if err != nil {
		return nil, fmt.Errorf("reading the bpf object: %w", err)
	}
	var specs bpf.SteadydnsMapSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, fmt.Errorf("reading the bpf object: %w", err)
	}
	s, ok := btf.UnderlyingType(specs.Counters.Value).(*btf.Struct)
	if !ok || len(s.Members) != int(bpf.SteadydnsOutcomeOUT_MAX) {
		return nil, fmt.Errorf("reading the outcome names: the counters value is %s, not a struct of %d counts", specs.Counters.Value, bpf.SteadydnsOutcomeOUT_MAX)
	}
	names := make([]string, len(s.Members))
	for i, m := range s.Members {
		names[i] = m.Name
	}
	return names, nil
}
