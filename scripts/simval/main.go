// Command simval compares hcomm sim's predictions with measurements made
// by measure.sh (shared memory) or measure_tcp.sh (TCP between network
// namespaces over tbf-shaped links): for every (collective, algorithm,
// ranks, size) the median of the runs beside the simulator's prediction.
//
// The check is honest: the model's parameters are never fitted to the
// points it is judged on. Over shared memory, α, β, γ and the cache factor
// (and the cache size below which it applies) are fitted (a grid search
// for the smallest mean |error|) on the runs of
// -fit ranks only (default 2: one exchange per step, in effect a
// message-latency and copy-bandwidth micro-measurement) and the other rank
// counts are the validation set. Over TCP the link's bandwidth is not
// fitted at all: it is the tbf rate given to measure_tcp.sh less the
// Ethernet, IP and TCP headers of full frames; only α (per message) is
// fitted, on the -fit runs' messages of at most 2 KiB.
//
//	scripts/simval/measure.sh DIR && go run ./scripts/simval DIR
//	scripts/simval/measure_tcp.sh DIR 400mbit && go run ./scripts/simval -tcp DIR
//
// -md prints the validation rows as BENCHMARKS.md's markdown table.
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/sim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "simval:", err)
		os.Exit(1)
	}
}

type key struct {
	op, algo string
	n        int
	cores    int // the CPUs the run was confined to (taskset); 0: the machine's
	bytes    int64
}

// point is one measured (collective, algorithm, ranks, size) with the
// median of its runs and the prediction.
type point struct {
	key
	runs []float64 // µs
	med  float64
	pred float64
	err  float64 // %, (pred − med)/med
	fit  bool    // in the fitting set
	slot bool    // ran as a group call through shared-memory slots: no schedule to simulate
}

// slotMax is the largest contribution a group call of the shared-memory
// transport takes (internal/transport/shm's groupMax): perf's collectives
// of all-local ranks up to that size, unless forced to an algorithm, run
// as one group call through slots, with no schedule the simulator could
// run. Such points are shown but neither fitted nor validated.
const slotMax = 1024

type config struct {
	tcp     bool
	rate    float64 // tbf rate, bits/s
	fitN    []int
	params  string
	md      bool
	bigOnly int64 // ≥ this size counts as bandwidth-bound
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("simval", flag.ContinueOnError)
	var c config
	fs.BoolVar(&c.tcp, "tcp", false, "the runs are measure_tcp.sh's (TCP across namespaces, shaped links)")
	rate := fs.String("rate", "", "the tbf rate of the TCP runs (default: DIR/rate, as measure_tcp.sh writes it)")
	fitN := fs.String("fit", "2", "rank counts whose runs the parameters are fitted on (comma-separated); the others validate")
	fs.StringVar(&c.params, "params", "", "no fit: α,β,γ,cache factor[,switch,core share] (shm; without the last two they are fitted on the confined runs) or α (tcp), seconds and seconds per byte")
	fs.BoolVar(&c.md, "md", false, "print the validation points as markdown rows")
	single := fs.Bool("single", false, "predict one call alone, not a call in perf's loop of calls back to back")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: simval [-tcp] [-fit 2] [-params ...] [-md] DIR")
	}
	dir := fs.Arg(0)
	if *single {
		loopReps = [2]int{0, 1}
	}
	for _, s := range strings.Split(*fitN, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-fit: %w", err)
		}
		c.fitN = append(c.fitN, n)
	}
	c.bigOnly = 512 << 10
	if c.tcp {
		r := *rate
		if r == "" {
			b, err := os.ReadFile(filepath.Join(dir, "rate"))
			if err != nil {
				return fmt.Errorf("no -rate and %w", err)
			}
			r = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(b)), "rate"))
		}
		v, err := parseRate(r)
		if err != nil {
			return err
		}
		c.rate = v
	}
	pts, err := load(dir)
	if err != nil {
		return err
	}
	if len(pts) == 0 {
		return fmt.Errorf("%s: no measurements", dir)
	}
	for i := range pts {
		// Runs confined to fewer cores are calibration runs of 2 ranks:
		// always fitted on, never validated.
		pts[i].fit = slices.Contains(c.fitN, pts[i].n) || pts[i].cores > 0
		contrib := pts[i].bytes
		if pts[i].op == "allgather" {
			contrib /= int64(pts[i].n)
		}
		pts[i].slot = !c.tcp && pts[i].algo == "auto" && contrib <= slotMax
	}
	return evaluate(c, pts, out)
}

