// Package api serves steadydns's HTTP API: the checks and records with
// their state and the reason for it, the health-check log, the admin
// override, and Prometheus metrics.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/edge"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/history"
	"github.com/steadydns/steadydns/controlplane/records"
	"github.com/steadydns/steadydns/controlplane/selection"
)

// State is the running server as the API sees it. On a host of a fleet
// Aggregator is nil unless it aggregates and Table nil unless it is an
// edge.
type State interface {
	Source
	Events() *health.EventLog
	Records() *records.Compiled
	// History is the results of this host's prober; nil where it probes
	// nothing.
	History() *history.Store
	// SetAdmin and SetExternal change a check's state: on a single host
	// in its aggregator, in a fleet in every aggregator.
	SetAdmin(id, value string) error
	SetExternal(id string, up bool) error
	// Shift shifts a region's answers away for d, or with d 0 cancels
	// its shift; who names the client. Shifts lists those in force. In a
	// fleet only aggregators take and hold them.
	Shift(region string, d time.Duration, reason, who string) error
	Shifts() ([]health.Shift, error)
	// Reload rereads the config, as SIGHUP does; a config that cannot be
	// applied is refused with the reason and the running one stays.
	Reload() error
	// Ready is nil once the host serves as configured, else what it still
	// lacks.
	Ready() error
}

// Handler returns the API's routes.
func Handler(st State, m *Metrics) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /api/v1/checks", func(w http.ResponseWriter, r *http.Request) { checks(w, st) })
	mux.HandleFunc("PUT /api/v1/checks/{id}/admin", func(w http.ResponseWriter, r *http.Request) { setAdmin(w, r, st) })
	mux.HandleFunc("PUT /api/v1/checks/{id}/external", func(w http.ResponseWriter, r *http.Request) { setExternal(w, r, st) })
	mux.HandleFunc("GET /api/v1/records", func(w http.ResponseWriter, r *http.Request) { recordList(w, st) })
	mux.HandleFunc("GET /api/v1/shifts", func(w http.ResponseWriter, r *http.Request) { shiftList(w, st) })
	mux.HandleFunc("PUT /api/v1/shifts/{region}", func(w http.ResponseWriter, r *http.Request) { putShift(w, r, st) })
	mux.HandleFunc("DELETE /api/v1/shifts/{region}", func(w http.ResponseWriter, r *http.Request) { deleteShift(w, r, st) })
	// /healthz answers while the process serves HTTP at all: a supervisor
	// restarts it when this fails. /readyz says whether it serves as
	// configured: a load balancer or a route announcement waits for it.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := st.Ready(); err != nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "not ready: "+err.Error()+"\n")
			return
		}
		io.WriteString(w, "ready\n")
	})
	mux.HandleFunc("POST /api/v1/reload", func(w http.ResponseWriter, r *http.Request) {
		// A reload of a zone of millions of names outlasts the server's
		// write timeout, and its answer is the reload's outcome: without
		// this the client would see the connection close, not the result.
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
		if err := st.Reload(); err != nil {
			// The request was fine; the config on disk is what was refused.
			writeError(w, http.StatusUnprocessableEntity, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /api/v1/events", func(w http.ResponseWriter, r *http.Request) { events(w, r, st) })
	mux.HandleFunc("GET /api/v1/checks/{id}/history", func(w http.ResponseWriter, r *http.Request) { checkHistory(w, r, st) })
	mux.HandleFunc("GET /api/v1/traffic", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, m.traffic()) })
	page := pageHandler()
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /ui/{file}", page)
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func checks(w http.ResponseWriter, st State) {
	feeds := map[string][]string{}
	for _, s := range st.Records().Sets {
		seen := map[string]bool{}
		for _, c := range s.Checks() {
			if c != "" && !seen[c] {
				seen[c] = true
				feeds[c] = append(feeds[c], s.Name+" "+dns.TypeToString[s.Type])
			}
		}
	}
	var out []CheckView
	for _, s := range st.Statuses() {
		out = append(out, checkView(s, feeds[s.ID]))
	}
	writeJSON(w, map[string]any{"table": tableView(st), "fleet": st.Fleet(), "checks": out})
}

// readWord reads a write's body, at most maxBody bytes, trimmed; false
// when it answered an error instead: 413 for a larger body.
func readWord(w http.ResponseWriter, r *http.Request) (string, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "the body is over 64 bytes")
		return "", false
	case err != nil:
		writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return "", false
	}
	return strings.TrimSpace(string(body)), true
}

func setAdmin(w http.ResponseWriter, r *http.Request, st State) {
	word, ok := readWord(w, r)
	if !ok {
		return
	}
	reply(w, st.SetAdmin(r.PathValue("id"), word))
}

// setExternal takes an external check's state, "up" or "down"; it holds
// for the check's ttl unless pushed again.
func setExternal(w http.ResponseWriter, r *http.Request, st State) {
	word, ok := readWord(w, r)
	if !ok {
		return
	}
	var up bool
	switch word {
	case "up":
		up = true
	case "down":
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("external state %q is not up or down", word))
		return
	}
	reply(w, st.SetExternal(r.PathValue("id"), up))
}

// ErrWrongHost marks a write this host does not take, such as a state
// change sent to an edge; the error's text says where to send it.
var ErrWrongHost = errors.New("this host does not take this write")

func reply(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrWrongHost):
		writeError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, health.ErrUnknownCheck), errors.Is(err, health.ErrUnknownRegion), errors.Is(err, health.ErrNotShifted):
		writeError(w, http.StatusNotFound, err.Error())
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func recordList(w http.ResponseWriter, st State) {
	t := st.Table()
	if t == nil {
		writeError(w, http.StatusNotFound, "this host is not an edge: it has no records in a data plane")
		return
	}
	meta := tableView(st)
	writeJSON(w, map[string]any{"table": meta, "records": describeSets(st, t, meta, func(*records.Set) bool { return true })})
}

