package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/hcomm-go/hcomm"
	"github.com/hcomm-go/hcomm/internal/topo"
)

// Measuring one point the way the method (perf.go) describes.

// Timing rules of the method (see above).
const (
	minTimedIters = 3
	maxTimedIters = 20000
)

// row is one measured point.
type row struct {
	Impl    string  `json:"impl"`
	Op      string  `json:"op"`
	Ranks   int     `json:"ranks"`
	Bytes   int64   `json:"bytes"`
	Count   int64   `json:"count"`
	Type    string  `json:"type"`
	Redop   string  `json:"redop,omitempty"`
	Root    int     `json:"root"`
	Algo    string  `json:"algo,omitempty"` // the -algo setting measured ("" for the cost model)
	Pick    string  `json:"pick,omitempty"` // the algorithm that ran the point: the planner's pick, or "zero-copy"
	InPlace bool    `json:"in_place"`
	Iters   int64   `json:"iters"`
	Usec    float64 `json:"usec"`
	// MedUsec is the median time of one call (see medianOf), the mean
	// over ranks of each rank's median; 0 in rows saved as CSV.
	MedUsec float64 `json:"med_usec,omitempty"`
	AlgBW   float64 `json:"algbw_GBps"`
	BusBW   float64 `json:"busbw_GBps"`
	Wrong   int64   `json:"wrong"`
	// CPUs is the CPU each rank ran on at the end of the timed loop (-1
	// where not known), in rank order.
	CPUs []int `json:"cpus,omitempty"`
	// Stacked says that two ranks of one host ran on the same CPU at
	// the start or at the end of the timed loop while the host had a
	// CPU for each: the point measured them taking turns.
	Stacked bool `json:"stacked,omitempty"`
}

// csvLine is r in the peer harness's format.
func (r row) csvLine() string {
	return fmt.Sprintf("%s,%s,%d,%d,%.3f,%.4f,%.4f", r.Impl, r.Op, r.Ranks, r.Bytes, r.Usec, r.AlgBW, r.BusBW)
}

// runPerf runs the sweep on this rank. Rank 0 passes each row to sink;
// other ranks pass a nil sink. Ranks that find wrong elements print an
// ERROR line on errOut.
//
// sharedHeap says that the ranks are goroutines of one process: one
// garbage collection before each point serves them all.
func runPerf(ctx context.Context, c *hcomm.Comm, pc *perfConfig, algo string, sink func(row), errOut io.Writer, sharedHeap bool) error {
	if pc.settle > 0 {
		apart, err := settle(ctx, c, pc.settle, !sharedHeap)
		if err != nil {
			return fmt.Errorf("settling: %w", err)
		}
		if !apart && c.Rank() == 0 {
			fmt.Fprintf(errOut, "NOTE impl=%s ranks=%d: ranks of one host still shared a CPU after %v of settling; measuring anyway (see the rows' CPUs)\n",
				pc.label, c.Size(), settleMax)
		}
	}
	laps := make([]time.Duration, maxLaps)
	wrongPoints := 0
	for _, op := range pc.ops {
	sizes:
		for _, size := range pc.sizes(op) {
			for _, inPlace := range pc.modes {
				r, est, err := measure(ctx, c, pc, op, size, inPlace, errOut, sharedHeap, laps)
				if err != nil {
					return fmt.Errorf("%s %d B: %w", op, size, err)
				}
				r.Algo = algo
				if r.Wrong != 0 {
					wrongPoints++
				}
				if sink != nil {
					sink(r)
				}
				if pc.maxOp > 0 && est > pc.maxOp && size < pc.maxB {
					if c.Rank() == 0 {
						fmt.Fprintf(errOut, "NOTE impl=%s op=%s ranks=%d: %.2f s per op at %d bytes > -S %v, larger sizes skipped\n",
							pc.label, op, c.Size(), est.Seconds(), r.Bytes, pc.maxOp)
					}
					break sizes
				}
			}
		}
	}
	if wrongPoints > 0 {
		return wrongError{wrongPoints}
	}
	return nil
}

