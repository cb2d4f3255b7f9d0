// Command simval compares hcomm sim's predictions with measurements made
// by measure.sh (shared memory) or measure_tcp.sh (TCP between network
// namespaces over tbf-shaped links): for every (collective, algorithm,
// ranks, size) the median of the runs beside the simulator's prediction.
//
// The check is honest: the model's parameters are never fitted to the
// points it is judged on. Over shared memory each set of terms is fitted
// (a coordinate search on a grid per term, for the smallest mean |error|)
// on measurements of its own, the earlier sets held:
//   - α, β, γ, memory bandwidth and the cache factor on the schedules (AllReduce forced to each algorithm,
//     AllGather) of the -fit ranks only (default 2, on the machine's
//     cores: one exchange per step, in effect a message-latency and
//     copy-bandwidth measurement); the cache's size is the machine's
//     last-level cache, not fitted (2 ranks' working sets, 4 MiB at
//     512 KiB and 34 MiB at 8 MiB, cannot place it);
//   - the slot α on those ranks' group calls (small collectives left to
//     the planner, which run through shared-memory slots);
//   - the terms for more ranks than cores (switch, core share, wake, a
//     group call's wake, memory share, the in-cache factor) on the
//     calibration runs measure.sh makes with ranks confined to fewer
//     cores (2, 3 and 4 ranks on one core, 3 on two; with CAL=1 also 6
//     on two), schedules and group calls alike.
//
// CAL=1's runs of 2 ranks polling with sched_yield (HCOMM_YIELD=1,
// yield_*.csv) are not fitted on: simval prints what such a wait costs
// beyond the usual polling, the least a turn of another rank can cost,
// beside the fitted wake.
//
// The other runs (4 and 8 ranks on the machine's 2 cores) are the
// validation set. Over TCP the link's bandwidth is not
// fitted at all: it is the tbf rate given to measure_tcp.sh less the
// Ethernet, IP and TCP headers of full frames; α (per message) is fitted
// on the -fit runs' messages of at most 2 KiB, and the CPU time of a
// message on its sender's CPUs (every namespace's ranks share the
// machine's) with a wait's wake per other rank on a CPU
// (sim.Topology.NetWake) on measure_tcp.sh's CAL=1 runs of ranks confined
// to fewer CPUs than ranks (2, 3 and 4 on one, 3 and 6 on two), α
// refitted for each candidate pair.
//
// The machine's speed: this machine runs whole jobs 2–3× slower for
// minutes at a time. measure.sh and measure_tcp.sh bracket every run file
// with a probe of the speed of that moment (probe.sh, DIR/probes.csv);
// simval classes each file fast, slow or mixed by its probes (probes.go)
// and fits and validates on the files of one speed (-mode, default
// fast), every point the median of its runs of that speed. Sets without
// probes use every file.
//
//	scripts/simval/idle.sh DIR && scripts/simval/report.sh DIR   (shm and TCP, the tables)
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
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

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
	// fused: measured on an executor that fuses large messages over
	// shared memory (the file fusedMark in the runs' directory); the
	// kept sets were measured before it did, and are simulated without
	// (sim.Options.Unfused).
	fused bool
}

// fusedMark is the file measure.sh writes beside runs of an executor with
// the large-message fusions (a fused pair exchange, a copy riding its
// send; internal/exec).
const fusedMark = "fused"

