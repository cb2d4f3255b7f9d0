package fusion_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/hcomm-go/hcomm"
	"github.com/hcomm-go/hcomm/fusion"
)

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
			b := fusion.NewBucketer(c, fusion.Config{Op: hcomm.Avg})
			defer b.Close()
			r := float64(c.Rank())
			w1 := []float64{r, r} // copied in and out
			g1, _ := fusion.Register(b, "w1", w1)
			g2, _ := fusion.RegisterView[float64](b, "w2", 2) // lives in the fusion buffer
			g3, _ := fusion.Register(b, "steps", []int32{10}) // another type: another bucket
			if err := b.Build(ctx); err != nil {
				panic(err)
			}
			w2, _ := fusion.View[float64](g2)
			w2[0], w2[1] = 10*r, 20*r
			order := []*fusion.Grad{g1, g2, g3}
			if c.Rank() == 1 {
				order = []*fusion.Grad{g3, g2, g1}
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
