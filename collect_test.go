package hcomm

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"
)

// collected reports whether every pointer of ws has been collected,
// collecting garbage until they are or until ctx ends (a closed
// communicator's goroutines may take a moment to return).
func collected(ctx context.Context, ws []weak.Pointer[Comm]) bool {
	for {
		runtime.GC()
		live := 0
		for _, w := range ws {
			if w.Value() != nil {
				live++
			}
		}
		if live == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestClosedCommCollected: a closed communicator is garbage once the
// program drops it, while the communicators it was made with (NewLocal's
// other ranks, a Split's parent) are still in use: neither the per-call
// deadline's timer (armed by every collective, Send and Recv under the
// default timeout) nor the stall check's record of NewLocal's and
// Split's communicators keeps it.
func TestClosedCommCollected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	comms, err := NewLocal(ctx, 3, &Config{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	var (
		ws []weak.Pointer[Comm]
		wg sync.WaitGroup
		mu sync.Mutex
	)
	keep := func(c *Comm) {
		mu.Lock()
		ws = append(ws, weak.Make(c))
		mu.Unlock()
	}
	for r, c := range comms {
		wg.Go(func() {
			b := []float32{1, 2, 3}
			if err := AllReduce(ctx, c, b, b, Sum); err != nil {
				t.Error(err)
				return
			}
			sub, err := c.Split(ctx, r%2, r)
			if err != nil {
				t.Error(err)
				return
			}
			if err := AllReduce(ctx, sub, b, b, Sum); err != nil {
				t.Error(err)
			}
			if sub.Size() == 2 { // ranks 0 and 2: a Send and a Recv
				x := []int32{int32(r)}
				if sub.Rank() == 0 {
					err = Send(ctx, sub, x, 1, 0)
				} else {
					err = Recv(ctx, sub, x, 0, 0)
				}
				if err != nil {
					t.Error(err)
				}
			}
			keep(sub)
			sub.Close()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Rank 2 of the parent closes too; ranks 0 and 1 stay open.
	keep(comms[2])
	comms[2].Close()
	comms[2] = nil
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !collected(wctx, ws) {
		for _, w := range ws {
			if c := w.Value(); c != nil {
				t.Errorf("communicator %s rank %d of %d still reachable after Close and 10s of garbage collections", c.id, c.rank, c.size)
			}
		}
	}
	runtime.KeepAlive(comms[:2])
}
