package hcomm_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/hcomm-go/hcomm"
)

// A compute stream produces a gradient, the communication stream reduces
// it once an event says it is ready, and the compute stream uses the result
// once the communication stream's event says it is reduced. The caller
// only enqueues; nothing blocks until Synchronize.
func ExampleStream() {
	ctx := context.Background()
	comms, err := hcomm.NewLocal(ctx, 2, nil)
	if err != nil {
		panic(err)
	}
	results := make([][]float32, 2)
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			compute, comm := c.NewStream("compute"), c.NewStream("comm")
			defer compute.Close()
			defer comm.Close()

			grad := make([]float32, 3)
			compute.Go(func(context.Context) error { // "backward pass"
				for i := range grad {
					grad[i] = float32(c.Rank() + i)
				}
				return nil
			})
			ready := compute.Record()
			comm.WaitEvent(ready)
			hcomm.AllReduceAsync(comm, c, grad, grad, hcomm.Sum)
			reduced := comm.Record()
			compute.WaitEvent(reduced)
			compute.Go(func(context.Context) error { // "optimizer step"
				results[c.Rank()] = append([]float32(nil), grad...)
				return nil
			})
			if err := compute.Synchronize(ctx); err != nil {
				panic(err)
			}
			ready.Release()
			reduced.Release()
		}()
	}
	wg.Wait()
	fmt.Println(results[0], results[1])
	// Output: [1 3 5] [1 3 5]
}

// Three gradients fused into buckets and averaged across two ranks, marked
// ready in a different order on each rank.
func ExampleBucketer() {
	ctx := context.Background()
	comms, err := hcomm.NewLocal(ctx, 2, nil)
	if err != nil {
		panic(err)
	}
	results := make([]string, 2)
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			b := hcomm.NewBucketer(c, hcomm.BucketConfig{Op: hcomm.Avg})
			defer b.Close()
			r := float64(c.Rank())
			w1 := []float64{r, r} // copied in and out
			g1, _ := hcomm.Register(b, "w1", w1)
			g2, _ := hcomm.RegisterView[float64](b, "w2", 2) // lives in the fusion buffer
			g3, _ := hcomm.Register(b, "steps", []int32{10}) // another type: another bucket
			if err := b.Build(ctx); err != nil {
				panic(err)
			}
			w2, _ := hcomm.View[float64](g2)
			w2[0], w2[1] = 10*r, 20*r
			order := []*hcomm.Grad{g1, g2, g3}
			if c.Rank() == 1 {
				order = []*hcomm.Grad{g3, g2, g1}
			}
			for _, g := range order {
				if err := g.Ready(); err != nil {
					panic(err)
				}
			}
			if err := b.Wait(ctx); err != nil {
				panic(err)
			}
			results[c.Rank()] = fmt.Sprintf("%v %v in %d buckets", w1, w2, len(b.Buckets()))
		}()
	}
	wg.Wait()
	fmt.Println(results[0])
	fmt.Println(results[1])
	// Output:
	// [0.5 0.5] [5 10] in 2 buckets
	// [0.5 0.5] [5 10] in 2 buckets
}
