package notify

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/steadydns/steadydns/controlplane/health"
)

// Payload is a state change as webhooks, the fleet's events subject and
// GET /api/v1/events carry it.
type Payload struct {
	// ID is the same on every aggregator that judged the change in the
	// same push period: receivers dedupe on it.
	ID      string    `json:"id"`
	Time    time.Time `json:"time"`
	Check   string    `json:"check"`
	Region  string    `json:"region,omitempty"` // a traffic shift's region; check is "" then
	Records []string  `json:"records"`          // the record sets whose answers use the check
	From    string    `json:"from"`             // healthy or unhealthy
	To      string    `json:"to"`
	Reason  string    `json:"reason"`
	Detail  string    `json:"detail,omitempty"`
	Host    string    `json:"host"` // the aggregator that judged it
	Cell    string    `json:"cell"`
}

// PayloadOf is ev's payload.
func PayloadOf(ev *health.Event) Payload {
	records := ev.Records
	if records == nil {
		records = []string{}
	}
	return Payload{ID: ev.ID, Time: ev.Time, Check: ev.Check, Region: ev.Region, Records: records, From: ev.From, To: ev.To,
		Reason: ev.Reason, Detail: ev.Detail, Host: ev.Host, Cell: ev.Cell}
}

// Event is the event p carries.
func (p *Payload) Event() health.Event {
	return health.Event{ID: p.ID, Time: p.Time, Check: p.Check, Region: p.Region, Records: p.Records, From: p.From, To: p.To,
		Reason: p.Reason, Detail: p.Detail, Host: p.Host, Cell: p.Cell}
}

// Encode is ev as JSON.
func Encode(ev *health.Event) []byte {
	b, _ := json.Marshal(PayloadOf(ev)) // strings, a slice and a time: always encodes
	return b
}

// Decode reads an event Encode wrote; it must name a check and go
// between the two states.
func Decode(b []byte) (health.Event, error) {
	var p Payload
	if err := json.Unmarshal(b, &p); err != nil {
		return health.Event{}, fmt.Errorf("decoding an event: %w", err)
	}
	states := map[string]bool{health.StateHealthy: true, health.StateUnhealthy: true}
	// A traffic shift's event names its region instead of a check.
	if p.Region != "" {
		states = map[string]bool{health.ShiftServing: true, health.ShiftShifted: true}
	}
	if (p.Check == "") == (p.Region == "") || !states[p.From] || !states[p.To] {
		return health.Event{}, fmt.Errorf("decoding an event: check %q, region %q from %q to %q", p.Check, p.Region, p.From, p.To)
	}
	return p.Event(), nil
}

// EventID is the id of a change of check to state to, judged in push
// slot slot: the same wherever the same period's push judged it.
func EventID(check, to string, slot uint64) string {
	return fmt.Sprintf("%s/%s/%d", check, to, slot)
}
