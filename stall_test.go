package hcomm

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Ranks calling different collectives fail with ErrMismatch at every rank
// count, including those where no message ever carries one call's
// fingerprint to a rank in the other (issue 11 item 10). Each variant
// differs in one part of the call on one rank; every rank's first error
// must be a mismatch (a rank whose odd call completed learns it at its
// next call).
func TestMismatchEveryRankCount(t *testing.T) {
	ctx := context.Background()
	variants := []struct {
		name string
		odd  func(c *Comm, x []float32) error
	}{
		{"op", func(c *Comm, x []float32) error { return Broadcast(ctx, c, x, 0) }},
		{"type", func(c *Comm, x []float32) error { y := make([]int32, len(x)); return AllReduce(ctx, c, y, y, Sum) }},
		{"count", func(c *Comm, x []float32) error { return AllReduce(ctx, c, x[:1], x[:1], Sum) }},
		{"reduce op", func(c *Comm, x []float32) error { return AllReduce(ctx, c, x, x, Max) }},
		{"root", func(c *Comm, x []float32) error { return Reduce(ctx, c, x, x, Sum, c.Size()-1) }},
	}
	sizes := []int{2, 3, 4, 5, 7, 8, 16}
	if !testing.Short() {
		sizes = append(sizes, 33, 64)
	}
	for _, n := range sizes {
		for _, v := range variants {
			t.Run(fmt.Sprintf("n=%d/%s", n, v.name), func(t *testing.T) {
				comms := newLocal(t, n, &Config{Timeout: 30 * time.Second})
				oddRank := n / 2
				errs := par(comms, func(c *Comm) error {
					x := make([]float32, 4)
					var err error
					switch {
					case c.Rank() == oddRank:
						err = v.odd(c, x)
					case v.name == "root":
						err = Reduce(ctx, c, x, x, Sum, 0)
					default:
						err = AllReduce(ctx, c, x, x, Sum)
					}
					if err == nil {
						err = c.Barrier(ctx)
					}
					return err
				})
				for r, err := range errs {
					if !errors.Is(err, ErrMismatch) {
						t.Errorf("rank %d: %v, want ErrMismatch", r, err)
					}
				}
			})
		}
	}
}