// measure runs one op at one size on this rank and returns the row, with
// time and wrong counts aggregated over the ranks, and the estimated
// duration of one call (maximum over ranks). laps holds the timed loop's
// lap times (see lapCalls); its length bounds their number.
func measure(ctx context.Context, c *hcomm.Comm, pc *perfConfig, op string, size int64, inPlace bool, errOut io.Writer, sharedHeap bool, laps []time.Duration) (row, time.Duration, error) {
	bo := benchOps[op]
	if pc.registered {
		if err := beginArena(ctx, c, size); err != nil {
			return row{}, 0, err
		}
		defer endArena(ctx, c)
	}
	b := bo.setup(c, size, inPlace, pc.dtype, pc.redop)
	// Collect the garbage of setting up (this point's buffers, the last
	// point's, Init's) now, so that no collection runs during the timed
	// loop: the collectives themselves do not allocate. Ranks that share
	// a process share its heap: once all have set up, one collection
	// serves them all (n of them at once, beside ranks polling for each
	// other, took tens of milliseconds a point).
	if sharedHeap {
		if err := c.Barrier(ctx); err != nil {
			return row{}, 0, err
		}
	}
	if !sharedHeap || c.Rank() == 0 {
		runtime.GC()
	}
	// 1. One verified iteration.
	b.fill()
	if err := c.Barrier(ctx); err != nil {
		return row{}, 0, err
	}
	zc := c.ZeroCopyCalls()
	if err := b.run(ctx); err != nil {
		return row{}, 0, err
	}
	zc = c.ZeroCopyCalls() - zc // the ranks take the path alike
	wrong := []int64{b.wrong()}
	if wrong[0] != 0 {
		fmt.Fprintf(errOut, "ERROR impl=%s op=%s ranks=%d bytes=%d rank=%d: %d wrong elements\n",
			pc.label, op, c.Size(), b.bytes, c.Rank(), wrong[0])
	}
	if err := hcomm.AllReduce(ctx, c, wrong, wrong, hcomm.Sum); err != nil {
		return row{}, 0, err
	}
	// 2. Warm-up, which also estimates the cost of one call.
	warm := pc.warmup
	if warm == 0 {
		warm = defaultWarmup(b.bytes)
	}
	if err := c.Barrier(ctx); err != nil {
		return row{}, 0, err
	}
	start := time.Now()
	for range warm {
		if err := b.run(ctx); err != nil {
			return row{}, 0, err
		}
	}
	est := []float64{time.Since(start).Seconds() / float64(warm)}
	if err := hcomm.AllReduce(ctx, c, est, est, hcomm.Max); err != nil {
		return row{}, 0, err
	}
	iters := int64(pc.iters)
	if iters == 0 {
		iters = timedIters(pc.target, est[0])
	}
	// 3. The timed loop, read on the clock once a lap of k calls (the
	// laps give the median; reading it costs no allocation).
	k := lapCalls(iters, est[0], pc.lap, len(laps))
	if err := c.Barrier(ctx); err != nil {
		return row{}, 0, err
	}
	cpu0 := topo.CurrentCPU()
	total, nlaps, err := timedLoop(ctx, b.run, iters, k, laps)
	if err != nil {
		return row{}, 0, err
	}
	cpu1 := topo.CurrentCPU()
	usec := []float64{total.Seconds() * 1e6 / float64(iters), medianOf(laps[:nlaps], k).Seconds() * 1e6}
	if err := hcomm.AllReduce(ctx, c, usec, usec, hcomm.Sum); err != nil {
		return row{}, 0, err
	}
	me := []int64{hostKey(), int64(cpu0), int64(cpu1)}
	all := make([]int64, 3*c.Size())
	if err := hcomm.AllGather(ctx, c, me, all); err != nil {
		return row{}, 0, err
	}
	r := row{Impl: pc.label, Op: op, Ranks: c.Size(), Bytes: b.bytes, Count: b.count, Type: b.typ,
		Redop: b.redop, Root: b.root, InPlace: inPlace, Iters: iters,
		Usec: usec[0] / float64(c.Size()), MedUsec: usec[1] / float64(c.Size()), Wrong: wrong[0]}
	r.CPUs, r.Stacked = rankCPUs(all, runtime.NumCPU())
	r.Stacked = r.Stacked && !sharedHeap // goroutines share CPUs by design
	dt := hcomm.DTypeUint8
	if b.redop != "" {
		dt = pc.dtype
	}
	if e, err := c.ExplainPlan(op, dt, int(b.count)); err == nil {
		r.Pick = e.Algo
	}
	if zc > 0 {
		r.Pick = "zero-copy" // registered memory: what ran, not the planner's pick
	}
	r.AlgBW, r.BusBW = bandwidths(r.Bytes, r.Usec, bo.factor(c.Size()))
	return r, time.Duration(est[0] * float64(time.Second)), nil
}

