package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hcomm-go/hcomm"
)

// perfConfig is what one perf run measures.
type perfConfig struct {
	n        int
	ops      []string
	minB     int64
	maxB     int64
	factor   int64
	iters    int
	warmup   int
	target   time.Duration
	algo     string
	chunk    int
	inPlace  bool
	csv      bool
	json     bool
	label    string
	local    bool
	trans    string
}

var perfOps = []string{"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "barrier"}

func perf(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	var pc perfConfig
	var ops, minB, maxB string
	fs.IntVar(&pc.n, "n", 2, "number of ranks (processes started through hcomm run, or goroutines with -local)")
	fs.BoolVar(&pc.local, "local", false, "run the ranks as goroutines of this process instead of separate processes")
	fs.StringVar(&pc.trans, "transport", "", "force the transport between processes: shm or tcp (HCOMM_TRANSPORT)")
	fs.StringVar(&ops, "op", "allreduce", "collective(s), comma-separated, or all: "+strings.Join(perfOps, ","))
	fs.StringVar(&minB, "b", "8", "smallest size (bytes; K/M/G suffixes)")
	fs.StringVar(&maxB, "e", "64M", "largest size")
	fs.Int64Var(&pc.factor, "f", 4, "size multiplication factor between rows")
	fs.IntVar(&pc.iters, "iters", 0, "timed iterations per size (0: as many as fit in -T)")
	fs.IntVar(&pc.warmup, "warmup", 0, "warm-up iterations per size (0: 20 up to 64 KiB, 4 up to 8 MiB, else 1)")
	fs.DurationVar(&pc.target, "T", 200*time.Millisecond, "target duration of the timed loop per size when -iters is 0")
	fs.StringVar(&pc.algo, "algo", "", "force algorithms, HCOMM_ALGO syntax (allreduce=ring,...)")
	fs.IntVar(&pc.chunk, "chunk", 0, "pipelining chunk bytes (0: HCOMM_BUFFSIZE or default)")
	fs.BoolVar(&pc.inPlace, "inplace", false, "run in place instead of out of place")
	fs.BoolVar(&pc.csv, "csv", false, "print rows as impl,op,ranks,bytes,usec,algbw_GBps,busbw_GBps")
	fs.BoolVar(&pc.json, "json", false, "print one JSON object per row")
	fs.StringVar(&pc.label, "label", "hcomm", "implementation label in -csv/-json rows")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if pc.n < 1 {
		return fmt.Errorf("-n %d: need at least one rank", pc.n)
	}
	var err error
	if pc.minB, err = parseSize(minB); err != nil {
		return err
	}
	if pc.maxB, err = parseSize(maxB); err != nil {
		return err
	}
	if pc.factor < 2 {
		return fmt.Errorf("-f %d: need at least 2", pc.factor)
	}
	if ops == "all" {
		pc.ops = perfOps
	} else {
		for _, op := range strings.Split(ops, ",") {
			op = strings.ToLower(strings.TrimSpace(op))
			if _, ok := benchOps[op]; !ok {
				return fmt.Errorf("-op %q: want one of %s or all", op, strings.Join(perfOps, ","))
			}
			pc.ops = append(pc.ops, op)
		}
	}
	ctx := context.Background()
	cfg := &hcomm.Config{Algo: pc.algo, ChunkBytes: pc.chunk, Timeout: -1}
	switch {
	case os.Getenv("HCOMM_RANK") != "":
		// A rank of a job `hcomm perf` (or another launcher) started.
		c, err := hcomm.Init(ctx, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		out := io.Discard
		if c.Rank() == 0 {
			out = stdout
		}
		return runPerf(ctx, c, &pc, out, "processes")
	case !pc.local && pc.n > 1:
		// Start pc.n copies of this command as the ranks of a job.
		self, err := os.Executable()
		if err != nil {
			return err
		}
		if pc.trans != "" {
			os.Setenv("HCOMM_TRANSPORT", pc.trans)
		}
		argv := append([]string{"-n", strconv.Itoa(pc.n), "--", self, "perf"}, args...)
		if code := runCmd(argv, stdout, stderr); code != 0 {
			return fmt.Errorf("the job failed (status %d)", code)
		}
		return nil
	}
	comms, err := hcomm.NewLocal(ctx, pc.n, cfg)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, pc.n)
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			out := io.Discard
			if c.Rank() == 0 {
				out = stdout
			}
			errs[c.Rank()] = runPerf(ctx, c, &pc, out, "goroutines")
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func parseSize(s string) (int64, error) {
	s = strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, s[:len(s)-1]
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}

// row is one measured size.
type row struct {
	Impl   string  `json:"impl"`
	Op     string  `json:"op"`
	Ranks  int     `json:"ranks"`
	Bytes  int64   `json:"bytes"`
	Count  int64   `json:"count"`
	Type   string  `json:"type"`
	Usec   float64 `json:"usec"`
	AlgBW  float64 `json:"algbw_GBps"`
	BusBW  float64 `json:"busbw_GBps"`
	Wrong  int64   `json:"wrong"`
	InPlac bool    `json:"in_place"`
}

func runPerf(ctx context.Context, c *hcomm.Comm, pc *perfConfig, out io.Writer, what string) error {
	if pc.csv {
		fmt.Fprintln(out, "impl,op,ranks,bytes,usec,algbw_GBps,busbw_GBps")
	} else if !pc.json {
		fmt.Fprintf(out, "# hcomm perf: %d ranks (%s), %s\n", c.Size(), what, map[bool]string{true: "in place", false: "out of place"}[pc.inPlace])
		fmt.Fprintf(out, "# %12s %12s %8s %14s %10s %10s %8s\n", "size(B)", "count", "type", "op", "time(us)", "algbw", "busbw #wrong")
	}
	for _, op := range pc.ops {
		sizes := []int64{pc.minB}
		for s := pc.minB * pc.factor; s < pc.maxB; s *= pc.factor {
			sizes = append(sizes, s)
		}
		if pc.maxB > pc.minB {
			sizes = append(sizes, pc.maxB)
		}
		if op == "barrier" {
			sizes = []int64{0}
		}
		for _, size := range sizes {
			r, err := measure(ctx, c, pc, op, size)
			if err != nil {
				return fmt.Errorf("%s %d B: %w", op, size, err)
			}
			switch {
			case pc.csv:
				fmt.Fprintf(out, "%s,%s,%d,%d,%.3f,%.4f,%.4f\n", r.Impl, r.Op, r.Ranks, r.Bytes, r.Usec, r.AlgBW, r.BusBW)
			case pc.json:
				b, _ := json.Marshal(r)
				fmt.Fprintln(out, string(b))
			default:
				fmt.Fprintf(out, "  %12d %12d %8s %14s %10.2f %10.3f %8.3f %6d\n", r.Bytes, r.Count, r.Type, r.Op, r.Usec, r.AlgBW, r.BusBW, r.Wrong)
			}
		}
	}
	return nil
}

// benchOp sets up buffers for one op at one size and runs it.
type benchOp struct {
	// setup returns the reported bytes, element count, type name, the call,
	// a function filling the inputs and a checker counting wrong elements.
	setup func(c *hcomm.Comm, size int64, inPlace bool) bench
	// factor is the nccl-tests bus bandwidth factor.
	factor func(n int) float64
}

type bench struct {
	bytes, count int64
	typ          string
	run          func(ctx context.Context) error
	fill         func()
	wrong        func() int64
}

func ring(n int) float64 { return float64(n-1) / float64(n) }

var benchOps = map[string]benchOp{
	"allreduce":     {setupAllReduce, func(n int) float64 { return 2 * ring(n) }},
	"allgather":     {setupAllGather, ring},
	"reducescatter": {setupReduceScatter, ring},
	"broadcast":     {setupBroadcast, func(int) float64 { return 1 }},
	"reduce":        {setupReduce, func(int) float64 { return 1 }},
	"alltoall":      {setupAllToAll, ring},
	"barrier":       {setupBarrier, func(int) float64 { return 0 }},
}

// pattern is rank r's input element i: small integers, so float sums are
// exact in any order.
func pattern(r, i int) float32 { return float32((r+1)*(i%7+1)) - 8 }

func patternByte(r, i int) byte { return byte(r*31 + i*7 + 1) }

func setupAllReduce(c *hcomm.Comm, size int64, inPlace bool) bench {
	n := max(size/4, 1)
	send, recv := make([]float32, n), make([]float32, n)
	if inPlace {
		recv = send
	}
	fill := func() {
		for i := range send {
			send[i] = pattern(c.Rank(), i)
		}
	}
	return bench{bytes: n * 4, count: n, typ: "float32",
		run:  func(ctx context.Context) error { return hcomm.AllReduce(ctx, c, send, recv, hcomm.Sum) },
		fill: fill,
		wrong: func() (w int64) {
			for i, v := range recv {
				var want float32
				for r := 0; r < c.Size(); r++ {
					want += pattern(r, i)
				}
				if v != want {
					w++
				}
			}
			return w
		}}
}

func setupReduce(c *hcomm.Comm, size int64, inPlace bool) bench {
	b := setupAllReduce(c, size, inPlace)
	n := b.count
	send := make([]float32, n)
	var recv []float32
	if c.Rank() == 0 {
		recv = make([]float32, n)
		if inPlace {
			recv = send
		}
	}
	b.fill = func() {
		for i := range send {
			send[i] = pattern(c.Rank(), i)
		}
	}
	b.run = func(ctx context.Context) error { return hcomm.Reduce(ctx, c, send, recv, hcomm.Sum, 0) }
	b.wrong = func() (w int64) {
		for i, v := range recv {
			var want float32
			for r := 0; r < c.Size(); r++ {
				want += pattern(r, i)
			}
			if v != want {
				w++
			}
		}
		return w
	}
	return b
}

func setupAllGather(c *hcomm.Comm, size int64, inPlace bool) bench {
	per := max(size/int64(c.Size()), 1)
	recv := make([]byte, per*int64(c.Size()))
	send := make([]byte, per)
	if inPlace {
		send = recv[int64(c.Rank())*per : int64(c.Rank()+1)*per]
	}
	return bench{bytes: per * int64(c.Size()), count: per, typ: "uint8",
		run: func(ctx context.Context) error { return hcomm.AllGather(ctx, c, send, recv) },
		fill: func() {
			for i := range send {
				send[i] = patternByte(c.Rank(), i)
			}
		},
		wrong: func() (w int64) {
			for i, v := range recv {
				if v != patternByte(i/int(per), i%int(per)) {
					w++
				}
			}
			return w
		}}
}

func setupReduceScatter(c *hcomm.Comm, size int64, inPlace bool) bench {
	n := int64(c.Size())
	per := max(size/4/n, 1)
	send := make([]float32, per*n)
	recv := make([]float32, per)
	if inPlace {
		recv = send[int64(c.Rank())*per : int64(c.Rank()+1)*per]
	}
	return bench{bytes: per * n * 4, count: per, typ: "float32",
		run: func(ctx context.Context) error { return hcomm.ReduceScatter(ctx, c, send, recv, hcomm.Sum) },
		fill: func() {
			for i := range send {
				send[i] = pattern(c.Rank(), i)
			}
		},
		wrong: func() (w int64) {
			base := c.Rank() * int(per)
			for i, v := range recv {
				var want float32
				for r := 0; r < c.Size(); r++ {
					want += pattern(r, base+i)
				}
				if v != want {
					w++
				}
			}
			return w
		}}
}

func setupBroadcast(c *hcomm.Comm, size int64, _ bool) bench {
	n := max(size, 1)
	buf := make([]byte, n)
	return bench{bytes: n, count: n, typ: "uint8",
		run: func(ctx context.Context) error { return hcomm.Broadcast(ctx, c, buf, 0) },
		fill: func() {
			for i := range buf {
				buf[i] = 0
				if c.Rank() == 0 {
					buf[i] = patternByte(0, i)
				}
			}
		},
		wrong: func() (w int64) {
			for i, v := range buf {
				if v != patternByte(0, i) {
					w++
				}
			}
			return w
		}}
}

func setupAllToAll(c *hcomm.Comm, size int64, inPlace bool) bench {
	n := int64(c.Size())
	per := max(size/n, 1)
	send := make([]byte, per*n)
	recv := make([]byte, per*n)
	if inPlace {
		recv = send
	}
	return bench{bytes: per * n, count: per, typ: "uint8",
		run: func(ctx context.Context) error { return hcomm.AllToAll(ctx, c, send, recv) },
		fill: func() {
			for i := range send {
				send[i] = patternByte(c.Rank(), i)
			}
		},
		wrong: func() (w int64) {
			for i, v := range recv {
				src, j := i/int(per), i%int(per)
				if v != patternByte(src, c.Rank()*int(per)+j) {
					w++
				}
			}
			return w
		}}
}

func setupBarrier(c *hcomm.Comm, _ int64, _ bool) bench {
	return bench{typ: "-",
		run:   func(ctx context.Context) error { return c.Barrier(ctx) },
		fill:  func() {},
		wrong: func() int64 { return 0 }}
}

// measure runs one op at one size on this rank and returns the row, with
// time and wrong counts aggregated over the ranks (time is the mean of the
// per-rank averages, as nccl-tests reports).
func measure(ctx context.Context, c *hcomm.Comm, pc *perfConfig, op string, size int64) (row, error) {
	bo := benchOps[op]
	b := bo.setup(c, size, pc.inPlace)
	// One verified iteration.
	b.fill()
	if err := b.run(ctx); err != nil {
		return row{}, err
	}
	wrong := []int64{b.wrong()}
	warm := pc.warmup
	if warm == 0 {
		switch {
		case b.bytes <= 64<<10:
			warm = 20
		case b.bytes <= 8<<20:
			warm = 4
		default:
			warm = 1
		}
	}
	start := time.Now()
	for i := 0; i < warm; i++ {
		if err := b.run(ctx); err != nil {
			return row{}, err
		}
	}
	// Rank 0 decides the iteration count so every rank runs the same loop.
	iters := []int64{int64(pc.iters)}
	if iters[0] <= 0 {
		per := time.Since(start) / time.Duration(warm)
		iters[0] = min(max(int64(pc.target/max(per, time.Nanosecond)), 3), 20000)
	}
	if err := hcomm.Broadcast(ctx, c, iters, 0); err != nil {
		return row{}, err
	}
	start = time.Now()
	for i := int64(0); i < iters[0]; i++ {
		if err := b.run(ctx); err != nil {
			return row{}, err
		}
	}
	usec := []float64{time.Since(start).Seconds() * 1e6 / float64(iters[0])}
	if err := hcomm.AllReduce(ctx, c, usec, usec, hcomm.Sum); err != nil {
		return row{}, err
	}
	if err := hcomm.AllReduce(ctx, c, wrong, wrong, hcomm.Sum); err != nil {
		return row{}, err
	}
	r := row{Impl: pc.label, Op: op, Ranks: c.Size(), Bytes: b.bytes, Count: b.count, Type: b.typ,
		Usec: usec[0] / float64(c.Size()), Wrong: wrong[0], InPlac: pc.inPlace}
	if r.Usec > 0 {
		r.AlgBW = float64(r.Bytes) / r.Usec / 1e3
		r.BusBW = r.AlgBW * bo.factor(c.Size())
	}
	return r, nil
}