// parseRate reads tc's rate syntax: 400mbit, 1gbit, 100kbit, 5000000bit.
func parseRate(s string) (float64, error) {
	s = strings.ToLower(s)
	mult := 1.0
	for _, u := range []struct {
		suf string
		m   float64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}} {
		if strings.HasSuffix(s, u.suf) {
			s, mult = strings.TrimSuffix(s, u.suf), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0) {
		return 0, fmt.Errorf("rate %q: want e.g. 400mbit", s)
	}
	return v * mult, nil
}

// load reads DIR's ar_n*_r*.csv (AllReduce with ring, rd, hd and dbtree
// forced in turn, a sweep each) and ag_n*_r*.csv (AllGather, and
// Broadcast, which is left out: perf's time for it is a per-rank average
// in which a root returning early makes it a throughput). A file named
// ar_nN_cC_rR.csv holds a run confined to C cores.
func load(dir string) ([]point, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "a[rg]_n*_r*.csv"))
	meas := map[key][]float64{}
	algos := []string{"ring", "rd", "hd", "dbtree"}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		rows, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		ar := strings.HasPrefix(filepath.Base(name), "ar_")
		cores := 0
		if m := coresRE.FindStringSubmatch(filepath.Base(name)); m != nil {
			cores, _ = strconv.Atoi(m[1])
		}
		idx, prevOp := -1, ""
		var last int64 = math.MaxInt64
		for _, r := range rows {
			if len(r) < 5 || r[0] == "impl" {
				continue
			}
			n, err1 := strconv.Atoi(r[2])
			b, err2 := strconv.ParseInt(r[3], 10, 64)
			us, err3 := strconv.ParseFloat(r[4], 64)
			if err1 != nil || err2 != nil || err3 != nil {
				return nil, fmt.Errorf("%s: bad row %v", name, r)
			}
			// A new sweep starts where the size goes down.
			if r[1] != prevOp {
				idx = 0
			} else if b <= last {
				idx++
			}
			prevOp, last = r[1], b
			a := "auto"
			if ar && r[1] == "allreduce" {
				if idx >= len(algos) {
					return nil, fmt.Errorf("%s: more than %d AllReduce sweeps", name, len(algos))
				}
				a = algos[idx]
			}
			if r[1] == "broadcast" {
				continue
			}
			k := key{r[1], a, n, cores, b}
			meas[k] = append(meas[k], us)
		}
	}
	var pts []point
	for k, v := range meas {
		sort.Float64s(v)
		pts = append(pts, point{key: k, runs: v, med: median(v)})
	}
	sort.Slice(pts, func(i, j int) bool {
		a, b := pts[i], pts[j]
		if a.op != b.op {
			return a.op < b.op
		}
		if a.n != b.n {
			return a.n < b.n
		}
		if a.cores != b.cores {
			return a.cores > b.cores
		}
		if a.algo != b.algo {
			return a.algo < b.algo
		}
		return a.bytes < b.bytes
	})
	return pts, nil
}

var coresRE = regexp.MustCompile(`_c([1-9][0-9]*)_`)

