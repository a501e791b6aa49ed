package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
)

func status(args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	addr := fs.String("api", "", "api address (host:port); default the config's server.api, else 127.0.0.1:9153")
	path := fs.String("config", "", "the server's config: its api address, token and certificate")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := newAPIClient(*path, *addr)
	if err != nil {
		return err
	}
	var recs struct {
		Table   api.TableView    `json:"table"`
		Records []api.RecordView `json:"records"`
	}
	var checks struct {
		Checks []api.CheckView `json:"checks"`
		Fleet  api.FleetView   `json:"fleet"`
	}
	if err := c.getJSON("/api/v1/records", &recs); err != nil {
		return err
	}
	if err := c.getJSON("/api/v1/checks", &checks); err != nil {
		return err
	}
	fmt.Println(fleetLine(checks.Fleet))
	if recs.Table.ColdOpen {
		fmt.Println("health table: none yet (cold start: every record answers all candidates)")
	} else {
		fmt.Printf("health table: version %d, %.1fs old, stale=%v\n", recs.Table.Version, recs.Table.AgeSec, recs.Table.Stale)
	}
	// Aggregators hold the shifts; an edge of a fleet shows them in its
	// answers' reasons.
	if slices.Contains(checks.Fleet.Roles, "aggregator") {
		var shifts struct {
			Shifts []api.ShiftView `json:"shifts"`
		}
		if err := c.getJSON("/api/v1/shifts", &shifts); err != nil {
			return err
		}
		printShifts(shifts.Shifts, time.Now())
	}
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RECORD\tTYPE\tPOLICY\tANSWER\tCHECK\tIN\tREASON")
	for _, r := range recs.Records {
		for _, a := range r.Answers {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Type, r.Policy, a.Value, dash(a.Check), yesNo(a.In), a.Reason)
		}
	}
	w.Flush()
	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CHECK\tTYPE\tINDEX\tSTATE\tREASON\tADMIN\tSINCE\tLAST RESULT\tRECORDS")
	for _, c := range checks.Checks {
		state := "unhealthy"
		if c.Up {
			state = "healthy"
		}
		// The newest result the state counts, so that it agrees with the
		// reason: a newer one is counted at the next push.
		last := "-"
		if r := c.LastCounted(); r != nil {
			last = fmt.Sprintf("%s %.1fms", r.Reason, r.LatencyMs)
			if r.Detail != "" {
				last = fmt.Sprintf("%s (%s) %.1fms", r.Reason, r.Detail, r.LatencyMs)
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Type, c.Index, state, c.Reason, c.Admin, c.Since.Format(time.TimeOnly), last, strings.Join(c.Records, ", "))
	}
	w.Flush()
	return printEvents(c)
}

// statusEvents is how many of the newest events status prints.
const statusEvents = 10

// printEvents prints the newest events: on an edge of a fleet, those its
// aggregators judged.
func printEvents(c *apiClient) error {
	var evs struct {
		Events []api.EventView `json:"events"`
	}
	if err := c.getJSON("/api/v1/events", &evs); err != nil {
		return err
	}
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TIME\tCHECK\tCHANGE\tREASON\tBY")
	for _, e := range evs.Events[max(0, len(evs.Events)-statusEvents):] {
		fmt.Fprintf(w, "%s\t%s\t%s → %s\t%s\t%s\n", e.Time.Format(time.DateTime), e.Check, e.From, e.To, e.Reason, dash(e.Host))
	}
	return w.Flush()
}

// printShifts prints the traffic shifts in force, one a line.
func printShifts(shifts []api.ShiftView, now time.Time) {
	if len(shifts) == 0 {
		fmt.Println("traffic shifts: none")
		return
	}
	for _, s := range shifts {
		fmt.Printf("traffic shift: %s shifted away until %s (%s left), by %s: %s\n", s.Region, s.Expires.Format(time.DateTime),
			s.Expires.Sub(now).Round(time.Second), s.Who, s.Reason)
	}
}

// fleetLine is the host's place in the fleet: its id and roles, its cell
// and its use of the cell's capacity, and the config it runs.
func fleetLine(f api.FleetView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "host %s (%s)", f.ID, strings.Join(f.Roles, ","))
	if f.Cell != "" {
		fmt.Fprintf(&b, ", cell %s", f.Cell)
	}
	for _, c := range f.Capacity {
		fmt.Fprintf(&b, ", %s %d of %d", c.Resource, c.Used, c.Limit)
	}
	fmt.Fprintf(&b, "; config %s, hash %s", f.ConfigSource, f.ConfigHash)
	if f.Revision != 0 {
		fmt.Fprintf(&b, ", revision %d", f.Revision)
	}
	return b.String()
}

func dash(s string) string {
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
