package dnsbench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/internal/compliance"
)

// Write puts the report into dir: results.md, results.json and the charts
// servers.png and constant-work.png.
func Write(res *Results, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	var md strings.Builder
	Markdown(&md, res)
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(md.String()), 0o644); err != nil {
		return fmt.Errorf("writing results.md: %w", err)
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding results.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), js, 0o644); err != nil {
		return fmt.Errorf("writing results.json: %w", err)
	}
	if err := serversChart(res, filepath.Join(dir, "servers.png")); err != nil {
		return err
	}
	if res.ConstantWork != nil && len(res.ConstantWork.Cells) > 0 {
		return constantWorkChart(res.ConstantWork, filepath.Join(dir, "constant-work.png"))
	}
	return nil
}

// Markdown writes the report's tables.
func Markdown(w io.Writer, res *Results) {
	m, o := res.Machine, res.Options
	fmt.Fprintf(w, "# steadydns benchmark\n\n")
	fmt.Fprintf(w, "%s UTC · %s · %s × %d · %s · load %s · %s · revision %s\n\n",
		res.Started.Format("2006-01-02 15:04"), m.Kernel, m.CPU, m.CPUs, m.Memory, m.Load, m.Go, m.Revision)
	fmt.Fprintf(w, "Zone of %d names (4 A + 2 AAAA each), queries A and AAAA for every name. "+
		"kxdpgun offers %d q/s to the servers that answer in XDP and %d q/s to those that answer from sockets, for %v on CPU %d; "+
		"the server and its veth's NAPI thread run on CPU %d. "+
		"Latency: dnsperf at %d q/s. Every figure is the median of %d runs, with the range in parentheses.\n\n",
		o.Names, o.Rate, o.SocketRate, o.Duration, o.GenCPU, o.ServerCPU, o.LatencyRate, o.Runs)
	var tools []string
	for _, t := range slices.Sorted(maps.Keys(m.Tools)) {
		if m.Tools[t] != "" {
			tools = append(tools, m.Tools[t])
		}
	}
	fmt.Fprintf(w, "Tools: %s.\n\n", strings.Join(tools, "; "))

	fmt.Fprintf(w, "## Side by side\n\n")
	fmt.Fprintf(w, "| server | answered k/s | of ceiling | ns/packet in XDP | p50 µs | p99 µs | answers checked | kxdpgun rcodes | other load |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range res.Servers {
		ratio := "—"
		if s.Ratio > 0 {
			ratio = fmt.Sprintf("%.0f%%", 100*s.Ratio)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %d/%d | %s | %.0f%% |\n", s.Name,
			s.Answered.Format(1e3, 0), ratio, s.KernelNs.Format(1, 0), s.P50.Format(1, 0), s.P99.Format(1, 0),
			s.Spot.Correct, s.Spot.Checked, rcodes(s.Rcodes), 100*s.OtherLoad)
	}
	fmt.Fprintf(w, "\n*Other load* is the largest share of both CPUs that processes outside the benchmark took during one of that server's runs. Before each run the harness waits up to %v for them to take 10%% or less, and runs a disturbed run again (twice at most). Above a few percent, the figures are skewed.\n\n", o.Settle)
	for _, s := range res.Servers {
		fmt.Fprintf(w, "- **%s**: %s. Offered %s k/s.", s.Name, s.About, s.Offered.Format(1e3, 0))
		if s.Lost > 0 {
			fmt.Fprintf(w, " dnsperf lost %d queries.", s.Lost)
		}
		if s.Spot.Problem != "" {
			fmt.Fprintf(w, " First wrong answer: %s.", s.Spot.Problem)
		}
		if s.DO0Ns.N > 0 {
			fmt.Fprintf(w, " Paired in each round with the same queries asking DO=0 with EDNS: %s ns/packet in XDP, %s k/s answered; DO=1 over DO=0, round by round, %s.",
				s.DO0Ns.Format(1, 0), s.DO0Answered.Format(1e3, 0), s.DO1OverDO0.Format(1, 2))
		}
		fmt.Fprintln(w)
	}
	saturationMarkdown(w, res.Servers, o.SaturationRate)
	tcpMarkdown(w, res.Servers, o.TCPRate)
	dotMarkdown(w, res.Servers, o.DoTRate)
	v6Markdown(w, res.Servers)
	complianceMarkdown(w, res.Servers)
	if res.ConstantWork != nil {
		constantWorkMarkdown(w, res.ConstantWork, o)
	}
	if res.Agg != nil {
		aggMarkdown(w, res.Agg)
	}
	if len(res.Commands) > 0 {
		fmt.Fprintf(w, "\n## Commands\n\n```\n%s\n```\n", strings.Join(res.Commands, "\n"))
	}
}

