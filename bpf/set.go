package bpf

// Set is a record set as the control plane holds it: the fields of struct
// rrset and its candidates. A set of up to MAX_CANDIDATES keeps them in
// Cand, as its slot does. A pool keeps up to POOL_CANDIDATES in Pool, and
// the loader writes them to the pool map (struct rec_pool) and flags the
// slot's set RR_POOL with the entry's index in place of Cand.
type Set struct {
	SteadydnsRrset
	Pool []SteadydnsCandidate // a pool's candidates; nil for a set in its slot
}

// Candidates are the set's candidates, N of them, as the program reads
// them: from Cand, or from Pool for a pool.
func (s *Set) Candidates() []SteadydnsCandidate {
	if s.Pool != nil {
		return s.Pool[:min(int(s.N), len(s.Pool))]
	}
	return s.Cand[:min(int(s.N), len(s.Cand))]
}
