package fleetbench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// WriteFleet writes fleet.md and fleet.json into dir.
func WriteFleet(res *FleetResults, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	var md strings.Builder
	FleetMarkdown(&md, res)
	if err := os.WriteFile(filepath.Join(dir, "fleet.md"), []byte(md.String()), 0o644); err != nil {
		return fmt.Errorf("writing fleet.md: %w", err)
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding fleet.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet.json"), js, 0o644); err != nil {
		return fmt.Errorf("writing fleet.json: %w", err)
	}
	return nil
}

// FleetPassed reports whether every check of the run passed.
func (res *FleetResults) FleetPassed() bool {
	for _, c := range res.Checks {
		if !c.Pass {
			return false
		}
	}
	return true
}

var links = []string{linkProberOut, linkAggIn, linkAggOut, linkEdgeIn}

// FleetMarkdown prints the fleet report.
func FleetMarkdown(w io.Writer, res *FleetResults) {
	m, o := res.Machine, res.Options
	fmt.Fprintf(w, "# steadydns fleet benchmark\n\n")
	fmt.Fprintf(w, "%s UTC · %s · %s × %d · %s · load %s · %s · revision %s\n\n",
		res.Started.Format("2006-01-02 15:04"), m.Kernel, m.CPU, m.CPUs, m.Memory, m.Load, m.Go, m.Revision)
	fmt.Fprintf(w, "Push interval %v. Aggregators run as their own processes on CPU %d; the harness, its NATS servers, "+
		"probers and edges on the other CPU. CPU per push is the aggregator process's, summed over its threads from "+
		"/proc/PID/task/*/schedstat; bytes are payload bytes per push as the NATS server counts each connection.\n\n", o.Push, o.AggCPU)
	fmt.Fprintf(w, "## Per push, over NATS (%d probers, 1 edge, %d runs of %d pushes)\n\n", o.Checkers, o.Runs, o.Pushes)
	fmt.Fprintf(w, "The cells run at once, their probers publishing in turns: each cell's frames in its own slot of the first half of every period, "+
		"the slots rotating by one cell every run. Every run after the first starts new aggregator processes and waits %d pushes before its window.\n\n", settlePushes)
	fmt.Fprintf(w, "Each cell is read against the reference, the mean of the first cell and its repeat (the last: the same work in processes of its own), "+
		"in the same window, run by run; *over the reference* is the median of those ratios with a 95%% confidence interval, "+
		"and for the repeat, the median of its ratios to the first: the method's own noise.\n\n")
	fmt.Fprintf(w, "| checks | unhealthy | aggregator CPU ms/push | over the reference (95%% CI) | %s | entries down at the edge |\n|---|---|---|---|---|---|---|---|---|\n",
		strings.Join(links, " B | ")+" B")
	for _, c := range res.Cells {
		u := fmt.Sprintf("%d%%", c.Unhealthy)
		over := rise(c.Ratio.Median, c.RatioCI)
		if c.Again {
			u += " again"
			over += " over the first"
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s |", c.Checks, u, c.CPUMs.Format(1, 2), over)
		for _, l := range links {
			fmt.Fprintf(w, " %.0f |", c.Bytes[l])
		}
		fmt.Fprintf(w, " %d |\n", c.Down)
	}
	if len(res.Cells) > 0 {
		fmt.Fprintf(w, "\nA frame is %d bytes, a table %d bytes (%d entries).\n", res.Cells[0].FrameBytes, res.Cells[0].TableBytes, tableSize)
	}
	if len(res.Effects) > 0 {
		fmt.Fprintf(w, "\nEach factor read apart, the other held (per run, the geometric mean over the other factor's levels; the median over the runs):\n\n")
		fmt.Fprintf(w, "| | over | CPU per push, median (95%% CI) | runs' range |\n|---|---|---|---|\n")
		for _, e := range res.Effects {
			fmt.Fprintf(w, "| %s | %s | %s | %+.1f to %+.1f%% |\n", e.level(), e.first(), rise(e.Ratio.Median, e.CI),
				100*(e.Ratio.Min-1), 100*(e.Ratio.Max-1))
		}
	}
	for _, g := range res.Groups {
		fmt.Fprintf(w, "\n%d checks: %.2f ms/push, the median of its cells' medians, which lie within %.1f%% of each other.", g.Checks, g.Median, g.Spread)
	}
	if len(res.Groups) > 1 {
		fmt.Fprintf(w, "\n\nGroups of %d checks over %d: %+.1f%%.", res.Groups[len(res.Groups)-1].Checks, res.Groups[0].Checks,
			100*(res.Groups[len(res.Groups)-1].Median/res.Groups[0].Median-1))
	}
	if len(res.Groups) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\n| check | result | |\n|---|---|---|\n")
	for _, c := range res.Checks {
		r := "pass"
		if !c.Pass {
			r = "FAIL"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", c.What, r, c.Detail)
	}
	if len(res.Checkers) > 0 {
		fmt.Fprintf(w, "\n## Probers per aggregator (table of %d entries, harness's NATS server, 1 edge)\n\n", tableSize)
		fmt.Fprintf(w, "| probers | aggregator CPU | ms/push | last push ms | frames delivered | tables at the edge | NATS → aggregator B/push | kept up |\n|---|---|---|---|---|---|---|---|\n")
		for _, s := range res.Checkers {
			fmt.Fprintf(w, "| %d | %.0f%% | %.2f | %.2f | %.3f | %.3f | %.0f | %s |\n", s.N, 100*s.CPUShare, s.CPUMs, s.PushMs, s.Frames, s.Tables, s.Bytes[linkAggIn], verdict(s.Pass, s.Why))
		}
		fmt.Fprintf(w, "\n**Probers per aggregator: %d** (kept up: every frame delivered, every table at the edge, the aggregator under %.0f%% of its CPU).\n", lastPass(res.Checkers), 100*maxShare)
	}
	if len(res.Edges) > 0 {
		fmt.Fprintf(w, "\n## Edges per aggregator (the aggregator embeds the NATS server, 1 prober; the harness's edges on both CPUs)\n\n")
		fmt.Fprintf(w, "| edges | aggregator CPU | ms/push | complete tables per edge per push (least) | NATS → edges B/push | kept up |\n|---|---|---|---|---|---|\n")
		for _, s := range res.Edges {
			fmt.Fprintf(w, "| %d | %.0f%% | %.2f | %.3f | %.0f | %s |\n", s.N, 100*s.CPUShare, s.CPUMs, s.Tables, s.Bytes[linkEdgeIn], verdict(s.Pass, s.Why))
		}
		fmt.Fprintf(w, "\n**Edges per aggregator: %d**.\n", lastPass(res.Edges))
	}
	if len(res.Prober) > 0 {
		fmt.Fprintf(w, "\n## Checks per prober (TCP, every %v, frames every %v; the harness on both CPUs)\n\n", o.Interval, o.ProberPush)
		fmt.Fprintf(w, "| checks | healthy results / scheduled | late entries | frames / push | harness CPU (of one) | kept up |\n|---|---|---|---|---|---|\n")
		best := 0
		for _, s := range res.Prober {
			fmt.Fprintf(w, "| %d | %.3f | %.4f%% | %.3f | %.0f%% | %s |\n", s.Checks, s.Results, 100*s.Late, s.Frames, 100*s.CPUShare, verdict(s.Pass, s.Why))
			if s.Pass {
				best = max(best, s.Checks)
			}
		}
		fmt.Fprintf(w, "\n**Checks per prober: %d** at a %v interval.\n", best, o.Interval)
	}
	if len(res.Commands) > 0 {
		fmt.Fprintf(w, "\nAggregator command, for example:\n\n```\n%s\n```\n", res.Commands[0])
	}
}

func verdict(pass bool, why string) string {
	if pass {
		return "yes"
	}
	return "no: " + why
}

// lastPass is the largest step that kept up.
func lastPass(steps []Step) int {
	best := 0
	for _, s := range steps {
		if s.Pass {
			best = max(best, s.N)
		}
	}
	return best
}