// saturationMarkdown is the socket servers' answered rates when offered
// more than any answers, in the same run, and the fallback's over the best
// of the others'.
func saturationMarkdown(w io.Writer, servers []ServerResult, rate int) {
	rates(w, servers, func(s ServerResult) stats.Summary { return s.Saturated },
		fmt.Sprintf("At saturation\n\nThe socket servers offered %d k/s, more than any answers; the receive path of every query a server cannot take still runs on its CPU.", rate/1000))
}

// tcpMarkdown is the socket servers' answered rates over TCP, and the
// fallback's over the best of the others'.
func tcpMarkdown(w io.Writer, servers []ServerResult, rate int) {
	streamMarkdown(w, servers, "TCP", func(s ServerResult) (stats.Summary, int) { return s.TCP, s.TCPLost },
		fmt.Sprintf("Over TCP\n\ndnsperf offered each socket server %d k/s over TCP from %d connections, %d queries in flight in all: a resolver that pipelines.", rate/1000, tcpClients, tcpOutstanding))
}

// dotMarkdown is the same over DNS over TLS, for the servers that speak
// it.
func dotMarkdown(w io.Writer, servers []ServerResult, rate int) {
	streamMarkdown(w, servers, "TLS", func(s ServerResult) (stats.Summary, int) { return s.DoT, s.DoTLost },
		fmt.Sprintf("Over TLS\n\ndnsperf offered each server that speaks DNS over TLS %d k/s over TLS from %d connections, %d queries in flight in all.", rate/1000, tcpClients, tcpOutstanding))
}

// streamMarkdown writes rates' section of what get picks, then the
// servers that lost queries over over.
func streamMarkdown(w io.Writer, servers []ServerResult, over string, get func(ServerResult) (stats.Summary, int), head string) {
	rate := func(s ServerResult) stats.Summary { r, _ := get(s); return r }
	if !rates(w, servers, rate, head) {
		return
	}
	for _, s := range servers {
		if _, lost := get(s); lost > 0 {
			fmt.Fprintf(w, "- %s lost %d queries over %s.\n", s.Name, lost, over)
		}
	}
}

// v6Markdown is the XDP servers' IPv6 runs beside their IPv4 ones, and
// each cost per packet over the reflector's in the same family.
func v6Markdown(w io.Writer, servers []ServerResult) {
	var reflector4, reflector6 float64
	for _, s := range servers {
		if s.Name == "reflector" {
			reflector4, reflector6 = s.KernelNs.Median, s.V6Ns.Median
		}
	}
	ratio := func(ns, ref float64) string {
		if ns == 0 || ref == 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f×", ns/ref)
	}
	head := false
	for _, s := range servers {
		if s.V6Answered.N == 0 {
			continue
		}
		if !head {
			fmt.Fprintf(w, "\n## Over IPv6\n\nThe XDP servers' load runs sent to the edge's IPv6 address, each round beside the IPv4 one.\n\n| server | IPv4 answered k/s | IPv6 answered k/s | IPv4 ns/packet in XDP | IPv6 ns/packet | IPv4 × reflector | IPv6 × reflector |\n|---|---|---|---|---|---|---|\n")
			head = true
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", s.Name, s.Answered.Format(1e3, 0), s.V6Answered.Format(1e3, 0),
			s.KernelNs.Format(1, 0), s.V6Ns.Format(1, 0), ratio(s.KernelNs.Median, reflector4), ratio(s.V6Ns.Median, reflector6))
	}
}