func median(v []float64) float64 {
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// loopReps are the loop lengths whose difference predicts a call in
// hcomm perf's timed loop ({0, 1}: one call alone, -single).
var loopReps = [2]int{3, 8}

var colls = map[string]sched.Coll{"allreduce": sched.AllReduce, "allgather": sched.AllGather}

// shmTopo is the local topology with the fitted parameters.
func shmTopo(alpha, beta, gamma, cache float64) sim.Topology {
	t := sim.Local()
	t.SHM.Alpha, t.SHM.Beta, t.Gamma, t.CacheFactor = alpha, beta, gamma, cache
	return t
}

// predict fills p.pred and p.err under t; the algorithm of an "auto" point
// is the planner's pick, as perf ran it.
func predict(t sim.Topology, p *point, tcp bool) error {
	if p.slot {
		p.algo, p.pred, p.err = "slots", math.NaN(), math.NaN()
		return nil
	}
	coll, ok := colls[p.op]
	if !ok {
		return fmt.Errorf("unknown collective %s", p.op)
	}
	name := p.algo
	if name == "auto" {
		sp, es, _, err := sim.Spec(coll, p.n, p.bytes)
		if err != nil {
			return err
		}
		model := plan.MemoryModel
		if tcp {
			model = plan.NetworkModel
		}
		ch, err := plan.New(0, p.n, model, nil).Choose(sp, es)
		if err != nil {
			return err
		}
		name = ch.Name
	}
	a, ok := algo.Lookup(coll, name)
	if !ok {
		return fmt.Errorf("no %s algorithm %s", p.op, name)
	}
	if p.cores > 0 {
		t.Cores = p.cores
	}
	// hcomm perf times a loop of calls back to back after warming up: the
	// prediction is the time a call adds to such a loop.
	var ts [2]float64
	for i, reps := range loopReps {
		r, err := sim.Simulate(t, a, coll, p.n, p.bytes, sim.Options{Repeat: reps})
		if err != nil {
			return err
		}
		ts[i] = r.Time
	}
	p.algo = name
	p.pred = (ts[1] - ts[0]) / float64(loopReps[1]-loopReps[0]) * 1e6
	if loopReps[0] == 0 {
		p.pred = ts[1] * 1e6
	}
	p.err = (p.pred - p.med) / p.med * 100
	return nil
}

// meanAbs returns the mean |error| of the points selected by keep.
func meanAbs(pts []point, keep func(*point) bool) (mean float64, within, total int) {
	var sum float64
	for i := range pts {
		p := &pts[i]
		if !keep(p) || p.slot {
			continue
		}
		total++
		sum += math.Abs(p.err)
		if math.Abs(p.err) <= 25 {
			within++
		}
	}
	if total == 0 {
		return 0, 0, 0
	}
	return sum / float64(total), within, total
}

func predictAll(t sim.Topology, pts []point, tcp bool, keep func(*point) bool) error {
	for i := range pts {
		if keep(&pts[i]) {
			if err := predict(t, &pts[i], tcp); err != nil {
				return err
			}
		}
	}
	return nil
}

// tcpTopo is one rank per host, the hosts' egress shaped to rate (bits/s
// on the wire): the payload rate of full 1,514-byte frames carrying 1,448
// bytes of TCP payload (with timestamps), no rack.
func tcpTopo(rate, alpha float64) sim.Topology {
	t := sim.Default()
	t.Name = "netns"
	t.RanksPerHost, t.HostsPerRack, t.Cores = 1, 0, 1
	payload := rate / 8 * 1448 / 1514
	t.Net = sim.Link{Alpha: alpha, Beta: 1 / payload}
	t.Rack = t.Net
	t.NICBW, t.UplinkBW = payload, payload
	// tbf is a token bucket (measure_tcp.sh: burst 256 KiB): bytes covered
	// by tokens leave at the unshaped path's speed, about 2 GB/s between
	// namespaces here (unloaded). Only egress is shaped: a rank receives
	// from several at once at that speed too.
	const line = 2e9
	t.Net.Beta, t.Rack.Beta = 1/line, 1/line
	t.NICBurst = 256 << 10 * 1448 / 1514
	t.NICLineBW, t.NICRxBW = line, line
	return t
}

func evaluate(c config, pts []point, out io.Writer) error {
	fitSet := func(p *point) bool { return p.fit }
	var t sim.Topology
	var desc string
	switch {
	case c.tcp:
		alpha := math.NaN()
		if c.params != "" {
			v, err := strconv.ParseFloat(c.params, 64)
			if err != nil {
				return fmt.Errorf("-params: %w", err)
			}
			alpha = v
		} else {
			small := func(p *point) bool { return p.fit && p.bytes <= 2048 }
			best := math.Inf(1)
			for a := 5e-6; a <= 2e-3; a *= 1.05 {
				if err := predictAll(tcpTopo(c.rate, a), pts, true, small); err != nil {
					return err
				}
				if e, _, n := meanAbs(pts, small); n > 0 && e < best {
					best, alpha = e, a
				}
			}
			if math.IsNaN(alpha) {
				return errors.New("no fitting points (messages ≤ 2 KiB on -fit ranks)")
			}
		}
		t = tcpTopo(c.rate, alpha)
		desc = fmt.Sprintf("TCP across namespaces, tbf %.0f Mbit/s: payload %.2f MB/s (not fitted), α %.1f µs (fitted on %v ranks, ≤ 2 KiB)",
			c.rate/1e6, t.NICBW/1e6, alpha*1e6, c.fitN)
	case c.params != "":
		var v [6]float64
		ps := strings.Split(c.params, ",")
		if len(ps) != 4 && len(ps) != 6 {
			return errors.New("-params: want α,β,γ,cache factor[,switch,core share]")
		}
		for i, s := range ps {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return fmt.Errorf("-params: %w", err)
			}
			v[i] = x
		}
		t = shmTopo(v[0], v[1], v[2], v[3])
		t.SHMSwitch, t.SHMCoreShare = v[4], v[5]
		if err := t.Check(); err != nil {
			return fmt.Errorf("-params: %w", err)
		}
		desc = "shared memory, parameters given"
		if len(ps) == 4 {
			d, err := fitConfined(&t, pts)
			if err != nil {
				return err
			}
			desc += d
		}
	default:
		// α, β, γ and the cache on the 2-rank runs, which have a core
		// each; then the oversubscription terms on the 2-rank runs confined
		// to one core (measure.sh's ar_n2_c1_*), if there are any.
		all := func(p *point) bool { return p.fit && p.cores == 0 }
		best, bv, bc := math.Inf(1), [4]float64{}, int64(0)
		for _, cb := range []int64{8 << 20, 16 << 20, 32 << 20} {
			for _, al := range []float64{0.5e-6, 1e-6, 1.5e-6, 2e-6, 3e-6, 4e-6, 6e-6, 8e-6, 10e-6, 12e-6, 14e-6, 17e-6, 20e-6, 25e-6, 30e-6, 40e-6} {
				for _, be := range []float64{0.2e-9, 0.3e-9, 0.4e-9, 0.5e-9, 0.6e-9, 0.8e-9} {
					for _, ga := range []float64{0.1e-9, 0.2e-9, 0.3e-9, 0.5e-9} {
						for _, co := range []float64{0.1, 0.2, 0.3, 0.5, 1} {
							tt := shmTopo(al, be, ga, co)
							tt.CacheBytes = cb
							if err := predictAll(tt, pts, false, all); err != nil {
								return err
							}
							if e, _, n := meanAbs(pts, all); n > 0 && e < best {
								best, bv, bc = e, [4]float64{al, be, ga, co}, cb
							}
						}
					}
				}
			}
		}
		if math.IsInf(best, 1) {
			return errors.New("no fitting points")
		}
		t = shmTopo(bv[0], bv[1], bv[2], bv[3])
		t.CacheBytes = bc
		desc = fmt.Sprintf("shared memory, 2 cores: α %.1f µs, β %.2f ns/B, γ %.2f ns/B, cache factor %.2g below %d MiB (fitted on %v ranks)",
			bv[0]*1e6, bv[1]*1e9, bv[2]*1e9, bv[3], bc>>20, c.fitN)
		d, err := fitConfined(&t, pts)
		if err != nil {
			return err
		}
		desc += d
	}
	if err := predictAll(t, pts, c.tcp, func(*point) bool { return true }); err != nil {
		return err
	}
	fmt.Fprintf(out, "# %s\n", desc)
	for _, p := range pts {
		set := "validate"
		if p.fit {
			set = "fit"
		}
		if p.slot {
			set = "not simulated: a group call through slots"
		}
		n := strconv.Itoa(p.n)
		if p.cores > 0 {
			n += "/" + strconv.Itoa(p.cores) + "c"
		}
		if p.slot {
			fmt.Fprintf(out, "%-9s %-7s n=%-4s %9d  measured %10.1f µs (runs %s)  %s\n",
				p.op, p.algo, n, p.bytes, p.med, runsString(p.runs), set)
			continue
		}
		fmt.Fprintf(out, "%-9s %-7s n=%-4s %9d  measured %10.1f µs (runs %s)  predicted %10.1f µs  %+6.1f%%  %s\n",
			p.op, p.algo, n, p.bytes, p.med, runsString(p.runs), p.pred, p.err, set)
	}
	val := func(p *point) bool { return !p.fit }
	big := func(p *point) bool { return !p.fit && p.bytes >= c.bigOnly }
	small := func(p *point) bool { return !p.fit && p.bytes < c.bigOnly }
	for _, s := range []struct {
		name string
		keep func(*point) bool
	}{{"fitting set", fitSet}, {"validation set", val}, {"validation, ≥ 512 KiB", big}, {"validation, < 512 KiB", small}} {
		e, w, n := meanAbs(pts, s.keep)
		fmt.Fprintf(out, "# %-22s %3d of %3d points within 25%%, mean |error| %.1f%%\n", s.name+":", w, n, e)
	}
	if c.md {
		markdown(pts, out)
	}
	return nil
}

