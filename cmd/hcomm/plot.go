package main

import (
	"bufio"
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The plot of `hcomm perf -plot FILE.svg`: bus bandwidth (linear axis, or
// logarithmic with -plot-logy) and, below it, the time of one call
// (logarithmic axis) against message size (log2 axis, the largest size
// labelled), one line per series. A series is the rows that share
// everything but their size; its name lists only what differs between the
// series (implementation label, op, ranks, algorithm setting, in-place,
// type and reduction), so a plain sweep reads "allreduce" and a comparison
// of runs reads "hcomm-shm", "openmpi-sm".

// plotSeries is one line of the plot.
type plotSeries struct {
	name string
	pts  []plotPoint
}

type plotPoint struct {
	bytes int64
	busbw float64
	usec  float64
}

// seriesKey is what distinguishes series.
type seriesKey struct {
	impl, op   string
	ranks      int
	algo       string
	inPlace    bool
	typ, redop string
}

// plotSeriesOf groups rows into series, in the order they first appear.
// Rows without a size (barrier) have no place on a log axis and are left
// out.
func plotSeriesOf(rows []row) []plotSeries {
	var keys []seriesKey
	byKey := map[seriesKey][]plotPoint{}
	for _, r := range rows {
		if r.Bytes <= 0 {
			continue
		}
		typ, redop := r.Type, r.Redop
		if redop == "" {
			typ = "" // the data-movement ops: bytes, whatever -dtype said
		}
		k := seriesKey{impl: r.Impl, op: r.Op, ranks: r.Ranks, algo: r.Algo, inPlace: r.InPlace, typ: typ, redop: redop}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], plotPoint{r.Bytes, r.BusBW, r.Usec})
	}
	differs := func(f func(seriesKey) string) bool {
		for _, k := range keys[1:] {
			if f(k) != f(keys[0]) {
				return true
			}
		}
		return false
	}
	var parts []func(seriesKey) string
	if len(keys) > 0 {
		for _, f := range []func(seriesKey) string{
			func(k seriesKey) string { return k.impl },
			func(k seriesKey) string { return k.op },
			func(k seriesKey) string { return strconv.Itoa(k.ranks) + " ranks" },
			func(k seriesKey) string { return k.algo },
			func(k seriesKey) string {
				if k.inPlace {
					return "in place"
				}
				return "out of place"
			},
			func(k seriesKey) string { return strings.TrimSpace(k.typ + " " + k.redop) },
		} {
			if differs(f) {
				parts = append(parts, f)
			}
		}
	}
	out := make([]plotSeries, 0, len(keys))
	for _, k := range keys {
		var words []string
		for _, f := range parts {
			if w := f(k); w != "" {
				words = append(words, w)
			}
		}
		name := strings.Join(words, ", ")
		if name == "" {
			name = k.impl + " " + k.op
		}
		pts := byKey[k]
		slices.SortStableFunc(pts, func(a, b plotPoint) int { return cmp.Compare(a.bytes, b.bytes) })
		out = append(out, plotSeries{name: name, pts: pts})
	}
	return out
}