// rates writes a section, its heading and text first, of the rate get
// picks for each server that has one, and the fallback's over the best
// of the others'; false when no server has one.
func rates(w io.Writer, servers []ServerResult, get func(ServerResult) stats.Summary, head string) bool {
	var rows []ServerResult
	var fallback, best float64
	for _, s := range servers {
		if get(s).N == 0 {
			continue
		}
		rows = append(rows, s)
		if s.Name == "steadydns-fallback" {
			fallback = get(s).Median
		} else {
			best = max(best, get(s).Median)
		}
	}
	if len(rows) == 0 {
		return false
	}
	fmt.Fprintf(w, "\n## %s\n\n| server | answered k/s |\n|---|---|\n", head)
	for _, s := range rows {
		fmt.Fprintf(w, "| %s | %s |\n", s.Name, get(s).Format(1e3, 0))
	}
	if fallback > 0 && best > 0 {
		fmt.Fprintf(w, "\nThe fallback answers %.2f× the best of the others.\n", fallback/best)
	}
	return true
}

func constantWorkMarkdown(w io.Writer, wk *ConstantWork, o Options) {
	fmt.Fprintf(w, "\n## Constant work\n\n")
	sets := fmt.Sprintf("synthetic %s A sets of K health-checked candidates", o.ConstantWorkPolicy)
	if o.ConstantWorkStatic {
		sets = "synthetic sets of K records as a zone file's: flagged static, with no health check, so that every share down answers all K"
	}
	fmt.Fprintf(w, "The steadydns XDP program with %s. "+
		"BPF_PROG_RUN runs each query once on a fresh copy (a repeat count would rerun the program on its own reply); "+
		"the loop's own cost, %s ns measured with an XDP_PASS program, is subtracted. The reflector costs %s ns the same way. "+
		"Under load: kxdpgun asks every name once per pass, and the kernel's run-time statistics give ns per packet. "+
		"In each round the health levels take turns in 20 slices of the BPF_PROG_RUN calls, then run one after another under load; "+
		"other processes took up to %.0f%% of the CPUs during a round.\n\n",
		sets, wk.PassNs.Format(1, 1), wk.ReflectorNs.Format(1, 1), 100*wk.OtherLoad)
	fmt.Fprintf(w, "| names | K | down | answers | BPF_PROG_RUN ns/query | ns/packet under load | answered k/s under load |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|\n")
	for _, c := range wk.Cells {
		fmt.Fprintf(w, "| %d | %d | %d%% | %d | %s | %s | %s |\n", c.Names, c.K, c.DownPct, c.Answers,
			c.RunNs.Format(1, 1), c.LoadNs.Format(1, 1), c.Answered.Format(1e3, 0))
	}
	if len(wk.Warmup) > 0 {
		warmupMarkdown(w, wk.Warmup)
	}
	fmt.Fprintf(w, "\nSpread across the health levels (largest median over smallest, minus one):\n\n")
	fmt.Fprintf(w, "| names | K | BPF_PROG_RUN | under load | under load, paired slices |\n|---|---|---|---|---|\n")
	for _, g := range groupCells(wk.Cells) {
		fmt.Fprintf(w, "| %d | %d | %.1f%% | %.1f%% | %s |\n", g[0].Names, g[0].K,
			100*levelSpread(g, func(c ConstantWorkResult) float64 { return c.RunNs.Median }),
			100*levelSpread(g, func(c ConstantWorkResult) float64 { return c.LoadNs.Median }),
			slicedSpread(wk.Levels, g[0].Names, g[0].K))
	}
	if len(wk.Levels) > 0 {
		levelsMarkdown(w, wk.Levels, o.RRLRounds, o.RRLSlice)
	}
	if len(wk.Variants) > 0 {
		fmt.Fprintf(w, "\nOther query shapes, all candidates up (the table holds an A and an AAAA set per name; EDNS: the query has an OPT record, which the reply echoes):\n\n")
		fmt.Fprintf(w, "| names | K | query | answers | ns/packet under load | answered k/s under load |\n|---|---|---|---|---|---|\n")
		for _, v := range wk.Variants {
			q := v.Qtype
			if v.EDNS {
				q += " + EDNS"
			}
			fmt.Fprintf(w, "| %d | %d | %s | %d | %s | %s |\n", v.Names, v.K, q, v.Answers, v.LoadNs.Format(1, 1), v.Answered.Format(1e3, 0))
		}
	}
	if len(wk.RRL) > 0 {
		rrlMarkdown(w, wk.RRL, o.RRLRounds, o.RRLSlice)
	}
	if len(wk.Breakdown) > 0 {
		breakdownMarkdown(w, wk.Breakdown, o.RRLRounds, o.RRLSlice)
	}
	if len(wk.Skew) > 0 {
		skewMarkdown(w, wk.Skew, o.RRLRounds, o.RRLSlice)
	}
	if len(wk.Cores) > 0 {
		coresMarkdown(w, wk.Cores, o)
	}
	if len(wk.Compare) > 0 {
		compareMarkdown(w, wk.Compare, o)
	}
	if len(wk.Memory) > 0 {
		memoryMarkdown(w, wk.Memory)
	}
	for _, s := range wk.Skipped {
		fmt.Fprintf(w, "\nNot run: %s.\n", s)
	}
}

