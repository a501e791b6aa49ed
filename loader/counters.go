package loader

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/steadydns/steadydns/bpf"
)

// Outcomes sums the per-CPU outcome counters, indexed by outcome.
func (o *Objects) Outcomes() ([]uint64, error) {
	out := make([]uint64, bpf.SteadydnsOutcomeOUT_MAX)
	var perCPU []uint64
	for i := range out {
		if err := o.Counters.Lookup(uint32(i), &perCPU); err != nil {
			return nil, fmt.Errorf("reading counter %d: %w", i, err)
		}
		for _, v := range perCPU {
			out[i] += v
		}
	}
	return out, nil
}

// OutcomeNames are the metric labels of the outcomes, "answered",
// "not_found"…, read from the BTF of the counters map's key, enum outcome,
// so that C stays the one definition.
func OutcomeNames() ([]string, error) {
	spec, err := bpf.LoadSteadydns()
	if err != nil {
		return nil, fmt.Errorf("reading the bpf object: %w", err)
	}
	var specs bpf.SteadydnsMapSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, fmt.Errorf("reading the bpf object: %w", err)
	}
	e, ok := btf.UnderlyingType(specs.Counters.Key).(*btf.Enum)
	if !ok {
		return nil, fmt.Errorf("reading the outcome names: the counters key is a %s, not an enum", specs.Counters.Key)
	}
	names := make([]string, bpf.SteadydnsOutcomeOUT_MAX)
	for _, v := range e.Values {
		if v.Value < uint64(len(names)) {
			names[v.Value] = strings.ToLower(strings.TrimPrefix(v.Name, "OUT_"))
		}
	}
	return names, nil
}
