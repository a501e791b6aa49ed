package config

import "testing"

// TestPool: a record holds up to MaxCandidates answers, a pool past the
// slot's eight, and answers at most MaxAnswers of them, by default too.
func TestPool(t *testing.T) {
	c, err := load(t, base+"records:\n  - name: www.example.test.\n    type: A\n    answers:\n"+answers(MaxCandidates))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Records[0]
	if len(r.Answers) != 64 || r.MaxAnswers != 8 {
		t.Errorf("%d answers, max_answers %d; want 64 and 8", len(r.Answers), r.MaxAnswers)
	}
}
