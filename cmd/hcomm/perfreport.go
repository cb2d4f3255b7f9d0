package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Showing the rows: text, CSV or JSON, the progress line, the plot.

// reporter shows the rows of rank 0: as text, CSV or JSON on stdout, as a
// progress line on stderr, and in the plot.
type reporter struct {
	mu      sync.Mutex
	pc      *perfConfig
	out     io.Writer
	errOut  io.Writer
	header  bool // the header is still to be printed
	ranks   int
	what    string
	pending *row // an out-of-place row waiting for its in-place partner
	rows    []row
	prog    *progress
}

func newReporter(pc *perfConfig, ranks int, what string, out, errOut io.Writer) *reporter {
	rp := &reporter{pc: pc, out: out, errOut: errOut, header: pc.header, ranks: ranks, what: what}
	if pc.verbose == progressOn || pc.verbose == progressAuto && isTerminal(errOut) {
		rp.prog = newProgress(errOut, pc, &rp.mu)
	}
	return rp
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// add shows one row.
func (rp *reporter) add(r row) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.prog.clear()
	defer rp.prog.step(r)
	rp.rows = append(rp.rows, r)
	rp.printHeader()
	defer rp.warnStacked(r)
	switch rp.pc.format {
	case "csv":
		fmt.Fprintln(rp.out, r.csvLine())
	case "json":
		b, _ := json.Marshal(r)
		fmt.Fprintln(rp.out, string(b))
	default:
		if len(rp.pc.modes) == 2 {
			if !r.InPlace {
				rp.pending = &r
				return
			}
			if p := rp.pending; p != nil && p.Op == r.Op && p.Bytes == r.Bytes {
				fmt.Fprintln(rp.out, textRow(p, &r))
			} else {
				fmt.Fprintln(rp.out, textRow(nil, &r))
			}
			rp.pending = nil
			return
		}
		fmt.Fprintln(rp.out, textRow(&r))
	}
}

// warnStacked says, after a row whose ranks shared a CPU, which ranks ran
// where: as a comment line of a text table, on stderr for CSV and JSON
// (whose rows stay in their format).
func (rp *reporter) warnStacked(r row) {
	if !r.Stacked {
		return
	}
	w := rp.errOut
	if rp.pc.format == "text" {
		w = rp.out
	}
	fmt.Fprintln(w, stackedLine(r))
}

// stackedLine is the warning of a point whose ranks shared a CPU.
func stackedLine(r row) string {
	what := r.Op
	if r.Op != "barrier" {
		what += " " + fmtBytes(r.Bytes)
	}
	if r.InPlace {
		what += " in place"
	}
	cpus := make([]string, len(r.CPUs))
	for i, c := range r.CPUs {
		cpus[i] = strconv.Itoa(c)
	}
	return fmt.Sprintf("# WARN %s: ranks of one host shared a CPU during the timed loop (CPU of each rank at its end: %s); the time is of ranks taking turns",
		what, strings.Join(cpus, ","))
}

func (rp *reporter) printHeader() {
	if !rp.header {
		return
	}
	rp.header = false
	switch rp.pc.format {
	case "csv":
		fmt.Fprintln(rp.out, "impl,op,ranks,bytes,usec,algbw_GBps,busbw_GBps")
	case "text":
		algo := "cost model"
		if len(rp.pc.algos) > 1 || rp.pc.algos[0] != "" {
			algo = strings.Join(rp.pc.algos, " | ")
		}
		fmt.Fprintf(rp.out, "# hcomm perf: %d ranks (%s), %s %s for reductions, algorithms: %s\n",
			rp.ranks, rp.what, rp.pc.dtype, rp.pc.redop, algo)
		groups, cols, units := "", "", ""
		for _, in := range rp.pc.modes {
			groups += " " + center(map[bool]string{false: "out-of-place", true: "in-place"}[in], 42)
			cols += fmt.Sprintf(" %9s %9s %7s %7s %6s", "time", "median", "algbw", "busbw", "#wrong")
			units += fmt.Sprintf(" %9s %9s %7s %7s %6s", "(us)", "(us)", "(GB/s)", "(GB/s)", "")
		}
		fmt.Fprintf(rp.out, "#%70s%s\n", "", groups)
		fmt.Fprintf(rp.out, "# %11s %12s %8s %6s %5s %13s %8s%s\n", "size", "count", "type", "redop", "root", "op", "algo", cols)
		fmt.Fprintf(rp.out, "# %11s %12s %8s %6s %5s %13s %8s%s\n", "(B)", "(elements)", "", "", "", "", "", units)
	}
}

// summaryLines are the closing lines of a text table, as nccl-tests ends
// its own: the wrong elements found in all, and the mean bus bandwidth
// over every row that moves data (both column groups; barrier rows left
// out).
func summaryLines(rows []row) string {
	var wrong int64
	sum, n := 0.0, 0
	for _, r := range rows {
		wrong += r.Wrong
		if r.Bytes > 0 {
			sum += r.BusBW
			n++
		}
	}
	verdict := "OK"
	if wrong != 0 {
		verdict = "FAILED"
	}
	s := fmt.Sprintf("# Wrong elements       : %d %s\n", wrong, verdict)
	if n > 0 {
		s += fmt.Sprintf("# Avg bus bandwidth    : %.4f GB/s\n", sum/float64(n))
	}
	return s + "#\n"
}