// memoryMarkdown prints the record maps' kernel memory per set.
func memoryMarkdown(w io.Writer, mem []MemoryResult) {
	fmt.Fprintf(w, "\nThe record maps' kernel memory, as `bpftool map show` prints it (memlock), loaded afresh for each size's A and AAAA sets "+
		"as serve sizes them: a slot for each set (held at 80%%, the smallest table 1,024 slots), ext and pool entries for those that need them.\n\n")
	fmt.Fprintf(w, "| names | K | sets | records, MiB | ext and pool maps, MiB | bytes per set | spilled to the fallback |\n|---|---|---|---|---|---|---|\n")
	for _, m := range mem {
		fmt.Fprintf(w, "| %d | %d | %d | %.1f | %.1f | %.0f | %d |\n", m.Names, m.K, m.Sets, float64(m.Records)/(1<<20), float64(m.Ext)/(1<<20), m.PerSet, m.Spilled)
	}
}

// warmupMarkdown prints the runs that came before each size's and K's
// cells, run by run.
func warmupMarkdown(w io.Writer, runs []WarmupResult) {
	fmt.Fprintf(w, "\nBefore each size's and K's cells, right after their sets were written, A queries under load with every candidate up, "+
		"run after run until one came within %.0f%% of the one before (at most %d runs): a table's fresh memory can answer several times slower at first.\n\n",
		100*warmTolerance, warmMaxRuns)
	fmt.Fprintf(w, "| names | K | ns/packet under load, run by run | settled |\n|---|---|---|---|\n")
	for _, x := range runs {
		ns := make([]string, len(x.LoadNs))
		for i, v := range x.LoadNs {
			ns[i] = fmt.Sprintf("%.0f", v)
		}
		settled := "yes"
		if !x.Settled {
			settled = "no: the cells may read a table still warming"
		}
		fmt.Fprintf(w, "| %d | %d | %s | %s |\n", x.Names, x.K, strings.Join(ns, ", "), settled)
	}
}

// pairedRatio prints a ratio read per pair of rounds: the median, its 95%
// confidence interval and the pairs' range.
func pairedRatio(r stats.Summary, ci [2]float64) string {
	return fmt.Sprintf("%.3f (CI %.3f–%.3f; pairs %.3f–%.3f)", r.Median, ci[0], ci[1], r.Min, r.Max)
}

// rrlMarkdown prints rate limiting's cells, each with its ratio to the
// cell it is read against: "on" and "off again" to "off" over every name,
// a limited cell to "on" over the same one name.
func rrlMarkdown(w io.Writer, cells []RRLResult, rounds int, d time.Duration) {
	fmt.Fprintf(w, "\nResponse rate limiting, all candidates up: the program loaded without it (off, and in loads of its own: off again), with it at a rate no key reaches (on: every reply accounted and sent), "+
		"and with one name's key far over a rate of 10 (limited: slip 0 drops every reply over the limit, slip 2 sends every second one truncated). "+
		"The cells that ask the same queries share one kxdpgun run and take turns on the same link within it, in %d rounds of a %v slice per cell, every slice from no accounts; every second round runs them in reverse, and every pair of rounds has its own load of every cell's program (a load's JIT placement moves its run time by several percent). "+
		"The ratio is per pair of rounds (the cell's two slices over its reference's two): the median of the %d pairs, a 95%% confidence interval of that median (from the pairs' order statistics), and the pairs' range. "+
		"Off again over off is the method's own noise.\n\n", rounds, d, rounds/2)
	fmt.Fprintf(w, "| names | K | rrl | queries | over the limit | ns/packet under load, per slice | ratio per pair of rounds | answered k/s under load |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range cells {
		queries, ratio := "every name", ""
		if c.OneName {
			queries = "one name"
		}
		if c.Reference != "" {
			ratio = fmt.Sprintf("%s of %s", pairedRatio(c.Ratio, c.RatioCI), c.Reference)
		}
		fmt.Fprintf(w, "| %d | %d | %s | %s | %.1f%% | %s | %s | %s |\n", c.Names, c.K, c.Cell, queries, 100*c.Limited,
			c.LoadNs.Format(1, 1), ratio, c.Answered.Format(1e3, 0))
	}
}

