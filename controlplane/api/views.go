package api

import (
	"time"

	"github.com/steadydns/steadydns/controlplane/edge"
	"github.com/steadydns/steadydns/controlplane/health"
)

// The API's JSON. health and edge export plain data; the names users and
// `steadydns status` read are defined here alone.

// TableView is the health table now in the data plane, with the
// aggregator's counters: "table" in /api/v1/checks and /api/v1/records.
type TableView struct {
	Version        uint64  `json:"version"`
	AgeSec         float64 `json:"age_seconds"`
	ColdOpen       bool    `json:"fail_open_cold_start"` // no table yet: every record answers all candidates
	Stale          bool    `json:"stale"`
	PushSeconds    float64 `json:"last_push_seconds"`
	Frames         uint64  `json:"frames_ingested"`
	FramesRejected uint64  `json:"frames_rejected"`
}

func tableView(src Source) TableView {
	var m edge.Meta
	var c health.Counters
	if t := src.Table(); t != nil {
		m = t.Meta()
	}
	if a := src.Aggregator(); a != nil {
		c = a.Counters()
	}
	return TableView{Version: m.Version, AgeSec: m.Age.Seconds(), ColdOpen: m.Cold, Stale: m.Stale,
		PushSeconds: c.LastPush.Seconds(), Frames: c.Frames, FramesRejected: c.Rejected}
}

// CheckView is a check in /api/v1/checks.
type CheckView struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Index    uint32       `json:"index"`
	Up       bool         `json:"healthy"`
	Reason   string       `json:"reason"`
	Admin    string       `json:"admin"`
	Since    time.Time    `json:"since"`
	Checkers int          `json:"checkers_reporting"`
	Healthy  int          `json:"checkers_healthy"`
	Results  []ResultView `json:"last_results,omitempty"` // newest first
	Records  []string     `json:"records"`                // "name TYPE" of every record it feeds
	Votes    []VoteView   `json:"votes,omitempty"`        // each checker's vote, where this host aggregates
}

// VoteView is one checker's vote on a check.
type VoteView struct {
	Checker string    `json:"checker"`
	Region  string    `json:"region,omitempty"`
	Healthy bool      `json:"healthy"`
	Heard   time.Time `json:"last_heard"`
	Counted bool      `json:"counted"` // heard within aggregation.checker_timeout
}

// FleetView is this host's place in a fleet: "fleet" in /api/v1/checks.
type FleetView struct {
	ID               string                       `json:"id"`
	Roles            []string                     `json:"roles"`
	Region           string                       `json:"region,omitempty"`
	Cell             string                       `json:"cell,omitempty"` // the cell this host's prober and aggregator belong to
	ConfigHash       string                       `json:"config_hash"`
	ConfigSource     string                       `json:"config_source"`       // file or nats
	PushSeconds      float64                      `json:"push_period_seconds"` // aggregation.push_interval: how often the status page refreshes
	Revision         uint64                       `json:"config_revision,omitempty"`
	Refused          uint64                       `json:"config_revisions_refused,omitempty"`
	Following        string                       `json:"following,omitempty"`       // the aggregator whose tables this edge writes, in the first cell
	FollowingCells   map[string]string            `json:"following_cells,omitempty"` // cell → the aggregator followed in it
	Switches         uint64                       `json:"aggregator_switches,omitempty"`
	PermissionErrors uint64                       `json:"permission_errors,omitempty"`
	Messages         map[string]map[string]uint64 `json:"messages,omitempty"`     // kind → result → count
	NATSRefused      map[string]uint64            `json:"nats_refused,omitempty"` // what the embedded server refused: publish, subscribe, client, route
	Capacity         []CapacityView               `json:"capacity,omitempty"`     // this host's use of its cell's capacity, per resource
}

// CapacityView is one resource of a cell's capacity as this host uses it.
type CapacityView struct {
	Resource string `json:"resource"` // prober_checks, aggregator_checker_checks or aggregator_edges
	Used     int    `json:"used"`
	Limit    int    `json:"limit"` // from cluster.capacity
}

// ResultView is one recent probe result.
type ResultView struct {
	Time      time.Time `json:"time"`
	Healthy   bool      `json:"healthy"`
	Reason    string    `json:"reason"`
	Detail    string    `json:"detail,omitempty"`
	LatencyMs float64   `json:"latency_ms"`
	// Counted says the check's state and reason include this result. A
	// result newer than the last push is not counted yet.
	Counted bool `json:"counted"`
}

// LastCounted is the newest result the check's state and reason count,
// which is the one its reason comes from when one checker reports; nil if
// none is.
func (v *CheckView) LastCounted() *ResultView {
	for i := range v.Results {
		if v.Results[i].Counted {
			return &v.Results[i]
		}
	}
	return nil
}

func checkView(s health.Status, records []string) CheckView {
	v := CheckView{ID: s.ID, Type: s.Type, Index: s.Index, Up: s.Up, Reason: s.Reason, Admin: s.Admin, Since: s.Since,
		Checkers: s.Checkers, Healthy: s.Healthy, Records: records}
	for _, vt := range s.Votes {
		v.Votes = append(v.Votes, VoteView(vt))
	}
	for _, r := range s.Results {
		v.Results = append(v.Results, ResultView{Time: r.Time, Healthy: r.Healthy, Reason: r.Reason.String(), Detail: r.Detail,
			LatencyMs: float64(r.Latency.Microseconds()) / 1000, Counted: r.Seq <= s.Counted})
	}
	return v
}

// AnswerView is a candidate in /api/v1/records.
type AnswerView struct {
	Value   string `json:"value"`
	Check   string `json:"check,omitempty"`
	Healthy bool   `json:"healthy"`
	In      bool   `json:"in"`     // eligible for answers now
	Reason  string `json:"reason"` // why it is in or out
}

// RecordView is a record set in /api/v1/records.
type RecordView struct {
	Name    string       `json:"name"`
	Type    string       `json:"type"`
	Policy  string       `json:"policy"`
	Dynamic bool         `json:"dynamic"`
	Answers []AnswerView `json:"answers"`
}