// center pads s with blanks on both sides to width w.
func center(s string, w int) string {
	if len(s) >= w {
		return s
	}
	l := (w - len(s)) / 2
	return strings.Repeat(" ", l) + s + strings.Repeat(" ", w-len(s)-l)
}

// textRow formats a text row with one column group per given row (out of
// place, then in place); a nil row is a group of dashes.
func textRow(groups ...*row) string {
	var r *row
	for _, g := range groups {
		if g != nil {
			r = g
			break
		}
	}
	redop := r.Redop
	if redop == "" {
		redop = "-"
	}
	pick := r.Pick
	if pick == "" {
		pick = "-"
	}
	s := fmt.Sprintf("  %11d %12d %8s %6s %5d %13s %8s", r.Bytes, r.Count, r.Type, redop, r.Root, r.Op, pick)
	for _, x := range groups {
		if x == nil {
			s += fmt.Sprintf(" %9s %9s %7s %7s %6s", "-", "-", "-", "-", "-")
			continue
		}
		med := "-"
		if x.MedUsec > 0 {
			med = fmtUsec(x.MedUsec)
		}
		s += fmt.Sprintf(" %9s %9s %7.3f %7.3f %6d", fmtUsec(x.Usec), med, x.AlgBW, x.BusBW, x.Wrong)
	}
	return s
}

// fmtUsec writes a time in µs with about four significant digits.
func fmtUsec(u float64) string {
	switch {
	case u >= 1e5:
		return strconv.FormatFloat(u, 'f', 0, 64)
	case u >= 1e3:
		return strconv.FormatFloat(u, 'f', 1, 64)
	}
	return strconv.FormatFloat(u, 'f', 2, 64)
}

// raw passes a line of the ranks' output that is not a row.
func (rp *reporter) raw(l []byte) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.prog.clear()
	rp.out.Write(l)
	rp.prog.draw()
}

// passThrough returns a writer for the ranks' standard error that keeps
// the progress line clear of their lines.
func (rp *reporter) passThrough() io.Writer {
	if rp.prog == nil {
		return &syncWriter{w: rp.errOut}
	}
	return writerFunc(func(p []byte) (int, error) {
		rp.mu.Lock()
		defer rp.mu.Unlock()
		rp.prog.clear()
		rp.errOut.Write(p)
		rp.prog.draw()
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// close flushes an unpaired row, ends the progress line, closes the text
// table with nccl-tests' summary lines and writes the plot.
func (rp *reporter) close() error {
	rp.mu.Lock()
	rp.prog.stop()
	if p := rp.pending; p != nil {
		fmt.Fprintln(rp.out, textRow(p, nil))
		rp.pending = nil
	}
	rows := rp.rows
	if rp.pc.format == "text" && len(rows) > 0 {
		fmt.Fprint(rp.out, summaryLines(rows))
	}
	rp.mu.Unlock()
	if rp.pc.plot == "" || len(rows) == 0 {
		return nil
	}
	return writePlotFile(rp.pc.plot, plotOptions{title: plotTitle(rows, rp.what), logY: rp.pc.plotLogY}, rows)
}

// progress is the line on stderr that tells a person how far a sweep is.
type progress struct {
	w     io.Writer
	mu    *sync.Mutex // the reporter's; held by every method's caller
	plan  []string    // what each point measures, in order
	done  int
	start time.Time
	shown bool
	quit  chan struct{}
}

func newProgress(w io.Writer, pc *perfConfig, mu *sync.Mutex) *progress {
	p := &progress{w: w, mu: mu, start: time.Now(), quit: make(chan struct{})}
	for _, algo := range pc.algos {
		for _, op := range pc.ops {
			for _, s := range pc.sizes(op) {
				for _, in := range pc.modes {
					desc := op
					if op != "barrier" {
						desc += " " + fmtBytes(s)
					}
					if len(pc.modes) == 2 && in {
						desc += " in place"
					}
					if algo != "" {
						desc += " [" + algo + "]"
					}
					p.plan = append(p.plan, desc)
				}
			}
		}
	}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.mu.Lock()
				p.draw()
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// step counts a finished point and shows the next.
func (p *progress) step(row) {
	if p == nil {
		return
	}
	p.done++
	p.draw()
}

func (p *progress) draw() {
	if p == nil || p.done >= len(p.plan) {
		return
	}
	el := time.Since(p.start).Round(time.Second)
	fmt.Fprintf(p.w, "\r\x1b[K[%d/%d] %s  (%v)", p.done+1, len(p.plan), p.plan[p.done], el)
	p.shown = true
}

func (p *progress) clear() {
	if p == nil || !p.shown {
		return
	}
	fmt.Fprint(p.w, "\r\x1b[K")
	p.shown = false
}

func (p *progress) stop() {
	if p == nil {
		return
	}
	close(p.quit)
	p.clear()
}

// fmtBytes writes a size the way the tables do: 8 B, 32 KiB, 256 MiB.
func fmtBytes(b int64) string {
	for _, u := range []struct {
		name string
		div  int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b >= u.div && b%u.div == 0 {
			return strconv.FormatInt(b/u.div, 10) + " " + u.name
		}
	}
	return strconv.FormatInt(b, 10) + " B"
}