// levelsMarkdown prints the health levels measured in paired slices.
func levelsMarkdown(w io.Writer, cells []LevelResult, rounds int, d time.Duration) {
	fmt.Fprintf(w, "\nThe health levels again, in paired slices: the same program on the link, every name asked in one kxdpgun run per size and K, "+
		"and the levels taking turns within it, in %d rounds of a %v slice each, every second round in reverse, each slice starting with its level's table pushed. "+
		"The ratio is the level's ns per packet over 0%% down's, per pair of rounds: the median of the %d pairs, a 95%% confidence interval of that median, and the pairs' range. "+
		"A drift of the host falls on every level alike here, unlike in the separate runs above. "+
		"The scan is the same at every level; where fewer candidates are healthy, fewer answers are written.\n\n", rounds, d, rounds/2)
	fmt.Fprintf(w, "| names | K | down | answers | ns/packet under load, per slice | over 0%% down |\n|---|---|---|---|---|---|\n")
	for _, c := range cells {
		ratio := ""
		if c.DownPct != 0 {
			ratio = pairedRatio(c.Ratio, c.RatioCI)
		}
		fmt.Fprintf(w, "| %d | %d | %d%% | %d | %s | %s |\n", c.Names, c.K, c.DownPct, c.Answers, c.LoadNs.Format(1, 1), ratio)
	}
}

// breakdownMarkdown prints the program against the reflector and the table
// read, and by stage.
func breakdownMarkdown(w io.Writer, cells []BreakdownResult, rounds int, d time.Duration) {
	fmt.Fprintf(w, "\nThe program against the bare reflector and against the table read (bench/xdpprog/tableread.c): the reflector plus one read of the record table, "+
		"at a slot of the table's live region picked by the question's first 16 bytes, the reply waiting for it. "+
		"The table read is loaded onto the program's own maps, so it reads the same table in the same state; what it adds to the reflector is what one read of a table of this size costs on this machine, "+
		"and what the program adds to the table read is its own work. "+
		"The three share one kxdpgun run asking every name's A, all candidates up, and take turns on the link within it, in %d rounds of a %v slice each, every second round in reverse, "+
		"every pair of rounds with loads of its own of each. Each ratio is per pair of rounds: the median of the %d pairs, a 95%% confidence interval of that median, and the pairs' range.\n\n", rounds, d, rounds/2)
	fmt.Fprintf(w, "| names | K | program, ns/packet | table read, ns/packet | reflector, ns/packet | program over reflector | table read over reflector | program over table read |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range cells {
		fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %s |\n", c.Names, c.K,
			c.ProgramNs.Format(1, 1), c.TableReadNs.Format(1, 1), c.ReflectorNs.Format(1, 1),
			pairedRatio(c.OverReflector, c.OverReflectorCI), pairedRatio(c.TableReadOverReflector, c.TableReadOverReflectorCI), pairedRatio(c.OverTableRead, c.OverTableReadCI))
	}
	fmt.Fprintf(w, "\nThe program by stage, in the same run: each stage build is the program cut after a stage (bench/xdpprog), which then returns the query as the reflector does. "+
		"A stage's cost is the cut after it less the cut after the stage before (the reflector, for parse), per pair of rounds: the median, its 95%% confidence interval and the pairs' range. "+
		"Parse: Ethernet, IP and UDP, the DNS header, the name's walk, type and OPT; hash: the name lowercased, hashed and summed; lookup: the probe of the slots; "+
		"select: health, the draw, the selection and the copy-out; grow: the reply's sizing and the frame grown, at its tail (bpf_xdp_adjust_tail) when the answers fit the room a buffer rounded up to a cache line leaves there, else at its head (bpf_xdp_adjust_head) with the headers and question moved down; write: the reply's header, answers, OPT, checksums and the outcome's count, less the reflector's turning the query round.\n\n")
	fmt.Fprintf(w, "| names | K | stage | cut after it, ns/packet | the stage's own ns/packet |\n|---|---|---|---|---|\n")
	for _, c := range cells {
		for _, st := range c.Stages {
			fmt.Fprintf(w, "| %d | %d | %s | %s | %.1f (CI %.1f–%.1f; pairs %.1f–%.1f) |\n", c.Names, c.K, st.Name,
				st.Ns.Format(1, 1), st.Adds.Median, st.AddsCI[0], st.AddsCI[1], st.Adds.Min, st.Adds.Max)
		}
	}
}