// Settling. Freshly started rank processes often run on one CPU at first,
// until the kernel's load balancer moves one of them; two ranks polling
// for each other on one CPU take 1–20 µs a call instead of 0.2–0.4. That
// can last tens to hundreds of milliseconds on a 2-CPU machine, longer
// when it is loaded, and the first points (the 8-byte ones, whose timed
// loops last a few milliseconds) measured it instead of the library. So
// the ranks exchange barriers before the first point for at least
// settleFor, and then until the ranks of each host have run on distinct
// CPUs at the end of settledRounds rounds in a row, for at most
// settleMax. Ranks that outnumber their host's CPUs, and ranks that are
// goroutines of one process, wait settleFor only.
const (
	settleFor     = 50 * time.Millisecond
	settleMax     = time.Second
	settledRounds = 2
)

// settle runs Barriers for at least d (see above), the same number on
// every rank. spread says that the ranks are processes whose CPUs tell
// whether they are settled. It reports whether the ranks ended apart (the
// same on every rank; false when settleMax ended it).
func settle(ctx context.Context, c *hcomm.Comm, d time.Duration, spread bool) (bool, error) {
	start := time.Now()
	me := []int64{hostKey(), 0}
	all := make([]int64, 2*c.Size())
	done := []int32{0}
	apart := 0 // rounds in a row that ended with the ranks apart
	for {
		for range 256 {
			if err := c.Barrier(ctx); err != nil {
				return false, err
			}
		}
		apart++
		if spread {
			// -1 where the CPU is not known: ranksApart takes such
			// ranks as apart, and settling ends settledRounds rounds
			// after d.
			me[1] = int64(topo.CurrentCPU())
			if err := hcomm.AllGather(ctx, c, me, all); err != nil {
				return false, err
			}
			if !ranksApart(all, runtime.NumCPU()) {
				apart = 0
			}
		}
		since := time.Since(start)
		done[0] = 0
		if since >= d && apart >= settledRounds {
			done[0] = 1
		} else if since >= d && since >= settleMax {
			done[0] = 2
		}
		if err := hcomm.AllReduce(ctx, c, done, done, hcomm.Max); err != nil {
			return false, err
		}
		if done[0] != 0 {
			return done[0] == 1, nil
		}
	}
}

