package hcomm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"
)

// rankStreams is the child mode "streams" of TestRankProcess: one rank of
// a multi-process job running asynchronous collectives ordered by events
// between a compute and a communication stream, and a Bucketer checked
// against one AllReduce per tensor.
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

	// Bucketer against unfused AllReduce, bitwise (exact values).
	rng := rand.New(rand.NewPCG(11, 0))
	specs := randomSpecs(rng, 40)
	b := NewBucketer(c, BucketConfig{Threshold: 8 << 10, Stream: comm})
	tns := make([]*anyTensor, len(specs))
	gs := make([]*Grad, len(specs))
	for i, sp := range specs {
		tns[i] = makeTensor(sp)
		g, err := registerSpec(b, fmt.Sprint("t", i), sp, tns[i])
		if err != nil {
			t.Fatal(err)
		}
		gs[i] = g
	}
	if err := b.Build(ctx); err != nil {
		t.Fatal(err)
	}
	for i, sp := range specs {
		if err := bindView(gs[i], sp, tns[i]); err != nil {
			t.Fatal(err)
		}
	}
	order := rand.New(rand.NewPCG(uint64(c.Rank()), 5)).Perm(len(specs))
	for _, i := range order {
		fillTensor(tns[i], specs[i], uint64(i*101+c.Rank()), true)
		if err := gs[i].Ready(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	for i, sp := range specs {
		want := makeTensor(sp)
		fillTensor(want, sp, uint64(i*101+c.Rank()), true)
		buf := want.bytes()
		if err := c.AllReduceBytes(ctx, buf, buf, sp.dt, Sum); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(tns[i].bytes(), buf) {
			t.Fatalf("tensor %d: bucketed result differs from AllReduce", i)
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