// fitConfined fits t's oversubscription terms (SHMSwitch, SHMCoreShare)
// on the runs confined to fewer cores than ranks, its other parameters
// fixed, and describes them.
func fitConfined(t *sim.Topology, pts []point) (string, error) {
	confined := func(p *point) bool { return p.fit && p.cores > 0 }
	if _, _, n := meanAbs(pts, confined); n == 0 {
		return "; no runs confined to fewer cores: no oversubscription terms", nil
	}
	best := math.Inf(1)
	var bs, bf float64
	for _, sw := range []float64{0, 0.25e-6, 0.5e-6, 1e-6, 1.5e-6, 2e-6, 2.5e-6, 3e-6, 4e-6, 5e-6, 6e-6, 8e-6, 10e-6, 15e-6, 20e-6} {
		for _, f := range []float64{0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1} {
			tt := *t
			tt.SHMSwitch, tt.SHMCoreShare = sw, f
			if err := predictAll(tt, pts, false, confined); err != nil {
				return "", err
			}
			if e, _, _ := meanAbs(pts, confined); e < best {
				best, bs, bf = e, sw, f
			}
		}
	}
	t.SHMSwitch, t.SHMCoreShare = bs, bf
	return fmt.Sprintf("; ranks > cores: switch %.2f µs per chunk, core share %.1f (fitted on 2 ranks confined to 1 core)", bs*1e6, bf), nil
}

