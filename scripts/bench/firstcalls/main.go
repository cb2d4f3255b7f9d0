// Command firstcalls times the first collectives of a fresh job: right
// after Init, each rank runs -calls AllReduce calls of -count float32 (8 bytes by default), and rank 0
// prints one line with the time of the first -calls (in ms), the median
// call of the first 100 and of the last 100 (µs), and per rank the CPU it
// ran on at the first call, at every 1000th and at the end
// (scripts/bench/firstcalls-ab.sh alternates builds over fresh jobs).
// With -timeline B every rank also prints a line per block of B calls:
// when it started (ms into the loop), its mean and median call, its calls
// over 20 µs and the longest, the rank's CPU, and the process's minor page
// faults, voluntary and involuntary context switches and CPU time over the
// block (getrusage; about 2 faults a block of 1000 are this program's own
// record of the calls).
//
//	hcomm run -n 2 -- firstcalls -calls 20000
//	hcomm run -n 2 -- firstcalls -calls 4000 -timeline 1000
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
	flag.IntVar(&count, "count", 2, "float32 elements of each AllReduce")
	flag.IntVar(&timeline, "timeline", 0, "also print, per rank, every block of this many calls: its start (ms), mean and median call (µs), calls over 20 µs, CPU")
	flag.Parse()
	if err := run(*calls); err != nil {
		fmt.Fprintln(os.Stderr, "firstcalls:", err)
		os.Exit(1)
	}
}

var timeline, count int

func run(n int) error {
	ctx := context.Background()
	t0 := time.Now()
	c, err := hcomm.Init(ctx, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	initDur := time.Since(t0)
	send, recv := make([]float32, max(count, 1)), make([]float32, max(count, 1))
	durs := make([]time.Duration, n)
	nb := 0
	if timeline > 0 {
		nb = (n + timeline - 1) / timeline
	}
	usage := make([]usage, nb+1)
	marks := []int64{}
	start := time.Now()
	for i := range n {
		if i%1000 == 0 {
			marks = append(marks, int64(topo.CurrentCPU()))
		}
		if timeline > 0 && i%timeline == 0 {
			usage[i/timeline] = readUsage()
		}
		s := time.Now()
		if err := hcomm.AllReduce(ctx, c, send, recv, hcomm.Sum); err != nil {
			return err
		}
		durs[i] = time.Since(s)
	}
	total := time.Since(start)
	if timeline > 0 {
		usage[nb] = readUsage()
	}
	marks = append(marks, int64(topo.CurrentCPU()))
	if timeline > 0 {
		var at time.Duration
		for b := 0; b < n; b += timeline {
			blk := durs[b:min(b+timeline, n)]
			var sum time.Duration
			slow := 0
			for _, d := range blk {
				sum += d
				if d > 20*time.Microsecond {
					slow++
				}
			}
			s := slices.Clone(blk)
			slices.Sort(s)
			u0, u1 := &usage[b/timeline], &usage[b/timeline+1]
			fmt.Printf("timeline r%d block %d at_ms %.2f mean_us %.3f med_us %.3f slow %d max_us %.1f cpu %d flt %d vcsw %d ivcsw %d cpu_ms %.2f\n",
				c.Rank(), b/timeline, float64(at)/1e6, float64(sum)/float64(len(blk))/1e3, float64(s[len(s)/2])/1e3, slow, float64(s[len(s)-1])/1e3, marks[min(b/1000, len(marks)-1)],
				u1.minflt-u0.minflt, u1.nvcsw-u0.nvcsw, u1.nivcsw-u0.nivcsw, float64(u1.cpu-u0.cpu)/1e6)
			at += sum
		}
	}
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
