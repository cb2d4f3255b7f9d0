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
				// No path stops: a loaded machine can leave a
				// loopback ping unacknowledged for a second, and
				// a path retired then is pinged no more.
				tr.stallAfter = 8 * time.Second
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

// TestPingRetireTold: a path rank 0's idle ping finds stalled is retired
// there, and rank 1, whose own pings on it go through, learns it from
// rank 0's next message and retires its sends there too (WARN "peer
// retired a path"), rather than waiting for a stall of its own. Rank 1
// reads the notice while it still collects the striped message before it
// (sent, acknowledged by its host, not yet received), which must take it
// for that message's end, not for a repair. Then the path is dialed again
// and the pair goes on both ways.
func TestPingRetireTold(t *testing.T) {
	for _, nsocks := range []int{1, 2} {
		t.Run(map[int]string{1: "nsocks=1", 2: "nsocks=2"}[nsocks], func(t *testing.T) {
			trs, logs := multiPathWorld(t, 2, nsocks, "127.0.0.1:%d", "127.0.0.2:%d")
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("logs:\n%s", logs.String())
				}
			})
			var armed, fired atomic.Bool
			rounds0 := make(chan struct{}, 1)
			for _, tr := range trs {
				tr.pingEvery = 10 * time.Millisecond
				// Only testPingStall stops a path: a loaded machine
				// can leave a loopback ping unacknowledged for a
				// second, and rank 1 would then find path 1 stopped
				// on its own.
				tr.stallAfter = 8 * time.Second
			}
			trs[0].testPingStall = func(c *conn) bool {
				if c.path.idx == 1 && armed.CompareAndSwap(true, false) {
					fired.Store(true)
					return true
				}
				return false
			}
			trs[0].testPinged = func(int) {
				select {
				case rounds0 <- struct{}{}:
				default:
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			runAll(t, trs, func(tr *Transport) error { return tr.Connect(ctx, []int{1 - tr.rank}) })
			seq := 0
			for from := range 2 {
				sendOne(ctx, t, trs, from, seq, 1<<20)
				seq++
			}
			// A striped message rank 1 has not received yet.
			striped := seq
			if err := sendMsg(ctx, trs[0], 1, striped, stripeMin); err != nil {
				t.Fatal(err)
			}
			seq++
			armed.Store(true)
			for !fired.Load() {
				select {
				case <-rounds0:
				case <-ctx.Done():
					t.Fatal("rank 0's pinger did not take path 1 as stalled")
				}
			}
			// The round that retired it has ended.
			select {
			case <-rounds0:
			case <-ctx.Done():
				t.Fatal("rank 0's pinger stopped")
			}
			if !logHas(logs.String(), "path stopped", "rank=0", "path=1 ") {
				t.Fatal("rank 0 did not retire path 1")
			}
			small := seq
			if err := sendMsg(ctx, trs[0], 1, small, 100); err != nil {
				t.Fatal(err)
			}
			seq++
			if err := recvMsg(ctx, trs[1], 0, striped, stripeMin); err != nil {
				t.Fatal(err)
			}
			if err := recvMsg(ctx, trs[1], 0, small, 100); err != nil {
				t.Fatal(err)
			}
			if !logHas(logs.String(), "peer retired a path", "rank=1", "path=1 ") {
				t.Fatal("rank 1 was not told that rank 0 retired path 1")
			}
			if logHas(logs.String(), "path stopped", "rank=1") {
				t.Fatal("rank 1 found a path stopped on its own")
			}
			trade(ctx, t, trs, &seq, 3)
			for r, tr := range trs {
				if err := tr.peers[1-r].err(); err != nil {
					t.Fatalf("rank %d: the pair failed: %v", r, err)
				}
			}
		})
	}
}