// plotTitle names what the rows measured: the ops, the rank counts, how
// the ranks ran and talked (what, "" when unknown, as for saved rows), and
// the element type and reduction of the reducing collectives.
func plotTitle(rows []row, what string) string {
	var ops, types []string
	var ranks []int
	for _, r := range rows {
		if r.Bytes > 0 && !slices.Contains(ops, r.Op) {
			ops = append(ops, r.Op)
		}
		if !slices.Contains(ranks, r.Ranks) {
			ranks = append(ranks, r.Ranks)
		}
		if t := strings.TrimSpace(r.Type + " " + r.Redop); r.Redop != "" && !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	slices.Sort(ranks)
	rs := make([]string, len(ranks))
	for i, n := range ranks {
		rs[i] = strconv.Itoa(n)
	}
	parts := []string{strings.Join(ops, ", ") + ": " + strings.Join(rs, "/") + " ranks"}
	if what != "" {
		parts = append(parts, what)
	}
	if len(types) > 0 {
		parts = append(parts, strings.Join(types, ", "))
	}
	return strings.Join(parts, ", ")
}

// plotOptions are the choices of a plot besides its data.
type plotOptions struct {
	title string
	logY  bool // the bandwidth axis is logarithmic
}

// writePlotFile writes the plot of rows into the SVG file path.
func writePlotFile(path string, opt plotOptions, rows []row) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	err = writeSVG(w, opt, plotSeriesOf(rows))
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Plot geometry, in SVG user units (pixels): two panels, bus bandwidth
// above and time below, sharing the size axis and the legend on the right.
const (
	svgWidth    = 900
	svgHeight   = 900
	plotLeft    = 78
	plotRight   = svgWidth - 250 // the legend is to the right
	legendLeft  = plotRight + 24
	legendLineH = 18
)

// panel is one of the plot's two charts.
type panel struct {
	top, bottom int
	label       string                    // the y axis's
	value       func(p plotPoint) float64 // the y value of a point
	unit        string                    // of the value, in point tooltips
	log         bool
}

// plotColors are distinct colors for the lines; after them the colors
// repeat with dashes.
var plotColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
	"#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

var plotDashes = []string{"", "6 4", "2 3", "8 3 2 3"}

// writeSVG draws the series as a self-contained SVG document: bus
// bandwidth against size (log2), linear or, with opt.logY, logarithmic,
// and below it the time of one call against size, on logarithmic axes.
func writeSVG(w io.Writer, opt plotOptions, series []plotSeries) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	var last int64 // the largest size, labelled on the axis
	for _, s := range series {
		for _, p := range s.pts {
			x := math.Log2(float64(p.bytes))
			lo, hi = math.Min(lo, x), math.Max(hi, x)
			last = max(last, p.bytes)
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 10
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi-lo < 2 {
		lo, hi = lo-1, hi+1
	}
	xpos := func(b int64) float64 {
		return plotLeft + (math.Log2(float64(b))-lo)/(hi-lo)*(plotRight-plotLeft)
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="16" font-weight="bold">%s</text>`+"\n", plotLeft, esc(opt.title))

	panels := []panel{
		{top: 52, bottom: 430, label: "bus bandwidth (GB/s)", unit: "GB/s", log: opt.logY,
			value: func(p plotPoint) float64 { return p.busbw }},
		{top: 500, bottom: 836, label: "time per call (µs)", unit: "µs", log: true,
			value: func(p plotPoint) float64 { return p.usec }},
	}
	for _, pn := range panels {
		drawPanel(&b, pn, series, lo, hi, last, xpos)
	}

	// The legend.
	for i, s := range series {
		color, dashAttr := seriesStyle(i)
		y := panels[0].top + 8 + i*legendLineH
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/>`+"\n",
			legendLeft, y, legendLeft+26, y, color, dashAttr)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#222222">%s</text>`+"\n", legendLeft+34, y+4, esc(s.name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// seriesStyle is the color and dash attribute of series i.
func seriesStyle(i int) (color, dashAttr string) {
	color = plotColors[i%len(plotColors)]
	if dash := plotDashes[(i/len(plotColors))%len(plotDashes)]; dash != "" {
		dashAttr = fmt.Sprintf(` stroke-dasharray="%s"`, dash)
	}
	return color, dashAttr
}

// drawPanel draws one chart: grid, axes, labels and a line per series.
// Points whose value a logarithmic axis cannot show (zero or less) are
// left out of it.
func drawPanel(b *strings.Builder, pn panel, series []plotSeries, lo, hi float64, last int64, xpos func(int64) float64) {
	ymin, ymax := math.Inf(1), 0.0
	for _, s := range series {
		for _, p := range s.pts {
			if v := pn.value(p); v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
				ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
			}
		}
	}
	var yticks []float64
	var ypos func(v float64) float64
	var ylabel func(v float64) string
	h := float64(pn.bottom - pn.top)
	if pn.log {
		if math.IsInf(ymin, 0) {
			ymin, ymax = 1, 10
		}
		d0, d1 := math.Floor(math.Log10(ymin)), math.Ceil(math.Log10(ymax))
		if d1-d0 < 1 {
			d1 = d0 + 1
		}
		ypos = func(v float64) float64 { return float64(pn.bottom) - (math.Log10(v)-d0)/(d1-d0)*h }
		for d := d0; d <= d1; d++ {
			yticks = append(yticks, math.Pow(10, d))
		}
		ylabel = func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	} else {
		ystep := niceStep(ymax / 5)
		ytop := math.Max(ystep, math.Ceil(ymax*1.04/ystep)*ystep)
		ypos = func(v float64) float64 { return float64(pn.bottom) - v/ytop*h }
		for v := 0.0; v <= ytop+ystep/1e6; v += ystep {
			yticks = append(yticks, v)
		}
		ylabel = func(v float64) string { return fmtTick(v, ystep) }
	}
	shown := func(v float64) bool { return !pn.log || v > 0 && !math.IsInf(v, 0) }

	// Grid and ticks.
	b.WriteString(`<g stroke="#e3e3e3" stroke-width="1">` + "\n")
	xstep := 1.0
	for (hi-lo)/xstep > 14 {
		xstep *= 2
	}
	var xticks []float64
	for k := lo; k <= hi+1e-9; k += xstep {
		xticks = append(xticks, k)
	}
	for _, k := range xticks {
		x := plotLeft + (k-lo)/(hi-lo)*(plotRight-plotLeft)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`+"\n", x, pn.top, x, pn.bottom)
	}
	for _, v := range yticks {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`+"\n", plotLeft, ypos(v), plotRight, ypos(v))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333333"/>`+"\n",
		plotLeft, pn.top, plotRight-plotLeft, pn.bottom-pn.top)

	// Size labels: the ticks, and the largest size measured unless it is
	// a tick (a label too close to it gives way).
	lastX := -1.0
	if last > 0 && !slices.ContainsFunc(xticks, func(k float64) bool { return math.Exp2(k) == float64(last) }) {
		lastX = xpos(last)
	}
	b.WriteString(`<g fill="#333333" text-anchor="middle">` + "\n")
	for _, k := range xticks {
		x := plotLeft + (k-lo)/(hi-lo)*(plotRight-plotLeft)
		if lastX >= 0 && math.Abs(x-lastX) < 30 {
			continue
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%d">%s</text>`+"\n", x, pn.bottom+18, esc(shortBytes(k)))
	}
	if lastX >= 0 {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333333"/>`+"\n", lastX, pn.bottom, lastX, pn.bottom+5)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" font-weight="bold">%s</text>`+"\n", lastX, pn.bottom+18, esc(sizeLabel(last)))
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g fill="#333333" text-anchor="end">` + "\n")
	for _, v := range yticks {
		fmt.Fprintf(b, `<text x="%d" y="%.1f">%s</text>`+"\n", plotLeft-8, ypos(v)+4, esc(ylabel(v)))
	}
	b.WriteString("</g>\n")
	scale := "linear"
	if pn.log {
		scale = "log"
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" fill="#333333">message size (bytes, log scale)</text>`+"\n",
		(plotLeft+plotRight)/2, pn.bottom+40)
	fmt.Fprintf(b, `<text transform="translate(22 %d) rotate(-90)" text-anchor="middle" fill="#333333">%s, %s scale</text>`+"\n",
		(pn.top+pn.bottom)/2, esc(pn.label), scale)

	// The lines.
	for i, s := range series {
		color, dashAttr := seriesStyle(i)
		fmt.Fprintf(b, `<g stroke="%s" fill="%s">`+"\n", color, color)
		var pts []string
		for _, p := range s.pts {
			if v := pn.value(p); shown(v) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xpos(p.bytes), ypos(v)))
			}
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke-width="2"%s points="%s"/>`+"\n", dashAttr, strings.Join(pts, " "))
		for _, p := range s.pts {
			if v := pn.value(p); shown(v) {
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.8"><title>%s: %s, %.3g %s</title></circle>`+"\n",
					xpos(p.bytes), ypos(v), esc(s.name), esc(fmtBytes(p.bytes)), v, pn.unit)
			}
		}
		b.WriteString("</g>\n")
	}
}

// sizeLabel labels a size on the axis: 64M, 100M, 3K, 1000.
func sizeLabel(b int64) string {
	for _, u := range []struct {
		suffix string
		div    int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if b >= u.div && b%u.div == 0 {
			return strconv.FormatInt(b/u.div, 10) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10)
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// fmtTick writes a y tick value with as many decimals as the step needs.
func fmtTick(v, step float64) string {
	dec := 0
	if step < 1 {
		dec = int(math.Ceil(-math.Log10(step)))
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

// shortBytes labels the x tick at 2^k bytes.
func shortBytes(k float64) string {
	n := int(k)
	switch {
	case n < 0:
		return ""
	case n >= 30:
		return strconv.Itoa(1<<(n-30)) + "G"
	case n >= 20:
		return strconv.Itoa(1<<(n-20)) + "M"
	case n >= 10:
		return strconv.Itoa(1<<(n-10)) + "K"
	}
	return strconv.Itoa(1 << n)
}

// esc escapes text for XML character data and attribute values.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