// skewMarkdown prints the program against the reflector under the uniform
// and the Zipf query mixes.
func skewMarkdown(w io.Writer, cells []SkewResult, rounds int, d time.Duration) {
	fmt.Fprintf(w, "\nQuery mixes, all candidates up: uniform (every name once per pass) and Zipf with exponent 1 (a name's share falls as one over its rank, the hottest names spread over the table). "+
		"Per mix, one kxdpgun run in which the program and the reflector take turns on the link, in %d rounds of a %v slice each, every second round in reverse. "+
		"The ratio is per pair of rounds: the median of the %d pairs, a 95%% confidence interval of that median, and the pairs' range.\n\n", rounds, d, rounds/2)
	fmt.Fprintf(w, "| names | K | mix | queries to the hottest 1%% | program, ns/packet | reflector, ns/packet | program over reflector |\n|---|---|---|---|---|---|---|\n")
	for _, c := range cells {
		fmt.Fprintf(w, "| %d | %d | %s | %.1f%% | %s | %s | %s |\n", c.Names, c.K, c.Mix, 100*c.Top1Pct,
			c.ProgramNs.Format(1, 1), c.ReflectorNs.Format(1, 1), pairedRatio(c.OverReflector, c.OverReflectorCI))
	}
}

// coresMarkdown prints the program on two CPUs at once against one.
func coresMarkdown(w io.Writer, cells []CoresResult, o Options) {
	fmt.Fprintf(w, "\nTwo CPUs, all candidates up: BPF_PROG_RUN on CPU %d and on CPU %d each by itself (alone: the two's mean), "+
		"then on both at once, each on a thread pinned to it, %d calls a CPU, the XDP_PASS loop's cost measured the same way subtracted. "+
		"Two CPUs answer 2 × alone / together as many queries as one: a cache line written by every query on both would show as a dearer query together. "+
		"The cells borrow rate limiting's program loads: %d pairs of rounds, each with loads of its own, the second round of a pair running together first. "+
		"The scaling is the median of the pairs, a 95%% confidence interval of that median, and the pairs' range; the target is 1.8 or more.\n\n",
		o.ServerCPU, o.GenCPU, o.Iterations, o.RRLRounds/2)
	fmt.Fprintf(w, "| names | K | cell | alone, ns/query | together, ns/query | two CPUs over one |\n|---|---|---|---|---|---|\n")
	for _, c := range cells {
		fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s |\n", c.Names, c.K, c.Cell,
			c.AloneNs.Format(1, 1), c.TogetherNs.Format(1, 1), pairedRatio(c.Scaling, c.ScalingCI))
	}
}

// compareMarkdown prints this build's program against another build's.
func compareMarkdown(w io.Writer, cells []CompareResult, o Options) {
	fmt.Fprintf(w, "\nThis build's XDP program against another build's, `%s`, with %d%% of the candidates down: "+
		"the two share one kxdpgun run per query type and take turns on the same link within it, in %d rounds of a %v slice each, every second round in reverse, "+
		"every pair of rounds with loads of its own of both programs. "+
		"The ratio is the other build's ns per packet over this build's, per pair of rounds: the median of the %d pairs, a 95%% confidence interval of that median, and the pairs' range. "+
		"Above 1, this build is the faster.\n\n", o.CompareObject, o.CompareDown, o.RRLRounds, o.RRLSlice, o.RRLRounds/2)
	fmt.Fprintf(w, "| names | K | down | query | this build, ns/packet | other build, ns/packet | other over this |\n|---|---|---|---|---|---|---|\n")
	for _, c := range cells {
		fmt.Fprintf(w, "| %d | %d | %d%% | %s | %s | %s | %s |\n", c.Names, c.K, c.DownPct, c.Qtype,
			c.ThisNs.Format(1, 1), c.OtherNs.Format(1, 1), pairedRatio(c.Ratio, c.RatioCI))
	}
}

