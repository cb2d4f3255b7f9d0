//go:build linux

package shm

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaitBudgetAfterLocalCopy checks that a wait does not count, in its
// polling budget, the time another goroutine of its rank spent copying: a
// receive polls while the rank copies a large message (as a step's send
// on a worker does), the copy takes far longer than the budget by the
// wait's clock, and the message the receive waits for comes after the
// copy. With GOMAXPROCS 1 the receive must still be polling then, not
// asleep. The clock is the test's: nothing depends on the machine's speed
// or load.
func TestWaitBudgetAfterLocalCopy(t *testing.T) {
	const big = 512 << 10 // two ring slots, or one single-copy read
	for _, tc := range []struct {
		name, variant string
		read          bool // the copy is a single-copy read of rank 1's message, else a send to rank 1
		procs         int  // GOMAXPROCS
		sleeps        int64
	}{
		{"send through slots", "nocma", false, 1, 0},
		{"single-copy read", "default", true, 1, 0},
		// With more Ps the copy ran beside the wait, which polled all
		// along: its budget is spent.
		{"send through slots, 2 Ps", "nocma", false, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tc.procs))
			trs := newLocalGroup(t, 3, tc.variant)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			fpBig, fpSmall := fpFor(1, big), fpFor(2, 8)
			src, dst := make([]byte, big), make([]byte, big)
			fill(src, 3)
			peerDone := make(chan error, 1)
			if tc.read {
				// Rank 1 posts its message before the wait starts, so
				// that rank 0's read of it does not wait.
				go func() { peerDone <- trs[1].Send(ctx, 0, &fpBig, src) }()
				for r := &trs[0].peers[1].in; atomic.LoadUint32(r.head) == 0; {
					time.Sleep(time.Millisecond) // polls a condition; acts only once it holds
				}
			}
			localCopy := func() error {
				errc := make(chan error, 1)
				go func() {
					if tc.read {
						errc <- trs[0].Recv(ctx, 1, &fpBig, dst)
					} else {
						errc <- trs[0].Send(ctx, 1, &fpBig, src)
					}
				}()
				return <-errc
			}

			base := time.Now()
			var looks, sleeps atomic.Int64
			var copyErr error
			polling := make(chan struct{}) // the wait looked after the copy, or slept
			var once sync.Once
			trs[0].hooks = &waitHooks{
				now: func() time.Time {
					switch looks.Add(1) {
					case 1:
						return base
					case 2:
						// The rank's other goroutine copied while this
						// one yielded, for a second by this clock.
						copyErr = localCopy()
					case 3:
						once.Do(func() { close(polling) })
					}
					return base.Add(time.Second)
				},
				sleep: func() {
					sleeps.Add(1)
					once.Do(func() { close(polling) })
				},
			}
			waitDone := make(chan error, 1)
			small := make([]byte, 8)
			go func() { waitDone <- trs[0].Recv(ctx, 2, &fpSmall, small) }()
			<-polling
			if err := trs[2].Send(ctx, 0, &fpSmall, make([]byte, 8)); err != nil {
				t.Fatalf("Send from rank 2: %v", err)
			}
			if err := <-waitDone; err != nil {
				t.Fatalf("waiting Recv: %v", err)
			}
			trs[0].hooks = nil
			if copyErr != nil {
				t.Fatalf("copy during the wait: %v", copyErr)
			}
			if tc.read {
				if err := <-peerDone; err != nil {
					t.Fatalf("Send from rank 1: %v", err)
				}
			} else if err := trs[1].Recv(ctx, 0, &fpBig, dst); err != nil {
				t.Fatalf("Recv on rank 1: %v", err)
			}
			if err := check(dst, 3); err != nil {
				t.Errorf("copied message: %v", err)
			}
			if n := sleeps.Load(); n != tc.sleeps {
				t.Errorf("the wait slept %d times, want %d (GOMAXPROCS %d)", n, tc.sleeps, tc.procs)
			}
			if n := looks.Load(); tc.sleeps == 0 && n < 3 {
				t.Errorf("the wait read its clock %d times, want at least 3", n)
			}
		})
	}
}