func runsString(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(s, "/")
}

func fnum(us float64) string {
	switch {
	case us >= 1e5:
		return fmt.Sprintf("%.0f ms", us/1000)
	case us >= 1000:
		return fmt.Sprintf("%.1f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}

// markdown prints a row per (collective, algorithm, ranks) of the
// validation set, a column per size: measured / predicted (error).
func markdown(pts []point, out io.Writer) {
	var sizes []int64
	type row struct {
		op, algo string
		n        int
	}
	var rows []row
	cells := map[row]map[int64]string{}
	for _, p := range pts {
		if p.fit {
			continue
		}
		if !slices.Contains(sizes, p.bytes) {
			sizes = append(sizes, p.bytes)
		}
		r := row{p.op, p.algo, p.n}
		if cells[r] == nil {
			cells[r] = map[int64]string{}
			rows = append(rows, r)
		}
		cells[r][p.bytes] = fmt.Sprintf("%s / %s (%+.0f%%)", fnum(p.med), fnum(p.pred), p.err)
		if p.slot {
			cells[r][p.bytes] = fnum(p.med) + " / slots"
		}
	}
	slices.Sort(sizes)
	fmt.Fprint(out, "| op | algo | ranks |")
	for _, b := range sizes {
		fmt.Fprintf(out, " %s |", sizeName(b))
	}
	fmt.Fprint(out, "\n|---|---|---|")
	for range sizes {
		fmt.Fprint(out, "---|")
	}
	fmt.Fprintln(out)
	for _, r := range rows {
		fmt.Fprintf(out, "| %s | %s | %d |", r.op, r.algo, r.n)
		for _, b := range sizes {
			c, ok := cells[r][b]
			if !ok {
				c = "–"
			}
			fmt.Fprintf(out, " %s |", c)
		}
		fmt.Fprintln(out)
	}
}

func sizeName(b int64) string {
	switch {
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}
