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

// The plot of `hcomm perf -plot FILE.svg`: bus bandwidth against message
// size (log2 axis), one line per series. A series is the rows that share
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
		byKey[k] = append(byKey[k], plotPoint{r.Bytes, r.BusBW})
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

// plotTitle names what the rows measured.
func plotTitle(rows []row) string {
	var ops []string
	var ranks []int
	for _, r := range rows {
		if r.Bytes > 0 && !slices.Contains(ops, r.Op) {
			ops = append(ops, r.Op)
		}
		if !slices.Contains(ranks, r.Ranks) {
			ranks = append(ranks, r.Ranks)
		}
	}
	slices.Sort(ranks)
	rs := make([]string, len(ranks))
	for i, n := range ranks {
		rs[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("%s: bus bandwidth, %s ranks", strings.Join(ops, ", "), strings.Join(rs, "/"))
}

// writePlotFile writes the plot of rows into the SVG file path.
func writePlotFile(path, title string, rows []row) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	err = writeSVG(w, title, plotSeriesOf(rows))
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Plot geometry, in SVG user units (pixels).
const (
	svgWidth    = 900
	svgHeight   = 540
	plotLeft    = 78
	plotTop     = 52
	plotRight   = svgWidth - 250 // the legend is to the right
	plotBottom  = svgHeight - 64
	legendLeft  = plotRight + 24
	legendLineH = 18
)

// plotColors are distinct colors for the lines; after them the colors
// repeat with dashes.
var plotColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
	"#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

var plotDashes = []string{"", "6 4", "2 3", "8 3 2 3"}

// writeSVG draws the series as a self-contained SVG document.
func writeSVG(w io.Writer, title string, series []plotSeries) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	ymax := 0.0
	for _, s := range series {
		for _, p := range s.pts {
			x := math.Log2(float64(p.bytes))
			lo, hi = math.Min(lo, x), math.Max(hi, x)
			ymax = math.Max(ymax, p.busbw)
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 10
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi-lo < 2 {
		lo, hi = lo-1, hi+1
	}
	ystep := niceStep(ymax / 5)
	ytop := math.Max(ystep, math.Ceil(ymax*1.04/ystep)*ystep)
	xpos := func(b int64) float64 {
		return plotLeft + (math.Log2(float64(b))-lo)/(hi-lo)*(plotRight-plotLeft)
	}
	ypos := func(v float64) float64 {
		return plotBottom - v/ytop*(plotBottom-plotTop)
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="16" font-weight="bold">%s</text>`+"\n", plotLeft, esc(title))

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
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`+"\n", x, plotTop, x, plotBottom)
	}
	var yticks []float64
	for v := 0.0; v <= ytop+ystep/1e6; v += ystep {
		yticks = append(yticks, v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`+"\n", plotLeft, ypos(v), plotRight, ypos(v))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333333"/>`+"\n",
		plotLeft, plotTop, plotRight-plotLeft, plotBottom-plotTop)
	b.WriteString(`<g fill="#333333" text-anchor="middle">` + "\n")
	for _, k := range xticks {
		x := plotLeft + (k-lo)/(hi-lo)*(plotRight-plotLeft)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", x, plotBottom+18, esc(shortBytes(k)))
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g fill="#333333" text-anchor="end">` + "\n")
	for _, v := range yticks {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f">%s</text>`+"\n", plotLeft-8, ypos(v)+4, esc(fmtTick(v, ystep)))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#333333">message size (bytes, log scale)</text>`+"\n",
		(plotLeft+plotRight)/2, plotBottom+44)
	fmt.Fprintf(&b, `<text transform="translate(22 %d) rotate(-90)" text-anchor="middle" fill="#333333">bus bandwidth (GB/s)</text>`+"\n",
		(plotTop+plotBottom)/2)

	// The lines, and the legend.
	for i, s := range series {
		color := plotColors[i%len(plotColors)]
		dash := plotDashes[(i/len(plotColors))%len(plotDashes)]
		dashAttr := ""
		if dash != "" {
			dashAttr = fmt.Sprintf(` stroke-dasharray="%s"`, dash)
		}
		fmt.Fprintf(&b, `<g stroke="%s" fill="%s">`+"\n", color, color)
		var pts []string
		for _, p := range s.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xpos(p.bytes), ypos(p.busbw)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke-width="2"%s points="%s"/>`+"\n", dashAttr, strings.Join(pts, " "))
		for _, p := range s.pts {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.8"><title>%s: %s, %.3g GB/s</title></circle>`+"\n",
				xpos(p.bytes), ypos(p.busbw), esc(s.name), esc(fmtBytes(p.bytes)), p.busbw)
		}
		b.WriteString("</g>\n")
		y := plotTop + 8 + i*legendLineH
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/>`+"\n",
			legendLeft, y, legendLeft+26, y, color, dashAttr)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#222222">%s</text>`+"\n", legendLeft+34, y+4, esc(s.name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
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