// describeSets describes the record sets keep selects.
func describeSets(st State, t *edge.Table, meta TableView, keep func(*records.Set) bool) []RecordView {
	checks := map[string]health.Status{}
	for _, s := range st.Statuses() {
		checks[s.ID] = s
	}
	var out []RecordView
	for _, s := range st.Records().Sets {
		if keep(s) {
			out = append(out, describe(s, t, meta.ColdOpen, checks))
		}
	}
	return out
}

// DebugTXT is the answer to the debug TXT name for a record set's name
// (lowercase fqdn; "." names none): the table's version and age, then each
// candidate of the sets of that name with its state and why it is in or
// out, as /api/v1/records says.
func DebugTXT(st State, name string) []string {
	t := st.Table()
	if t == nil {
		return []string{"this host is not an edge: it has no records in a data plane"}
	}
	meta := tableView(st)
	out := []string{fmt.Sprintf("table version=%d age=%.3fs cold=%v stale=%v", meta.Version, meta.AgeSec, meta.ColdOpen, meta.Stale)}
	if name == "." {
		return out
	}
	sets := describeSets(st, t, meta, func(s *records.Set) bool { return s.Name == name })
	if len(sets) == 0 {
		return append(out, "no health-checked record set "+name)
	}
	var checks []string
	for _, r := range sets {
		for _, a := range r.Answers {
			out = append(out, fmt.Sprintf("%s %s check=%s healthy=%s in=%s reason=%s", r.Type, a.Value, dashed(a.Check), yesNo(a.Healthy), yesNo(a.In), a.Reason))
			if a.Check != "" && !slices.Contains(checks, a.Check) {
				checks = append(checks, a.Check)
			}
		}
	}
	statuses := st.Statuses()
	for _, id := range checks {
		if i := slices.IndexFunc(statuses, func(s health.Status) bool { return s.ID == id }); i >= 0 {
			out = append(out, voteStrings(&statuses[i])...)
		}
	}
	return out
}

// maxTXT is the most a TXT string holds.
const maxTXT = 255

// voteStrings says how each checker voted on a check, by region, in as
// many strings as the votes need: "check web1 votes healthy=1/2:
// eu/p1=up us/p2=down"; a vote left out of the quorum, for a checker not
// heard within aggregation.checker_timeout, is marked "(stale)". Votes
// are an aggregator's, once a checker has reported.
func voteStrings(s *health.Status) []string {
	head := fmt.Sprintf("check %s votes healthy=%d/%d:", s.ID, s.Healthy, s.Checkers)
	if len(s.Votes) == 0 {
		return []string{head + " none: no checker has reported to this host"}
	}
	var out []string
	line := head
	for _, v := range s.Votes {
		word := v.Checker + "=" + map[bool]string{true: "up", false: "down"}[v.Healthy]
		if v.Region != "" {
			word = v.Region + "/" + word
		}
		if !v.Counted {
			word += "(stale)"
		}
		if len(line)+1+len(word) > maxTXT {
			out = append(out, line)
			line = head
		}
		line += " " + word
	}
	return append(out, line)
}

func dashed(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// describe explains each candidate with the data plane's own selection;
// checks are the checks' states by id.
func describe(s *records.Set, t *edge.Table, cold bool, checks map[string]health.Status) RecordView {
	v := s.Data(new(bpf.Set))
	open := t.Open(v.Stale)
	p := selection.Select(v, t.Up, nil, open, 0, 0, nil)
	rv := RecordView{Name: s.Name, Type: dns.TypeToString[s.Type], Policy: s.Policy(), Dynamic: s.Dynamic}
	cands := v.Candidates()
	setChecks, regions := s.Checks(), s.Regions()
	for j := range s.Len() {
		c := &cands[j]
		// NODATA and SERVFAIL answer no candidate, whatever set the
		// selection gathered before deciding so.
		in := p.Action == selection.Answer && p.Eligible&(1<<j) != 0
		av := AnswerView{Value: s.Answer(j), Check: setChecks[j], Healthy: t.Up(c.Check), In: in}
		backup := c.Flags&uint8(bpf.SteadydnsCandidateFlagsCAND_BACKUP) != 0
		why := checks[setChecks[j]].Reason
		// A candidate of a region reads an entry of its own, down while
		// the region is shifted away whatever its check says.
		if check, ok := checks[setChecks[j]]; regions[j] != "" && !av.Healthy && (setChecks[j] == "" || ok && check.Up) {
			why = "region " + regions[j] + " is shifted away"
		}
		switch {
		case cold:
			av.Reason = "cold start: no health table yet, every candidate is answered"
		case open:
			av.Reason = "stale table under stale_policy answer_all: every candidate is answered"
		case p.Action != selection.Answer:
			av.Reason = "every candidate is down: when_all_down answers " + map[selection.Action]string{selection.NoData: "nodata", selection.ServFail: "servfail"}[p.Action]
		case av.In && p.FailOpen && !av.Healthy:
			av.Reason = "failing open: too few healthy candidates, answered although " + why
		case av.In && setChecks[j] == "":
			av.Reason = "no check: always healthy"
		case av.In:
			av.Reason = "healthy: " + why
		case backup && av.Healthy:
			av.Reason = "backup: held back while a primary is healthy"
		case !av.Healthy:
			av.Reason = "unhealthy: " + why
		default:
			av.Reason = "held back by failing open to the primaries"
		}
		rv.Answers = append(rv.Answers, av)
	}
	return rv
}
