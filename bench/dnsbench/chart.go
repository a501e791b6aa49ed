package dnsbench

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/steadydns/steadydns/bench/stats"
)

// point is one median with its range at a position on the x axis.
type point struct {
	x float64
	s stats.Summary
}

// points are drawn as bars, and their ranges as error bars.
type points []point

func (p points) Len() int                    { return len(p) }
func (p points) Value(i int) float64         { return p[i].s.Median }
func (p points) XY(i int) (float64, float64) { return p[i].x, p[i].s.Median }
func (p points) YError(i int) (float64, float64) {
	return p[i].s.Median - p[i].s.Min, p[i].s.Max - p[i].s.Median
}

// addBars draws one series; bar i stands at x = i·step + first.
func addBars(p *plot.Plot, ps points, step, first float64, c color.Color, label string) error {
	for i := range ps {
		ps[i].x = float64(i)*step + first
	}
	for i := range ps {
		bc, err := plotter.NewBarChart(ps[i:i+1], vg.Points(14))
		if err != nil {
			return fmt.Errorf("charting %s: %w", label, err)
		}
		bc.XMin, bc.Color, bc.LineStyle.Width = ps[i].x, c, 0
		p.Add(bc)
		if i == 0 && label != "" {
			p.Legend.Add(label, bc)
		}
	}
	eb, err := plotter.NewYErrorBars(ps)
	if err != nil {
		return fmt.Errorf("charting %s: %w", label, err)
	}
	p.Add(eb)
	return nil
}

// categories labels the x axis at the given positions.
func categories(p *plot.Plot, step, center float64, labels []string) {
	var ticks []plot.Tick
	for i, l := range labels {
		ticks = append(ticks, plot.Tick{Value: float64(i)*step + center, Label: l})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = -1, float64(len(labels)-1)*step+2*center+1
}

func serversChart(res *Results, path string) error {
	rate, cost := plot.New(), plot.New()
	rate.Title.Text, rate.Y.Label.Text = "answered (median, range)", "k replies/s"
	cost.Title.Text, cost.Y.Label.Text = "XDP program in the kernel, under load", "ns/packet"
	var names, xdpNames []string
	var answered, ns points
	for _, s := range res.Servers {
		names = append(names, s.Name)
		answered = append(answered, point{s: scale(s.Answered, 1e-3)})
		if s.KernelNs.N > 0 {
			xdpNames = append(xdpNames, s.Name)
			ns = append(ns, point{s: s.KernelNs})
		}
	}
	if err := addBars(rate, answered, 1, 0, plotutil.Color(0), ""); err != nil {
		return err
	}
	categories(rate, 1, 0, names)
	if len(ns) > 0 {
		if err := addBars(cost, ns, 1, 0, plotutil.Color(1), ""); err != nil {
			return err
		}
		categories(cost, 1, 0, xdpNames)
	}
	for _, p := range []*plot.Plot{rate, cost} {
		p.X.Tick.Label.Rotation, p.X.Tick.Label.XAlign = 0.5, draw.XRight
	}
	return savePanels(path, rate, cost)
}

func constantWorkChart(wk *ConstantWork, path string) error {
	run, load := plot.New(), plot.New()
	run.Title.Text, run.Y.Label.Text = "BPF_PROG_RUN", "ns/query"
	load.Title.Text, load.Y.Label.Text = "in the kernel under kxdpgun", "ns/packet"
	groups := groupCells(wk.Cells)
	var labels []string
	for _, g := range groups {
		labels = append(labels, fmt.Sprintf("%s names, K=%d", short(g[0].Names), g[0].K))
	}
	// Groups of one bar per health level, a gap between groups.
	step := float64(len(healthLevels) + 1)
	for level, down := range healthLevels {
		var r, l points
		for _, g := range groups {
			var c ConstantWorkResult
			if level < len(g) {
				c = g[level]
			}
			r, l = append(r, point{s: c.RunNs}), append(l, point{s: c.LoadNs})
		}
		label := fmt.Sprintf("%d%% down", down)
		if err := addBars(run, r, step, float64(level), plotutil.Color(level), label); err != nil {
			return err
		}
		if err := addBars(load, l, step, float64(level), plotutil.Color(level), label); err != nil {
			return err
		}
	}
	for _, p := range []*plot.Plot{run, load} {
		categories(p, step, float64(len(healthLevels)-1)/2, labels)
		p.Legend.Top = true
		p.Y.Max *= 1.3 // room for the legend above the bars
	}
	return savePanels(path, run, load)
}

// savePanels draws plots side by side into a PNG.
func savePanels(path string, ps ...*plot.Plot) error {
	img := vgimg.New(vg.Length(len(ps))*5*vg.Inch, 4*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(ps), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{ps}, tiles, dc)
	for i, p := range ps {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

func scale(s stats.Summary, k float64) stats.Summary {
	return stats.Summary{Median: s.Median * k, Min: s.Min * k, Max: s.Max * k, N: s.N}
}

// short writes a zone size as 1k or 1M where it can.
func short(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
