package exec

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/allocs"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/transport/local"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// sendSignal is a transport that reports when a Send begins.
type sendSignal struct {
	transport.Transport
	sending chan struct{}
}

func (s *sendSignal) Send(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error {
	select {
	case s.sending <- struct{}{}:
	default:
	}
	return s.Transport.Send(ctx, peer, fp, p)
}

// gatherPair is rank's program of a 2-rank AllGather of count elements per
// rank: one step that copies its own block, sends it and receives the
// peer's.
func gatherPair(rank, count int) *sched.Program {
	b := sched.NewBuilder("t", rank, 2)
	peer := 1 - rank
	b.Step(sched.CopyOp(sched.R(sched.In, 0, count), sched.R(sched.Out, rank*count, count)),
		sched.SendOp(peer, sched.R(sched.In, 0, count)),
		sched.RecvOp(peer, sched.R(sched.Out, peer*count, count)))
	return b.Program()
}

// TestLargeLocalOpsOverlap: a step whose local copy is large hands its
// messages to workers before it copies (the send has begun by the time the
// copy starts), a small one or one on too few CPUs keeps the old order (no
// hand-off), the result
// is right either way, and a warm run allocates nothing.
func TestLargeLocalOpsOverlap(t *testing.T) {
	for _, tc := range []struct {
		count   int
		fewCPUs bool // GOMAXPROCS below the executor's overlapProcs
		overlap bool
	}{{overlapMin / 4, false, true}, {overlapMin / 4, true, false}, {overlapMin/4 - 2, false, false}, {16, false, false}} {
		t.Run(fmt.Sprintf("count=%d/fewCPUs=%v", tc.count, tc.fewCPUs), func(t *testing.T) {
			f := local.NewFabric(2)
			var es [2]*Executor
			var ins, outs [2][]byte
			var progs [2]*sched.Program
			hooked := [2]int{-1, -1}
			for r := range 2 {
				tr := &sendSignal{Transport: f.Endpoint(r), sending: make(chan struct{}, 1)}
				e := New(tr, 1<<20)
				e.overlapProcs = 0 // whatever this machine has
				if tc.fewCPUs {
					e.overlapProcs = runtime.GOMAXPROCS(0) + 1
				}
				e.OnError = f.Endpoint(r).Abort
				e.testHookOverlap = func(dispatched int) {
					hooked[r] = dispatched
					select {
					case <-tr.sending:
					case <-time.After(time.Minute):
						t.Errorf("rank %d: the step's send had not begun when its local copy was due", r)
					}
				}
				defer e.Close()
				es[r] = e
				progs[r] = gatherPair(r, tc.count)
				ins[r], outs[r] = make([]byte, 4*tc.count), make([]byte, 8*tc.count)
				for i := range tc.count {
					copy(ins[r][4*i:], f32s(float32(r*1e6+i)))
				}
			}
			fp := wire.Fingerprint{Seq: 1, Coll: sched.AllGather, DType: reduce.Float32}
			start, done := make(chan struct{}), make(chan error)
			go func() {
				for range start {
					done <- es[1].Run(context.Background(), progs[1], &fp, reduce.Float32, reduce.Sum, ins[1], outs[1])
				}
			}()
			defer close(start)
			run := func() {
				start <- struct{}{}
				if err := es[0].Run(context.Background(), progs[0], &fp, reduce.Float32, reduce.Sum, ins[0], outs[0]); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			run()
			for r := range 2 {
				if got := hooked[r] >= 0; got != tc.overlap {
					t.Fatalf("rank %d: copy beside the messages = %v, want %v", r, got, tc.overlap)
				}
				if tc.overlap && hooked[r] != 2 {
					t.Errorf("rank %d: %d ops handed to workers before the copy, want 2", r, hooked[r])
				}
				for i := range 2 * tc.count {
					if got, want := f32at(outs[r], i), float32((i/tc.count)*1e6+i%tc.count); got != want {
						t.Fatalf("rank %d element %d = %v, want %v", r, i, got, want)
					}
				}
			}
			for r := range 2 {
				es[r].testHookOverlap = nil
			}
			if n := allocs.PerRun(5, 0, run); n > 0 {
				t.Errorf("Run allocated %v times per call", n)
			}
		})
	}
}
