package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/notify"
)

// EventView is a transition in /api/v1/events: the payload webhooks and
// the fleet's events subject carry.
type EventView = notify.Payload

func eventViews(evs []health.Event) []EventView {
	out := []EventView{}
	for i := range evs {
		out = append(out, notify.PayloadOf(&evs[i]))
	}
	return out
}

// eventParams are the query parameters /api/v1/events takes.
var eventParams = []string{"check", "record", "transition", "since", "until"}

// events serves the log, filtered by check ids and record names (each
// may repeat, any matching), transition (up or down) and time (since,
// inclusive, and until, exclusive, in RFC 3339).
func events(w http.ResponseWriter, r *http.Request, st State) {
	f, err := eventFilter(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, map[string]any{"events": eventViews(st.Events().Select(f))})
}

func eventFilter(q url.Values) (health.Filter, error) {
	var f health.Filter
	for k, vs := range q {
		if !slices.Contains(eventParams, k) {
			return f, fmt.Errorf("unknown parameter %q, want check, record, transition, since or until", k)
		}
		if slices.Contains(vs, "") {
			return f, fmt.Errorf("%s: empty value", k)
		}
		if len(vs) > 1 && k != "check" && k != "record" {
			return f, fmt.Errorf("%s: given %d times, want once", k, len(vs))
		}
	}
	f.Checks = q["check"]
	for _, name := range q["record"] {
		f.Records = append(f.Records, health.RecordName(name))
	}
	switch t := q.Get("transition"); t {
	case "":
	case "up":
		f.To = health.StateHealthy
	case "down":
		f.To = health.StateUnhealthy
	default:
		return f, fmt.Errorf("transition: %q, want up or down", t)
	}
	for k, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(k); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, fmt.Errorf("%s: %q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", k, v)
			}
			*dst = t
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, fmt.Errorf("since %s is not before until %s", q.Get("since"), q.Get("until"))
	}
	return f, nil
}
