package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
)

func status(args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	addr := fs.String("api", "", "api address (host:port)")
	path := fs.String("config", "", "read the api address from this config")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" {
		if *path == "" {
			*addr = "127.0.0.1:9153"
		} else {
			cfg, err := config.Load(*path)
			if err != nil {
				return err
			}
			*addr = cfg.Server.API
		}
	}
	var recs struct {
		Table   api.TableView    `json:"table"`
		Records []api.RecordView `json:"records"`
	}
	var checks struct {
		Checks []api.CheckView `json:"checks"`
		Fleet  api.FleetView   `json:"fleet"`
	}
	if err := getJSON(*addr, "/api/v1/records", &recs); err != nil {
		return err
	}
	if err := getJSON(*addr, "/api/v1/checks", &checks); err != nil {
		return err
	}
	fmt.Println(fleetLine(checks.Fleet))
	if recs.Table.ColdOpen {
		fmt.Println("health table: none yet (cold start: every record answers all candidates)")
	} else {
		fmt.Printf("health table: version %d, %.1fs old, stale=%v\n", recs.Table.Version, recs.Table.AgeSec, recs.Table.Stale)
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
	return w.Flush()
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

func getJSON(addr, path string, v any) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return fmt.Errorf("querying the api: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("querying the api: %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
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