func aggMarkdown(w io.Writer, a *Aggregator) {
	fmt.Fprintf(w, "\n## Aggregator cost per push\n\n")
	fmt.Fprintf(w, "One checker's frame ingested and the whole health table (%d entries) pushed into the BPF map, "+
		"on the server's CPU. The four aggregators take turns in each of %d rounds per run, so drift falls on all alike. "+
		"Frame %d bytes and table %d bytes in every cell.\n\n", aggTable, a.Rounds, a.FrameBytes, a.TableBytes)
	fmt.Fprintf(w, "| configured checks | failing | ms per push | of which ingest |\n|---|---|---|---|\n")
	for _, c := range a.Cells {
		fmt.Fprintf(w, "| %d | %v | %s | %s |\n", c.Checks, c.Failing, c.PushMs.Format(1, 3), c.IngestMs.Format(1, 3))
	}
	fmt.Fprintf(w, "\nSpread per run (the dearest cell over the cheapest, minus one): %s%%.\n", a.Spread.Format(1, 1))
}

// groupCells splits the cells by zone size and K, keeping their order.
func groupCells(cells []ConstantWorkResult) [][]ConstantWorkResult {
	var gs [][]ConstantWorkResult
	for _, c := range cells {
		if n := len(gs); n > 0 && gs[n-1][0].Names == c.Names && gs[n-1][0].K == c.K {
			gs[n-1] = append(gs[n-1], c)
		} else {
			gs = append(gs, []ConstantWorkResult{c})
		}
	}
	return gs
}

// levelSpread is how far apart the health levels of one group are.
func levelSpread(g []ConstantWorkResult, v func(ConstantWorkResult) float64) float64 {
	lo, hi := v(g[0]), v(g[0])
	for _, c := range g {
		lo, hi = min(lo, v(c)), max(hi, v(c))
	}
	if lo <= 0 {
		return 0
	}
	return hi/lo - 1
}

// slicedSpread is levelSpread of the paired slices' ratios to 0% down
// (which is 1) for one size and K, or a dash when they were not measured.
func slicedSpread(levels []LevelResult, names, k int) string {
	lo, hi, found := 1.0, 1.0, false
	for _, c := range levels {
		if c.Names == names && c.K == k && c.DownPct != 0 {
			lo, hi, found = min(lo, c.Ratio.Median), max(hi, c.Ratio.Median), true
		}
	}
	if !found || lo <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100*(hi/lo-1))
}

func rcodes(m map[string]uint64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

// complianceMarkdown writes genreport's cases against each server that
// ran them: ok, or what genreport would report wrong.
func complianceMarkdown(w io.Writer, servers []ServerResult) {
	var ran []ServerResult
	for _, s := range servers {
		if len(s.Compliance) > 0 {
			ran = append(ran, s)
		}
	}
	if len(ran) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## Compliance\n\nThe cases of ISC's DNS-Compliance-Testing `genreport` (internal/compliance), sent from the client host to the zone's apex.\n\n| case |")
	for _, s := range ran {
		fmt.Fprintf(w, " %s |", s.Name)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(ran)))
	for i, c := range ran[0].Compliance {
		fmt.Fprintf(w, "| %s |", c.Case)
		for _, s := range ran {
			fmt.Fprintf(w, " %s |", complianceCell(s.Compliance, i))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "| **passed** |")
	for _, s := range ran {
		n := 0
		for _, r := range s.Compliance {
			if r.OK() {
				n++
			}
		}
		fmt.Fprintf(w, " %d/%d |", n, len(s.Compliance))
	}
	fmt.Fprintln(w)
}

func complianceCell(rs []compliance.Result, i int) string {
	switch r := rs[i]; {
	case r.Error != "":
		return "no reply"
	case len(r.Tags) > 0:
		return "fail: " + strings.Join(r.Tags, ", ")
	}
	return "ok"
}
