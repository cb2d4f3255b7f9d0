package hcomm

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"
)

// rankStreams is the child mode "streams" of TestRankProcess: one rank of
// a multi-process job running asynchronous collectives ordered by events
// between a compute and a communication stream. (The Bucketer's
// multi-process test is in package hcomm/fusion.)
func rankStreams(t *testing.T, c *Comm) {
	ctx := context.Background()
	compute, comm := c.NewStream("compute"), c.NewStream("comm")
	defer compute.Close()
	defer comm.Close()

	// compute → event → AllReduce on comm → event → compute.
	x := make([]int64, 1000)
	var seen []int64
	for step := range 5 {
		compute.Go(func(context.Context) error {
			for i := range x {
				x[i] = int64(c.Rank()*step + i)
			}
			return nil
		})
		produced := compute.Record()
		comm.WaitEvent(produced)
		AllReduceAsync(comm, c, x, x, Sum)
		reduced := comm.Record()
		compute.WaitEvent(reduced)
		compute.Go(func(context.Context) error { seen = slices.Clone(x); return nil })
		if err := compute.Synchronize(ctx); err != nil {
			t.Fatal(err)
		}
		produced.Release()
		reduced.Release()
		n := int64(c.Size())
		for i, v := range seen {
			if want := int64(step)*n*(n-1)/2 + n*int64(i); v != want {
				t.Fatalf("step %d element %d = %d, want %d", step, i, v, want)
			}
		}
	}

}

// TestMultiProcessStreams runs rankStreams as separate processes over
// shared memory and TCP.
func TestMultiProcessStreams(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, tr := range []string{"shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			start := time.Now()
			out, err := spawnJob(t, 3, "streams", "HCOMM_TRANSPORT="+tr)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			t.Logf("%s: %v", tr, time.Since(start))
		})
	}
}
