package exec

import (
	"context"
	"sync"
	"testing"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/transport/local"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// pieceSink is a transport that hands received messages to sinks in small
// pieces from a buffer of its own, as shared memory does from its ring
// slots.
type pieceSink struct {
	transport.Transport
	bounce []byte
	piece  int
	sinks  int // RecvSink calls
}

func (p *pieceSink) RecvSink(ctx context.Context, peer int, fp *wire.Fingerprint, n int, s transport.Sink) error {
	p.sinks++
	b := p.bounce[:n]
	if err := p.Transport.Recv(ctx, peer, fp, b); err != nil {
		return err
	}
	for off := 0; off < n; off += p.piece {
		s.Consume(off, b[off:min(off+p.piece, n)])
	}
	return nil
}

// TestStreamedReceives runs AllReduce and AllGather rings whose blocks are
// large enough (reduce.StreamMin) to be received around the caches, over
// a transport that hands messages over piece by piece, and checks every
// element.
func TestStreamedReceives(t *testing.T) {
	const n, chunk = 2, 1 << 20
	count := 2 * reduce.StreamMin / 4 // each rank's block is StreamMin bytes
	for _, coll := range []sched.Coll{sched.AllReduce, sched.AllGather} {
		t.Run(coll.String(), func(t *testing.T) {
			a, _ := algo.Lookup(coll, "ring")
			per := count
			if coll == sched.AllGather {
				per = count / n
			}
			s := sched.Uniform(coll, n, per, 0, false)
			f := local.NewFabric(n)
			ins, outs := make([][]byte, n), make([][]byte, n)
			ts := make([]*pieceSink, n)
			var wg sync.WaitGroup
			errs := make([]error, n)
			for r := range n {
				prog, err := a.Build(s, r)
				if err != nil {
					t.Fatal(err)
				}
				in := make([]byte, 4*per)
				for i := range per {
					copy(in[4*i:], f32s(float32(r*1000+i%1000)))
				}
				outLen := 4 * count
				ins[r], outs[r] = in, make([]byte, outLen)
				ts[r] = &pieceSink{Transport: f.Endpoint(r), bounce: make([]byte, chunk), piece: 4096 + 4}
				e := New(ts[r], chunk)
				e.OnError = f.Endpoint(r).Abort
				fp := wire.Fingerprint{Seq: 1, Coll: coll, DType: reduce.Float32, Op: reduce.Sum, Count: int64(per)}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer e.Close()
					errs[r] = e.Run(context.Background(), prog, &fp, reduce.Float32, reduce.Sum, ins[r], outs[r])
				}()
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				if ts[r].sinks == 0 {
					t.Fatalf("rank %d: nothing was received through a sink", r)
				}
			}
			for r := range outs {
				for i := range count {
					var want float32
					if coll == sched.AllReduce {
						want = float32(1000 + 2*(i%1000))
					} else {
						want = float32((i/per)*1000 + (i%per)%1000)
					}
					if got := f32at(outs[r], i); got != want {
						t.Fatalf("rank %d element %d = %v, want %v", r, i, got, want)
					}
				}
			}
		})
	}
}
