// Package history keeps each check's recent probe results, bounded: an
// hour in buckets of FineStep and a day in buckets of CoarseStep, so a
// check's memory does not grow with how often it runs.
package history

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// The two resolutions. A result counts in one bucket of each.
const (
	FineStep   = 10 * time.Second
	FineSpan   = time.Hour
	CoarseStep = 5 * time.Minute
	CoarseSpan = 24 * time.Hour
)

// Point is the results of one bucket.
type Point struct {
	Start    time.Time
	Results  int
	Failures int
	Mean     time.Duration // latency, failures included
	Max      time.Duration
}

// Bucket is a bucket as the store and its file hold it: its start in Unix
// seconds, then the results, failures, and the sum and maximum of the
// latencies in microseconds.
type Bucket [5]int64

func (b *Bucket) point() Point {
	p := Point{Start: time.Unix(b[0], 0).UTC(), Results: int(b[1]), Failures: int(b[2]), Max: time.Duration(b[4]) * time.Microsecond}
	if b[1] > 0 {
		p.Mean = time.Duration(b[3]/b[1]) * time.Microsecond
	}
	return p
}

// Series is one check's buckets, oldest first.
type Series struct {
	Fine   []Bucket `json:",omitempty"`
	Coarse []Bucket `json:",omitempty"`
}

// Store holds the series of every check. The zero value is not ready:
// use New. Its methods are safe for concurrent use.
type Store struct {
	mu     sync.Mutex
	checks map[string]*Series
}

// New returns an empty store.
func New() *Store { return &Store{checks: map[string]*Series{}} }

// Add counts a result of check id, which started at at.
func (s *Store) Add(id string, at time.Time, healthy bool, latency time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.checks[id]
	if sr == nil {
		sr = &Series{}
		// Kept while the check is: one copy of the id, not a part of
		// the config the result's id came from.
		s.checks[strings.Clone(id)] = sr
	}
	us := latency.Microseconds()
	sr.Fine = add(sr.Fine, at, FineStep, FineSpan, healthy, us)
	sr.Coarse = add(sr.Coarse, at, CoarseStep, CoarseSpan, healthy, us)
}

// add counts a result in the bucket of step that holds at, dropping the
// buckets that fall out of span behind the newest.
func add(bs []Bucket, at time.Time, step, span time.Duration, healthy bool, us int64) []Bucket {
	sec := int64(step / time.Second)
	start := at.Unix() - at.Unix()%sec
	// Results come in order but for a run that outlasts a later one's
	// start: the bucket is the last or close to it.
	i := sort.Search(len(bs), func(i int) bool { return bs[i][0] >= start })
	if i == len(bs) || bs[i][0] != start {
		if len(bs) > 0 && start <= bs[len(bs)-1][0]-int64(span/time.Second) {
			return bs // older than what is kept
		}
		bs = slices.Insert(bs, i, Bucket{start})
	}
	b := &bs[i]
	b[1]++
	if !healthy {
		b[2]++
	}
	b[3] += us
	b[4] = max(b[4], us)
	return trim(bs, bs[len(bs)-1][0]-int64(span/time.Second))
}

// trim drops the buckets that start at or before oldest, in place.
func trim(bs []Bucket, oldest int64) []Bucket {
	n := sort.Search(len(bs), func(i int) bool { return bs[i][0] > oldest })
	if n == 0 {
		return bs
	}
	return append(bs[:0], bs[n:]...)
}

// History is a check's results over the last FineSpan and CoarseSpan.
type History struct {
	Hour []Point // by FineStep
	Day  []Point // by CoarseStep
}

// Of returns check id's history as of now; false if it has no result.
func (s *Store) Of(id string, now time.Time) (History, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.checks[id]
	if sr == nil {
		return History{}, false
	}
	return History{Hour: points(sr.Fine, FineStep, now.Add(-FineSpan)), Day: points(sr.Coarse, CoarseStep, now.Add(-CoarseSpan))}, true
}

// points are the buckets of step that end after since.
func points(bs []Bucket, step time.Duration, since time.Time) []Point {
	out := []Point{}
	for i := range bs {
		if p := bs[i].point(); p.Start.Add(step).After(since) {
			out = append(out, p)
		}
	}
	return out
}

// Retain drops the series of every check keep does not keep, such as
// those a reload removed.
func (s *Store) Retain(keep func(id string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.checks {
		if !keep(id) {
			delete(s.checks, id)
		}
	}
}

// Snapshot copies every check's series, by id, for a file.
func (s *Store) Snapshot() map[string]Series {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Series, len(s.checks))
	for id, sr := range s.checks {
		out[id] = Series{Fine: slices.Clone(sr.Fine), Coarse: slices.Clone(sr.Coarse)}
	}
	return out
}

// Restore puts series saved before back, for the checks that have no
// result yet; each is cut to its spans and sorted, whatever the file
// held.
func (s *Store) Restore(saved map[string]Series) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sr := range saved {
		if s.checks[id] != nil {
			continue
		}
		s.checks[id] = &Series{Fine: clean(sr.Fine, FineSpan), Coarse: clean(sr.Coarse, CoarseSpan)}
	}
}

func clean(bs []Bucket, span time.Duration) []Bucket {
	bs = slices.Clone(bs)
	slices.SortFunc(bs, func(a, b Bucket) int { return int(a[0] - b[0]) })
	bs = slices.CompactFunc(bs, func(a, b Bucket) bool { return a[0] == b[0] })
	if len(bs) == 0 {
		return nil
	}
	return trim(bs, bs[len(bs)-1][0]-int64(span/time.Second))
}
