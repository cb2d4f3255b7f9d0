package tcp

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/wire"
)

// TestPathPing: idle paths other than the first are pinged; a receiver
// skips the pings it finds before a stripe, and discards those that wait
// at the head of a connection no receive reads. Rank 1's pinger is held
// after one round (so its own pings stop and it discards nothing more):
// rank 0's pings pile up at rank 1 and are skipped by the next striped
// receive; rank 1's last ping is discarded by rank 0's next rounds.
func TestPathPing(t *testing.T) {
	for _, nsocks := range []int{1, 2} {
		t.Run(map[int]string{1: "nsocks=1", 2: "nsocks=2"}[nsocks], func(t *testing.T) {
			trs, _ := multiPathWorld(t, 2, nsocks, "127.0.0.1:%d", "127.0.0.2:%d")
			rounds0 := make(chan struct{}, 1)
			var armed atomic.Bool
			held, release := make(chan struct{}), make(chan struct{})
			t.Cleanup(func() { close(release) })
			for _, tr := range trs {
				tr.pingEvery = 10 * time.Millisecond
			}
			trs[0].testPinged = func(int) {
				select {
				case rounds0 <- struct{}{}:
				default:
				}
			}
			trs[1].testPinged = func(int) {
				if armed.CompareAndSwap(true, false) {
					close(held)
					<-release
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			runAll(t, trs, func(tr *Transport) error { return tr.Connect(ctx, []int{1 - tr.rank}) })
			for from := range 2 {
				sendOne(ctx, t, trs, from, from, 1<<20)
			}
			armed.Store(true)
			<-held
			// Rounds of rank 0 after rank 1's last: it pings at each
			// (once the last is acknowledged) and discards rank 1's
			// last ping.
			pr0, pr1 := trs[0].peers[1], trs[1].peers[0]
			var extra []int // positions of the connections of path 1
			for _, p := range pr1.paths {
				if p != pr1.conns[0].path {
					for _, c := range p.conns {
						extra = append(extra, c.pos)
					}
				}
			}
			for rounds := 0; ; rounds++ {
				select {
				case <-rounds0:
				case <-ctx.Done():
					t.Fatalf("rank 0's pings did not pile up at rank 1 in %d rounds", rounds)
				}
				piled := 0
				for _, pos := range extra {
					if queued(t, pr1.rview[pos].nc) >= 3*wire.FrameHeaderSize {
						piled++
					}
				}
				if rounds >= 2 && piled == len(extra) {
					break
				}
			}
			for _, pos := range extra {
				if n := queued(t, pr0.rview[pos].nc); n != 0 {
					t.Errorf("rank 0, connection %d: %d bytes queued, want rank 1's ping discarded", pos, n)
				}
			}
			for i := range 4 {
				for from := range 2 {
					sendOne(ctx, t, trs, from, 10+2*i+from, 1<<20)
				}
			}
			for r, tr := range trs {
				for _, s := range tr.Paths() {
					if s.Retired || s.Sent == 0 {
						t.Errorf("rank %d: %v", r, s)
					}
				}
			}
		})
	}
}
