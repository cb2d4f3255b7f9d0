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
