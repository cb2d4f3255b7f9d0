// Command firstcalls times the first collectives of a fresh job: right
// after Init, each rank runs -calls AllReduce calls of 8 bytes, and rank 0
// prints one line with the time of the first -calls (in ms), the median
// call of the first 100 and of the last 100 (µs), and per rank the CPU it
// ran on at the first call, at every 1000th and at the end
// (scripts/bench/firstcalls-ab.sh alternates builds over fresh jobs).
//
//	hcomm run -n 2 -- firstcalls -calls 20000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hcomm-go/hcomm"
	"github.com/hcomm-go/hcomm/internal/topo"
)

func main() {
	calls := flag.Int("calls", 20000, "collectives timed from the start")
	flag.Parse()
	if err := run(*calls); err != nil {
		fmt.Fprintln(os.Stderr, "firstcalls:", err)
		os.Exit(1)
	}
}

func run(n int) error {
	ctx := context.Background()
	t0 := time.Now()
	c, err := hcomm.Init(ctx, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	initDur := time.Since(t0)
	send, recv := []float32{1, 2}, []float32{0, 0}
	durs := make([]time.Duration, n)
	marks := []int64{}
	start := time.Now()
	for i := range n {
		if i%1000 == 0 {
			marks = append(marks, int64(topo.CurrentCPU()))
		}
		s := time.Now()
		if err := hcomm.AllReduce(ctx, c, send, recv, hcomm.Sum); err != nil {
			return err
		}
		durs[i] = time.Since(s)
	}
	total := time.Since(start)
	marks = append(marks, int64(topo.CurrentCPU()))
	all := make([]int64, len(marks)*c.Size())
	if err := hcomm.AllGather(ctx, c, marks, all); err != nil {
		return err
	}
	if c.Rank() != 0 {
		return nil
	}
	med := func(d []time.Duration) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[len(d)/2]) / 1e3
	}
	tail := max(n-100, 0)
	var cpus strings.Builder
	for r := range c.Size() {
		fmt.Fprintf(&cpus, " r%d:", r)
		for _, v := range all[r*len(marks) : (r+1)*len(marks)] {
			fmt.Fprintf(&cpus, "%d", v)
		}
	}
	fmt.Printf("firstcalls n=%d init_ms %.1f total_ms %.2f first100_us %.3f last100_us %.3f cpus%s\n",
		n, float64(initDur)/1e6, float64(total)/1e6, med(durs[:min(100, n)]), med(durs[tail:]), cpus.String())
	return nil
}