// ranksApart reports whether no two ranks of one host ran on the same
// CPU, from each rank's (host, CPU) pair in all; a host with more ranks
// than ncpu CPUs, or a CPU not known (-1), does not count.
func ranksApart(all []int64, ncpu int) bool {
	ranks := map[int64]int{}
	for i := 0; i+1 < len(all); i += 2 {
		ranks[all[i]]++
	}
	type hostCPU struct{ host, cpu int64 }
	seen := map[hostCPU]bool{}
	for i := 0; i+1 < len(all); i += 2 {
		k := hostCPU{all[i], all[i+1]}
		if k.cpu < 0 || ranks[k.host] > ncpu {
			continue
		}
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

// hostKey names this host among the ranks' (a hash of its name).
func hostKey() int64 {
	name, _ := os.Hostname()
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64() >> 1)
}

// defaultWarmup is the number of warm-up iterations for a point of the
// given size.
func defaultWarmup(bytes int64) int {
	switch {
	case bytes <= 64<<10:
		return 20
	case bytes <= 8<<20:
		return 4
	}
	return 1
}

// timedIters is the length of a timed loop lasting about target when one
// call takes est seconds.
func timedIters(target time.Duration, est float64) int64 {
	n := target.Seconds() / max(est, 1e-9)
	return int64(min(max(n, minTimedIters), maxTimedIters))
}

// timedLoop runs iters calls of run and returns their time, and the
// times of their laps of k calls each in laps[:n]. It allocates nothing
// itself. laps must hold iters/k laps.
func timedLoop(ctx context.Context, run func(context.Context) error, iters, k int64, laps []time.Duration) (total time.Duration, n int, err error) {
	var lapEnd time.Duration
	left := k
	start := time.Now()
	for range iters {
		if err := run(ctx); err != nil {
			return 0, 0, err
		}
		if left--; left == 0 {
			left = k
			el := time.Since(start)
			laps[n] = el - lapEnd
			lapEnd = el
			n++
		}
	}
	return time.Since(start), n, nil
}

// Laps. The timed loop reads the clock after every k calls, a lap, and
// the median of one call is the median lap over k: reading the clock
// costs tens of nanoseconds, about what a small call costs, so calls
// shorter than the lap (-lap, lapMin by default) are timed in laps of
// about that long, longer ones each (k = 1). A call that lost its CPU (hundreds of microseconds to
// milliseconds under load) makes its lap an outlier, which the mean
// keeps and the median drops.
const (
	lapMin  = 2 * time.Microsecond
	maxLaps = maxTimedIters
)

// lapCalls is the number of calls of a lap of about lap for a loop of
// iters calls of est seconds each with room for nlaps laps.
func lapCalls(iters int64, est float64, lap time.Duration, nlaps int) int64 {
	k := int64(1)
	if est > 0 && est < lap.Seconds() {
		k = int64(lap.Seconds()/est + 0.5)
	}
	if nlaps > 0 && iters > k*int64(nlaps) {
		k = (iters + int64(nlaps) - 1) / int64(nlaps)
	}
	return max(min(k, iters), 1)
}

// medianOf returns the median time of one call from laps of k calls each
// (0 without laps). It sorts laps.
func medianOf(laps []time.Duration, k int64) time.Duration {
	n := len(laps)
	if n == 0 {
		return 0
	}
	slices.Sort(laps)
	m := laps[n/2]
	if n%2 == 0 {
		m = (laps[n/2-1] + laps[n/2]) / 2
	}
	return m / time.Duration(k)
}

// rankCPUs reads each rank's (host, CPU at the start, CPU at the end) in
// all: the CPUs at the end in rank order, and whether two ranks of one
// host shared a CPU at the start or at the end (see ranksApart).
func rankCPUs(all []int64, ncpu int) (cpus []int, stacked bool) {
	n := len(all) / 3
	at := [2][]int64{make([]int64, 2*n), make([]int64, 2*n)}
	cpus = make([]int, n)
	for i := range n {
		host, c0, c1 := all[3*i], all[3*i+1], all[3*i+2]
		at[0][2*i], at[0][2*i+1] = host, c0
		at[1][2*i], at[1][2*i+1] = host, c1
		cpus[i] = int(c1)
	}
	return cpus, !ranksApart(at[0], ncpu) || !ranksApart(at[1], ncpu)
}

// bandwidths returns algbw and busbw in GB/s for bytes moved in usec.
func bandwidths(bytes int64, usec, factor float64) (alg, bus float64) {
	if usec <= 0 || bytes == 0 {
		return 0, 0
	}
	alg = float64(bytes) / usec / 1e3
	return alg, alg * factor
}
