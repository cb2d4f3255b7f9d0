package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime"
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
	AlgBW   float64 `json:"algbw_GBps"`
	BusBW   float64 `json:"busbw_GBps"`
	Wrong   int64   `json:"wrong"`
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
		if err := settle(ctx, c, pc.settle, !sharedHeap); err != nil {
			return fmt.Errorf("settling: %w", err)
		}
	}
	wrongPoints := 0
	for _, op := range pc.ops {
	sizes:
		for _, size := range pc.sizes(op) {
			for _, inPlace := range pc.modes {
				r, est, err := measure(ctx, c, pc, op, size, inPlace, errOut, sharedHeap)
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
// duration of one call (maximum over ranks).
func measure(ctx context.Context, c *hcomm.Comm, pc *perfConfig, op string, size int64, inPlace bool, errOut io.Writer, sharedHeap bool) (row, time.Duration, error) {
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
	// 3. The timed loop.
	if err := c.Barrier(ctx); err != nil {
		return row{}, 0, err
	}
	start = time.Now()
	for range iters {
		if err := b.run(ctx); err != nil {
			return row{}, 0, err
		}
	}
	usec := []float64{time.Since(start).Seconds() * 1e6 / float64(iters)}
	if err := hcomm.AllReduce(ctx, c, usec, usec, hcomm.Sum); err != nil {
		return row{}, 0, err
	}
	r := row{Impl: pc.label, Op: op, Ranks: c.Size(), Bytes: b.bytes, Count: b.count, Type: b.typ,
		Redop: b.redop, Root: b.root, InPlace: inPlace, Iters: iters,
		Usec: usec[0] / float64(c.Size()), Wrong: wrong[0]}
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
// whether they are settled.
func settle(ctx context.Context, c *hcomm.Comm, d time.Duration, spread bool) error {
	start := time.Now()
	me := []int64{hostKey(), 0}
	all := make([]int64, 2*c.Size())
	done := []int32{0}
	apart := 0 // rounds in a row that ended with the ranks apart
	for {
		for range 256 {
			if err := c.Barrier(ctx); err != nil {
				return err
			}
		}
		apart++
		if spread {
			// -1 where the CPU is not known: ranksApart takes such
			// ranks as apart, and settling ends settledRounds rounds
			// after d.
			me[1] = int64(topo.CurrentCPU())
			if err := hcomm.AllGather(ctx, c, me, all); err != nil {
				return err
			}
			if !ranksApart(all, runtime.NumCPU()) {
				apart = 0
			}
		}
		since := time.Since(start)
		done[0] = 0
		if since >= d && (apart >= settledRounds || since >= settleMax) {
			done[0] = 1
		}
		if err := hcomm.AllReduce(ctx, c, done, done, hcomm.Max); err != nil {
			return err
		}
		if done[0] != 0 {
			return nil
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

// bandwidths returns algbw and busbw in GB/s for bytes moved in usec.
func bandwidths(bytes int64, usec, factor float64) (alg, bus float64) {
	if usec <= 0 || bytes == 0 {
		return 0, 0
	}
	alg = float64(bytes) / usec / 1e3
	return alg, alg * factor
}
