// Command bcastlat times a small Broadcast from rank 0 two ways, on the
// same communicator: streamed, calls back to back as the peer harness
// times them (the root may run ahead of its tree, so the figure is the
// busiest rank's work per call), and dependent, each Broadcast followed by
// a 1-byte Reduce to rank 0, so that a round starts only once the previous
// Broadcast reached every rank (the figure is a Broadcast's latency plus
// the Reduce's, the same for every Broadcast algorithm). Rank 0 prints one
// line: the mean and median of each (µs). Force the Broadcast algorithm
// with HCOMM_ALGO (broadcast=binomial, broadcast=chain) to compare.
//
//	hcomm run -n 4 -x HCOMM_ALGO=broadcast=chain -- bcastlat -b 8
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/hcomm-go/hcomm"
)

func main() {
	size := flag.Int("b", 8, "Broadcast size in bytes")
	stream := flag.Int("stream", 20000, "streamed calls")
	dep := flag.Int("dep", 5000, "dependent rounds (Broadcast, then a 1-byte Reduce)")
	label := flag.String("label", "", "first word of the output line (default: the Broadcast algorithm of HCOMM_ALGO, or auto)")
	flag.Parse()
	ctx := context.Background()
	c, err := hcomm.Init(ctx, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bcastlat:", err)
		os.Exit(1)
	}
	defer c.Close()
	buf := make([]byte, *size)
	one, sum := make([]byte, 1), make([]byte, 1)
	bcast := func() error { return hcomm.Broadcast(ctx, c, buf, 0) }
	round := func() error {
		if err := bcast(); err != nil {
			return err
		}
		return hcomm.Reduce(ctx, c, one, sum, hcomm.Sum, 0)
	}
	sm, sp, err := timed(ctx, c, bcast, *stream)
	if err == nil {
		var dm, dp float64
		dm, dp, err = timed(ctx, c, round, *dep)
		if err == nil && c.Rank() == 0 {
			name := *label
			if name == "" {
				name = os.Getenv("HCOMM_ALGO")
			}
			if name == "" {
				name = "auto"
			}
			fmt.Printf("%s ranks %d bytes %d streamed mean %.2f median %.2f dependent mean %.2f median %.2f\n",
				name, c.Size(), *size, sm, sp, dm, dp)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bcastlat:", err)
		os.Exit(1)
	}
}

// timed runs f n times after a warm-up of n/10 and a Barrier, and returns
// the mean and the median call in µs on this rank.
func timed(ctx context.Context, c *hcomm.Comm, f func() error, n int) (mean, median float64, err error) {
	n = max(n, 1)
	for range n / 10 {
		if err := f(); err != nil {
			return 0, 0, err
		}
	}
	if err := c.Barrier(ctx); err != nil {
		return 0, 0, err
	}
	d := make([]time.Duration, n)
	start := time.Now()
	for i := range d {
		t := time.Now()
		if err := f(); err != nil {
			return 0, 0, err
		}
		d[i] = time.Since(t)
	}
	total := time.Since(start)
	slices.Sort(d)
	return total.Seconds() * 1e6 / float64(n), d[n/2].Seconds() * 1e6, nil
}