type config struct {
	tcp     bool
	rate    float64 // tbf rate, bits/s
	fitN    []int
	params  string
	md      bool
	bigOnly int64 // ≥ this size counts as bandwidth-bound
	// yield is what a wait polled with sched_yield costs beyond the
	// default polling, µs, and the points it is the median of (0: none).
	yield struct {
		us float64
		n  int
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("simval", flag.ContinueOnError)
	var c config
	fs.BoolVar(&c.tcp, "tcp", false, "the runs are measure_tcp.sh's (TCP across namespaces, shaped links)")
	rate := fs.String("rate", "", "the tbf rate of the TCP runs (default: DIR/rate, as measure_tcp.sh writes it)")
	fitN := fs.String("fit", "2", "rank counts whose runs the parameters are fitted on (comma-separated); the others validate")
	fs.StringVar(&c.params, "params", "", "no fit: α,β,γ,cache factor[,memory bytes/s,slot α,switch,core share,wake,memory share[,turn cache[,slot wake]]] (shm; with four values the slot α and the oversubscription terms are fitted; turn cache and slot wake left out are 0: the cache factor and the wake) or α[,CPU per message[,wake per other rank on a CPU]] (tcp), seconds and seconds per byte")
	fs.BoolVar(&c.md, "md", false, "print the validation points as markdown rows")
	single := fs.Bool("single", false, "predict one call alone, not a call in perf's loop of calls back to back")
	mode := fs.String("mode", "fast", "with DIR/probes.csv: the run files to use by the machine's speed during them, fast, slow or all (mixed files only with all)")
	local := fs.Bool("local", false, "no fit: sim.Local()'s terms (shm), the model hcomm sim -topo local runs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: simval [-tcp] [-fit 2] [-params ... | -local] [-mode fast|slow|all] [-md] DIR")
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
	if *local {
		if c.tcp || c.params != "" {
			return errors.New("-local: shared memory only, without -params")
		}
		c.params = shmParams(sim.Local())
	}
	if *mode != "fast" && *mode != "slow" && *mode != "all" {
		return fmt.Errorf("-mode %q: want fast, slow or all", *mode)
	}
	pr, err := readProbes(dir)
	if err != nil {
		return err
	}
	keepFile := func(name string) bool { return pr.keep(name, *mode) }
	pts, err := loadPrefix(dir, "", keepFile)
	if err != nil {
		return err
	}
	if len(pts) == 0 {
		return fmt.Errorf("%s: no measurements (-mode %s)", dir, *mode)
	}
	fmt.Fprintf(out, "# %s\n", pr.describe(*mode))
	if pr != nil && *mode != "all" {
		// The points no run of this speed measured.
		all, err := load(dir)
		if err != nil {
			return err
		}
		have := map[key]bool{}
		for _, p := range pts {
			have[p.key] = true
		}
		var miss []string
		for _, p := range all {
			if !have[p.key] && !slices.Contains(c.fitN, p.n) && p.cores == 0 {
				miss = append(miss, fmt.Sprintf("%s %s n=%d %d", p.op, p.algo, p.n, p.bytes))
			}
		}
		if len(miss) > 0 {
			list := strings.Join(miss[:min(len(miss), 12)], "; ")
			if len(miss) > 12 {
				list += "; …"
			}
			fmt.Fprintf(out, "# %d validation points have no %s run: %s\n", len(miss), *mode, list)
		}
	}
	_, err = os.Stat(filepath.Join(dir, fusedMark))
	fused := err == nil
	if fused {
		fmt.Fprintf(out, "# executor with the large-message fusions (%s)\n", fusedMark)
	} else {
		fmt.Fprintf(out, "# executor without the large-message fusions (no %s: measured before them), simulated so\n", fusedMark)
	}
	for i := range pts {
		pts[i].fused = fused
	}
	for i := range pts {
		// Runs confined to fewer cores are calibration runs of 2 ranks:
		// always fitted on, never validated.
		pts[i].fit = slices.Contains(c.fitN, pts[i].n) || pts[i].cores > 0
		// perf's collectives of all-local ranks run as group calls unless
		// forced to an algorithm (sim.SlotFits).
		pts[i].slot = !c.tcp && pts[i].algo == "auto" && sim.SlotFits(sim.Local(), colls[pts[i].op], pts[i].n, pts[i].bytes)
	}
	if !c.tcp {
		yp, err := loadPrefix(dir, "yield_", keepFile)
		if err != nil {
			return err
		}
		c.yield.us, c.yield.n = yieldCost(pts, yp)
	}
	return evaluate(c, pts, out)
}

// yieldCost returns what polling with sched_yield adds to a wait when no
// rank shares a core (measure.sh's CAL=1 runs of 2 ranks with
// HCOMM_YIELD=1, yield, against the same runs without, pts), in µs per
// call of one wait — rd AllReduce (one exchange) and group calls of at
// most 2 KiB, the median over them — and the number of points compared
// (0: no yield runs).
func yieldCost(pts, yield []point) (float64, int) {
	med := map[key]float64{}
	for _, p := range pts {
		med[p.key] = p.med
	}
	var d []float64
	for _, y := range yield {
		m, ok := med[y.key]
		if !ok || y.n != 2 || y.cores != 0 || y.bytes > 2048 || y.algo != "rd" && y.algo != "auto" {
			continue
		}
		d = append(d, y.med-m)
	}
	if len(d) == 0 {
		return 0, 0
	}
	sort.Float64s(d)
	return median(d), len(d)
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
	return loadPrefix(dir, "", func(string) bool { return true })
}

// loadPrefix is load for the files whose names start with prefix
// (measure.sh's yield_ runs) and that keep keeps (by base name).
func loadPrefix(dir, prefix string, keep func(name string) bool) ([]point, error) {
	files, _ := filepath.Glob(filepath.Join(dir, prefix+"a[rg]_n*_r*.csv"))
	sl, _ := filepath.Glob(filepath.Join(dir, prefix+"sl_n*_r*.csv"))
	files = append(files, sl...)
	files = slices.DeleteFunc(files, func(f string) bool { return !keep(filepath.Base(f)) })
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
		ar := strings.HasPrefix(strings.TrimPrefix(filepath.Base(name), prefix), "ar_")
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
	t.SHM.Alpha, t.SHM.Beta, t.Gamma, t.CopyBeta, t.CacheFactor = alpha, beta, gamma, gamma, cache
	return t
}

// shmParams returns t's shared-memory terms as -params takes them.
func shmParams(t sim.Topology) string {
	return fmt.Sprintf("%.4g,%.4g,%.4g,%.4g,%.4g,%.4g,%.4g,%.4g,%.4g,%.4g,%.4g,%.4g", t.SHM.Alpha, t.SHM.Beta, t.Gamma, t.CacheFactor,
		t.MemBW, t.SlotAlpha, t.SHMSwitch, t.SHMCoreShare, t.SHMWake, t.SHMMemShare, t.SHMTurnCache, t.SlotWake)
}

// predict fills p.pred and p.err under t; the algorithm of an "auto" point
// is the planner's pick, as perf ran it.
func predict(t sim.Topology, p *point, tcp bool) error {
	coll, ok := colls[p.op]
	if !ok {
		return fmt.Errorf("unknown collective %s", p.op)
	}
	if p.cores > 0 {
		t.Cores = p.cores
	}
	if p.slot {
		var ts [2]float64
		for i, reps := range loopReps {
			r, err := sim.Slots(t, coll, p.n, p.bytes, sim.Options{Repeat: reps, Unfused: !p.fused})
			if err != nil {
				return err
			}
			ts[i] = r.Time
		}
		p.algo = "slots"
		p.setPred(ts)
		return nil
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
	// hcomm perf times a loop of calls back to back after warming up: the
	// prediction is the time a call adds to such a loop.
	var ts [2]float64
	for i, reps := range loopReps {
		r, err := sim.Simulate(t, a, coll, p.n, p.bytes, sim.Options{Repeat: reps, Unfused: !p.fused})
		if err != nil {
			return err
		}
		ts[i] = r.Time
	}
	p.algo = name
	p.setPred(ts)
	return nil
}

// setPred sets the prediction from the simulated times of loopReps calls.
func (p *point) setPred(ts [2]float64) {
	p.pred = (ts[1] - ts[0]) / float64(loopReps[1]-loopReps[0]) * 1e6
	if loopReps[0] == 0 {
		p.pred = ts[1] * 1e6
	}
	p.err = (p.pred - p.med) / p.med * 100
}

// meanAbs returns the mean |error| of the points selected by keep.
// runShapes lists, sorted and once each, the ranks/CPUs shapes ("4/2c")
// of the points keep keeps.
func runShapes(pts []point, keep func(*point) bool) []string {
	var runs []string
	for _, p := range pts {
		if keep(&p) {
			r := fmt.Sprintf("%d/%dc", p.n, p.cores)
			if !slices.Contains(runs, r) {
				runs = append(runs, r)
			}
		}
	}
	slices.Sort(runs)
	return runs
}

func meanAbs(pts []point, keep func(*point) bool) (mean float64, within, total int) {
	var sum float64
	for i := range pts {
		p := &pts[i]
		if !keep(p) {
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

// predictAll predicts the points kept, one goroutine per CPU.
func predictAll(t sim.Topology, pts []point, tcp bool, keep func(*point) bool) error {
	work := make(chan *point)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for p := range work {
				if err := predict(t, p, tcp); err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		})
	}
	for i := range pts {
		if keep(&pts[i]) {
			work <- &pts[i]
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// tcpCores is the CPUs of the machine the TCP runs were measured on (every
// namespace's ranks share them): 2, as sim.Local's cores.
const tcpCores = 2

// tcpTopo is one rank per host, the hosts' egress shaped to rate (bits/s
// on the wire): the payload rate of full 1,514-byte frames carrying 1,448
// bytes of TCP payload (with timestamps), no rack; every host a network
// namespace of one machine of tcpCores CPUs, on which a network message
// costs cpu seconds of its sender's (sim.Topology.NetCPU).
func tcpTopo(rate, alpha, cpu float64, wake ...float64) sim.Topology {
	t := sim.Default()
	t.Name = "netns"
	t.RanksPerHost, t.HostsPerRack = 1, 0
	t.HostsPerMachine, t.Cores, t.NetCPU = 1<<20, tcpCores, cpu
	if len(wake) > 0 {
		t.NetWake = wake[0]
	}
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

// axis is one parameter of a fit: its candidate values and how it sets a
// topology.
type axis struct {
	name string
	vals []float64
	set  func(*sim.Topology, float64)
	get  func(*sim.Topology) float64
}

func us(v ...float64) []float64 {
	for i := range v {
		v[i] *= 1e-6
	}
	return v
}

func ns(v ...float64) []float64 {
	for i := range v {
		v[i] *= 1e-9
	}
	return v
}

// The parameters fitted over shared memory, in three separate sets of
// measurements: the 2-core terms on 2 ranks running schedules, slotAxes on
// 2 ranks running group calls, overAxes (more ranks than cores) on the
// calibration runs confined to fewer cores than ranks.
var (
	baseAxes = []axis{
		{"α", us(0.5, 0.75, 1, 1.25, 1.5, 2, 3, 4, 6, 8, 12, 20), func(t *sim.Topology, v float64) { t.SHM.Alpha = v }, func(t *sim.Topology) float64 { return t.SHM.Alpha }},
		{"β", ns(0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8), func(t *sim.Topology, v float64) { t.SHM.Beta = v }, func(t *sim.Topology) float64 { return t.SHM.Beta }},
		{"γ", ns(0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5), func(t *sim.Topology, v float64) { t.Gamma = v; t.CopyBeta = v }, func(t *sim.Topology) float64 { return t.Gamma }},
		{"memory", []float64{5e9, 6e9, 7e9, 8e9, 9e9, 10e9, 12e9, 14e9, 16e9}, func(t *sim.Topology, v float64) { t.MemBW = v }, func(t *sim.Topology) float64 { return t.MemBW }},
		{"cache factor", []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1}, func(t *sim.Topology, v float64) { t.CacheFactor = v }, func(t *sim.Topology) float64 { return t.CacheFactor }},
	}
	slotAxes = []axis{
		{"slot α", us(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1, 1.25, 1.5, 2, 3), func(t *sim.Topology, v float64) { t.SlotAlpha = v }, func(t *sim.Topology) float64 { return t.SlotAlpha }},
	}
	overAxes = []axis{
		{"switch", us(0, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 15, 20), func(t *sim.Topology, v float64) { t.SHMSwitch = v }, func(t *sim.Topology) float64 { return t.SHMSwitch }},
		{"core share", []float64{0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}, func(t *sim.Topology, v float64) { t.SHMCoreShare = v }, func(t *sim.Topology) float64 { return t.SHMCoreShare }},
		{"memory share", []float64{0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}, func(t *sim.Topology, v float64) { t.SHMMemShare = v }, func(t *sim.Topology) float64 { return t.SHMMemShare }},
		{"turn cache", []float64{0, 0.5, 0.6, 0.7, 0.8, 0.9, 1}, func(t *sim.Topology, v float64) { t.SHMTurnCache = v }, func(t *sim.Topology) float64 { return t.SHMTurnCache }},
		{"slot wake", us(0, 1, 1.5, 2, 2.5, 3, 3.5, 4, 5), func(t *sim.Topology, v float64) { t.SlotWake = v }, func(t *sim.Topology) float64 { return t.SlotWake }},
		{"wake", us(0, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 15, 20), func(t *sim.Topology, v float64) { t.SHMWake = v }, func(t *sim.Topology) float64 { return t.SHMWake }},
	}
)

// search fits axes on the points kept, the rest of t fixed: a coordinate
// search on the axes' grids (each axis in turn set to its best value
// with the others held, until a round changes nothing), minimising the
// mean |error|, from several starts.
func search(t sim.Topology, axes []axis, pts []point, keep func(*point) bool) (sim.Topology, []float64, error) {
	if _, _, n := meanAbs(pts, keep); n == 0 {
		if err := predictAll(t, pts, false, keep); err != nil {
			return t, nil, err
		}
		if _, _, n := meanAbs(pts, keep); n == 0 {
			return t, nil, errNoPoints
		}
	}
	// The starts' paths meet (most end at the same minimum, and a round
	// that changes nothing tries every neighbour again): every vector's
	// error is computed once.
	seen := map[string]float64{}
	eval := func(v []float64) (float64, error) {
		k := fmt.Sprint(v)
		if e, ok := seen[k]; ok {
			return e, nil
		}
		tt := t
		for i, a := range axes {
			a.set(&tt, v[i])
		}
		if err := predictAll(tt, pts, false, keep); err != nil {
			return 0, err
		}
		e, _, _ := meanAbs(pts, keep)
		seen[k] = e
		return e, nil
	}
	// A coordinate search finds a local minimum: start it from the grid's
	// values nearest t's and from the grids' eighth points, and keep the
	// best end.
	var best []float64
	bestErr := math.Inf(1)
	for _, at := range []float64{-1, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875} {
		cur := make([]float64, len(axes))
		for i, a := range axes {
			if at >= 0 {
				cur[i] = a.vals[int(at*float64(len(a.vals)-1)+0.5)]
				continue
			}
			v := a.get(&t)
			cur[i] = a.vals[0]
			for _, x := range a.vals {
				if math.Abs(x-v) < math.Abs(cur[i]-v) {
					cur[i] = x
				}
			}
		}
		e, err := eval(cur)
		if err != nil {
			return t, nil, err
		}
		for round := 0; round < 10; round++ {
			changed := false
			for i, a := range axes {
				for _, v := range a.vals {
					if v == cur[i] {
						continue
					}
					try := slices.Clone(cur)
					try[i] = v
					te, err := eval(try)
					if err != nil {
						return t, nil, err
					}
					if te < e-1e-9 {
						e, cur, changed = te, try, true
					}
				}
			}
			if !changed {
				break
			}
		}
		if e < bestErr-1e-9 {
			best, bestErr = cur, e
		}
	}
	for i, a := range axes {
		a.set(&t, best[i])
	}
	return t, best, nil
}

var errNoPoints = errors.New("no points to fit on")

func evaluate(c config, pts []point, out io.Writer) error {
	fitSet := func(p *point) bool { return p.fit }
	var t sim.Topology
	var desc string
	switch {
	case c.tcp:
		var err error
		t, desc, err = fitTCP(c, pts)
		if err != nil {
			return err
		}
	default:
		var err error
		t, desc, err = fitSHM(c, pts)
		if err != nil {
			return err
		}
	}
	if err := predictAll(t, pts, c.tcp, func(*point) bool { return true }); err != nil {
		return err
	}
	fmt.Fprintf(out, "# %s\n", desc)
	if !c.tcp {
		fmt.Fprintf(out, "# -params %s\n", shmParams(t))
		if c.yield.n > 0 {
			// Not fitted: a bound. Another rank's turn costs at least a
			// sched_yield.
			fmt.Fprintf(out, "# HCOMM_YIELD=1 runs (2 ranks, a core each; not fitted): a wait polled with sched_yield costs %+.2f µs (median of %d calls of one wait), the least a turn of another rank costs; the wake per other rank on a core is %.2f µs\n",
				c.yield.us, c.yield.n, t.SHMWake*1e6)
		}
	}
	for _, p := range pts {
		set := "validate"
		if p.fit {
			set = "fit"
		}
		n := strconv.Itoa(p.n)
		if p.cores > 0 {
			n += "/" + strconv.Itoa(p.cores) + "c"
		}
		fmt.Fprintf(out, "%-9s %-9s n=%-4s %9d  measured %10.1f µs (runs %s)  predicted %10.1f µs  %+6.1f%%  %s\n",
			p.op, p.algo, n, p.bytes, p.med, runsString(p.runs), p.pred, p.err, set)
	}
	val := func(p *point) bool { return !p.fit }
	big := func(p *point) bool { return !p.fit && p.bytes >= c.bigOnly }
	small := func(p *point) bool { return !p.fit && p.bytes < c.bigOnly }
	slot := func(p *point) bool { return !p.fit && p.slot }
	for _, s := range []struct {
		name string
		keep func(*point) bool
	}{{"fitting set", fitSet}, {"validation set", val}, {"validation, ≥ 512 KiB", big}, {"validation, < 512 KiB", small}, {"validation, group calls", slot}} {
		e, w, n := meanAbs(pts, s.keep)
		fmt.Fprintf(out, "# %-24s %3d of %3d points within 25%%, mean |error| %.1f%%\n", s.name+":", w, n, e)
	}
	if c.md {
		markdown(pts, out)
	}
	return nil
}

// fitTCP returns the TCP model and its description: the link's rate
// from the shaper (not fitted); the CPU time of a message on its sender's
// CPUs (sim.Topology.NetCPU) and a wait's wake per other rank on a CPU
// (sim.Topology.NetWake) fitted together on the calibration runs (ranks
// confined to fewer CPUs than ranks), α refitted on the -fit ranks'
// messages of at most 2 KiB for every candidate pair; or given by
// -params (α[,CPU time[,wake]]; those left out, none).
func fitTCP(c config, pts []point) (sim.Topology, string, error) {
	var alpha, cpu, wake float64
	var cpuFit string
	small := func(p *point) bool { return p.fit && p.cores == 0 && p.bytes <= 2048 }
	over := func(p *point) bool { return p.fit && p.cores > 0 }
	if c.params != "" {
		var v []float64
		for _, s := range strings.Split(c.params, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return sim.Topology{}, "", fmt.Errorf("-params: %w", err)
			}
			v = append(v, x)
		}
		if len(v) > 3 {
			return sim.Topology{}, "", errors.New("-params: want α[,CPU time per message[,wake per other rank on a CPU]] over TCP")
		}
		alpha = v[0]
		if len(v) >= 2 {
			cpu = v[1]
		}
		if len(v) == 3 {
			wake = v[2]
		}
		if err := tcpTopo(c.rate, alpha, cpu, wake).Check(); err != nil {
			return sim.Topology{}, "", fmt.Errorf("-params: %w", err)
		}
		cpuFit = "given"
	} else {
		// fitAlpha returns the α that predicts the -fit ranks' small
		// messages best with cpu: the best of a grid of factors of 2
		// from 0.25 µs to 2 ms, then a golden-section search between its
		// neighbours (to 0.5%).
		fitAlpha := func(cpu, wake float64) (float64, error) {
			eval := func(lnA float64) (float64, error) {
				if err := predictAll(tcpTopo(c.rate, math.Exp(lnA), cpu, wake), pts, true, small); err != nil {
					return 0, err
				}
				e, _, n := meanAbs(pts, small)
				if n == 0 {
					return 0, errors.New("no fitting points (messages ≤ 2 KiB on -fit ranks)")
				}
				return e, nil
			}
			step := math.Ln2
			lo := math.Log(0.25e-6)
			best, bestE := lo, math.Inf(1)
			for x := lo; x <= math.Log(2e-3)+1e-9; x += step {
				e, err := eval(x)
				if err != nil {
					return 0, err
				}
				if e < bestE {
					best, bestE = x, e
				}
			}
			a, b := best-step, best+step
			g := (math.Sqrt(5) - 1) / 2
			x1, x2 := b-g*(b-a), a+g*(b-a)
			e1, err := eval(x1)
			if err != nil {
				return 0, err
			}
			e2, err := eval(x2)
			if err != nil {
				return 0, err
			}
			for b-a > 0.005 {
				if e1 <= e2 {
					b, x2, e2 = x2, x1, e1
					x1 = b - g*(b-a)
					if e1, err = eval(x1); err != nil {
						return 0, err
					}
				} else {
					a, x1, e1 = x1, x2, e2
					x2 = a + g*(b-a)
					if e2, err = eval(x2); err != nil {
						return 0, err
					}
				}
			}
			switch {
			case e1 <= e2 && e1 < bestE:
				return math.Exp(x1), nil
			case e2 < e1 && e2 < bestE:
				return math.Exp(x2), nil
			}
			return math.Exp(best), nil
		}
		var err error
		if alpha, err = fitAlpha(0, 0); err != nil {
			return sim.Topology{}, "", err
		}
		cpuFit = "no calibration runs: none"
		if slices.ContainsFunc(pts, func(p point) bool { return over(&p) }) {
			best := math.Inf(1)
			for _, w := range tcpWakeAxis {
				for _, v := range tcpCPUAxis {
					a, err := fitAlpha(v, w)
					if err != nil {
						return sim.Topology{}, "", err
					}
					if err := predictAll(tcpTopo(c.rate, a, v, w), pts, true, over); err != nil {
						return sim.Topology{}, "", err
					}
					if e, _, _ := meanAbs(pts, over); e < best-1e-9 {
						best, alpha, cpu, wake = e, a, v, w
					}
				}
			}
			cpuFit = "fitted on ranks/CPUs " + strings.Join(runShapes(pts, over), ", ")
		}
	}
	t := tcpTopo(c.rate, alpha, cpu, wake)
	return t, fmt.Sprintf("TCP across namespaces, tbf %.0f Mbit/s: payload %.2f MB/s (not fitted), α %.1f µs (fitted on %v ranks, ≤ 2 KiB), CPU %.1f µs per message on the sender's and a wait's wake %.1f µs per other rank on a CPU (%s), %d CPUs",
		c.rate/1e6, t.NICBW/1e6, alpha*1e6, c.fitN, cpu*1e6, wake*1e6, cpuFit, tcpCores), nil
}

// tcpWakeAxis is the grid of a TCP wait's wake per other rank on a CPU
// (sim.Topology.NetWake).
var tcpWakeAxis = us(0, 1, 2, 3, 4, 5, 6, 8, 10)

// tcpCPUAxis is the grid of the CPU time of a TCP message.
var tcpCPUAxis = us(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 25, 30, 40)

// fitSHM returns the shared-memory model and its description: the 2-core
// terms fitted on the -fit ranks' schedules (or given by -params), the
// slot α on their group calls, the oversubscription terms on the
// calibration runs (ranks confined to fewer cores). Each set of terms is
// fitted on its own measurements, the earlier terms held.
func fitSHM(c config, pts []point) (sim.Topology, string, error) {
	t := sim.Local()
	var v []float64
	if c.params != "" {
		for _, s := range strings.Split(c.params, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return t, "", fmt.Errorf("-params: %w", err)
			}
			v = append(v, x)
		}
		if len(v) != 4 && (len(v) < 10 || len(v) > 12) {
			return t, "", errors.New("-params: want α,β,γ,cache factor[,memory bandwidth,slot α,switch,core share,wake,memory share[,turn cache[,slot wake]]]")
		}
		t = shmTopo(v[0], v[1], v[2], v[3])
		if len(v) >= 10 {
			if v[9] < 0.1 || v[9] > 1 {
				// Until it was removed, the tenth value was the futex wake-up (shm_sleep).
				return t, "", fmt.Errorf("-params: memory share %g, want 0.1 to 1", v[9])
			}
			t.MemBW, t.SlotAlpha, t.SHMSwitch, t.SHMCoreShare, t.SHMWake, t.SHMMemShare = v[4], v[5], v[6], v[7], v[8], v[9]
			t.SHMTurnCache, t.SlotWake = 0, 0
			if len(v) >= 11 {
				t.SHMTurnCache = v[10]
			}
			if len(v) == 12 {
				t.SlotWake = v[11]
			}
		}
		if err := t.Check(); err != nil {
			return t, "", fmt.Errorf("-params: %w", err)
		}
		if len(v) >= 10 {
			return t, "shared memory, parameters given", nil
		}
	}
	var desc strings.Builder
	if c.params == "" {
		base := func(p *point) bool { return p.fit && p.cores == 0 && !p.slot }
		var err error
		if t, _, err = search(t, baseAxes, pts, base); err != nil {
			return t, "", fmt.Errorf("2-core terms: %w", err)
		}
		fmt.Fprintf(&desc, "shared memory, 2 cores: α %.2f µs, β %.2f ns/B, γ %.2f ns/B, memory %.0f GB/s, cache factor %.2g below %d MiB (fitted on %v ranks' schedules)",
			t.SHM.Alpha*1e6, t.SHM.Beta*1e9, t.Gamma*1e9, t.MemBW/1e9, t.CacheFactor, t.CacheBytes>>20, c.fitN)
	} else {
		desc.WriteString("shared memory, 2-core terms given")
	}
	slots := func(p *point) bool { return p.fit && p.cores == 0 && p.slot }
	t2, _, err := search(t, slotAxes, pts, slots)
	switch {
	case errors.Is(err, errNoPoints):
		desc.WriteString("; no group calls on the fitting ranks: slot α = α")
	case err != nil:
		return t, "", err
	default:
		t = t2
		fmt.Fprintf(&desc, "; group calls: slot α %.2f µs (fitted on their group calls)", t.SlotAlpha*1e6)
	}
	over := func(p *point) bool { return p.fit && p.cores > 0 }
	// The memory share of ranks taking turns on several cores cannot be
	// told from runs confined to one core: fitted only beside runs on two
	// or more, 1 otherwise.
	axes := overAxes
	if !slices.ContainsFunc(pts, func(p point) bool { return over(&p) && p.cores > 1 }) {
		axes = slices.DeleteFunc(slices.Clone(axes), func(a axis) bool { return a.name == "memory share" })
		t.SHMMemShare = 1
	}
	t2, _, err = search(t, axes, pts, over)
	switch {
	case errors.Is(err, errNoPoints):
		t.SHMSwitch, t.SHMCoreShare, t.SHMWake, t.SHMMemShare, t.SHMTurnCache, t.SlotWake = 0, 0, 0, 1, 0, 0
		desc.WriteString("; no runs confined to fewer cores: no oversubscription terms")
	case err != nil:
		return t, "", err
	default:
		t = t2
		runs := runShapes(pts, over)
		slotWake := "as a schedule's"
		if t.SlotWake > 0 {
			slotWake = fmt.Sprintf("%.2f µs", t.SlotWake*1e6)
		}
		turnCache := "the cache factor"
		if t.SHMTurnCache > 0 {
			turnCache = fmt.Sprintf("%.2g", t.SHMTurnCache)
		}
		fmt.Fprintf(&desc, "; ranks > cores: switch %.2f µs per chunk, core share %.1f, memory share %.1f, wake %.2f µs per other rank on a core, group call's %s, in-cache factor %s (fitted on ranks/cores %s)",
			t.SHMSwitch*1e6, t.SHMCoreShare, t.SHMMemShare, t.SHMWake*1e6, slotWake, turnCache, strings.Join(runs, ", "))
	}
	return t, desc.String(), nil
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
