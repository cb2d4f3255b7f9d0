package exec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/allocs"
	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/transport/local"
	"github.com/hcomm-go/hcomm/internal/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func f32at(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }

// runAll runs one program per rank over a local fabric.
func runAll(t *testing.T, progs []*sched.Program, chunk int, ins, outs [][]byte, fps []wire.Fingerprint) []error {
	t.Helper()
	f := local.NewFabric(len(progs))
	errs := make([]error, len(progs))
	var wg sync.WaitGroup
	for r := range progs {
		e := New(f.Endpoint(r), chunk)
		e.OnError = f.Endpoint(r).Abort
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer e.Close()
			errs[r] = e.Run(context.Background(), progs[r], &fps[r], reduce.Float32, reduce.Sum, ins[r], outs[r])
		}()
	}
	wg.Wait()
	return errs
}

// TestRingChunks runs a ring AllReduce with chunks smaller than the
// messages, so every op is cut into several pieces.
func TestRingChunks(t *testing.T) {
	a, _ := algo.Lookup(sched.AllReduce, "ring")
	const n, count = 3, 37
	s := sched.Uniform(sched.AllReduce, n, count, 0, false)
	progs := make([]*sched.Program, n)
	ins, outs := make([][]byte, n), make([][]byte, n)
	fps := make([]wire.Fingerprint, n)
	for r := range progs {
		progs[r], _ = a.Build(s, r)
		v := make([]float32, count)
		for i := range v {
			v[i] = float32(r*100 + i)
		}
		ins[r], outs[r] = f32s(v...), make([]byte, 4*count)
		fps[r] = wire.Fingerprint{Seq: 1, Coll: sched.AllReduce, DType: reduce.Float32, Op: reduce.Sum, Count: count}
	}
	for _, err := range runAll(t, progs, 8, ins, outs, fps) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for r := range outs {
		for i := 0; i < count; i++ {
			if got, want := f32at(outs[r], i), float32(300+3*i); got != want {
				t.Fatalf("rank %d element %d = %v, want %v", r, i, got, want)
			}
		}
	}
}

// TestFirstErrorUnblocksSiblings: a step whose receive fails (the peer
// sends another fingerprint) while its send waits for a receiver that never
// comes must return the receive's error, not hang.
func TestFirstErrorUnblocksSiblings(t *testing.T) {
	b0 := sched.NewBuilder("t", 0, 2)
	b0.Step(sched.SendOp(1, sched.R(sched.In, 0, 1)))
	b1 := sched.NewBuilder("t", 1, 2)
	// Rank 1 sends first (rank 0 never receives) and receives at once.
	b1.Step(sched.SendOp(0, sched.R(sched.In, 0, 1)), sched.RecvOp(0, sched.R(sched.Out, 0, 1)))
	progs := []*sched.Program{b0.Program(), b1.Program()}
	fps := []wire.Fingerprint{{Seq: 1, Coll: sched.Broadcast}, {Seq: 1, Coll: sched.AllGather}}
	ins := [][]byte{f32s(1), f32s(2)}
	outs := [][]byte{f32s(0), f32s(0)}
	res := runAll(t, progs, 1024, ins, outs, fps)
	for r, err := range res {
		if err == nil {
			t.Fatalf("rank %d: no error", r)
		}
	}
	if !errors.Is(res[1], errs.ErrMismatch) {
		t.Fatalf("rank 1: %v, want the mismatch its receive found", res[1])
	}
}

// TestRunDoesNotAllocate: a warm executor runs a program without
// allocating (the transport's goroutines aside, which live outside Run),
// in one chunk and in several (received ahead of the reductions).
func TestRunDoesNotAllocate(t *testing.T) {
	for _, chunk := range []int{0, 8} {
		t.Run(fmt.Sprintf("chunk=%d", chunk), func(t *testing.T) { testRunDoesNotAllocate(t, chunk) })
	}
}

func testRunDoesNotAllocate(t *testing.T, chunk int) {
	f := local.NewFabric(2)
	b0 := sched.NewBuilder("t", 0, 2)
	b0.Step(sched.SendOp(1, sched.R(sched.In, 0, 4)), sched.RecvReduceOp(1, sched.R(sched.In, 0, 4), sched.R(sched.Out, 0, 4)))
	b1 := sched.NewBuilder("t", 1, 2)
	b1.Step(sched.SendOp(0, sched.R(sched.In, 0, 4)), sched.RecvReduceOp(0, sched.R(sched.In, 0, 4), sched.R(sched.Out, 0, 4)))
	e0, e1 := New(f.Endpoint(0), chunk), New(f.Endpoint(1), chunk)
	defer e0.Close()
	defer e1.Close()
	fp := wire.Fingerprint{Seq: 1}
	in0, in1, out0, out1 := f32s(1, 2, 3, 4), f32s(1, 2, 3, 4), make([]byte, 16), make([]byte, 16)
	ctx := context.Background()
	start, done := make(chan struct{}), make(chan struct{})
	go func() {
		for range start {
			e1.Run(ctx, b1.Program(), &fp, reduce.Float32, reduce.Sum, in1, out1)
			done <- struct{}{}
		}
	}()
	defer close(start)
	n := allocs.PerRun(100, 0, func() {
		start <- struct{}{}
		if err := e0.Run(ctx, b0.Program(), &fp, reduce.Float32, reduce.Sum, in0, out0); err != nil {
			t.Fatal(err)
		}
		<-done
	})
	if n > 0 {
		t.Errorf("Run allocated %v times per call", n)
	}
	if f32at(out0, 3) != 8 {
		t.Errorf("sum = %v", f32at(out0, 3))
	}
}

// TestReceiveAheadFails: a receive-reduce over several chunks whose second
// chunk carries another fingerprint fails with the mismatch, with the
// chunk received ahead accounted for (goleak checks the reader is not
// left behind).
func TestReceiveAheadFails(t *testing.T) {
	const count = 8
	b0 := sched.NewBuilder("t", 0, 2)
	b0.Step(sched.RecvReduceOp(1, sched.R(sched.In, 0, count), sched.R(sched.Out, 0, count)))
	prog := b0.Program()
	f := local.NewFabric(2)
	e := New(f.Endpoint(0), 8) // 4 chunks of 2 elements
	e.OnError = f.Endpoint(0).Abort
	defer e.Close()
	good := wire.Fingerprint{Seq: 1, Coll: sched.AllReduce}
	bad := wire.Fingerprint{Seq: 2, Coll: sched.AllReduce}
	go func() {
		peer := f.Endpoint(1)
		peer.Send(context.Background(), 0, &good, f32s(1, 2))
		peer.Send(context.Background(), 0, &bad, f32s(3, 4))
	}()
	in, out := f32s(1, 1, 1, 1, 1, 1, 1, 1), make([]byte, 4*count)
	err := e.Run(context.Background(), prog, &good, reduce.Float32, reduce.Sum, in, out)
	if !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("Run: %v, want a mismatch", err)
	}
	if f32at(out, 0) != 2 || f32at(out, 1) != 3 {
		t.Fatalf("first chunk = %v %v, want 2 3", f32at(out, 0), f32at(out, 1))
	}
}
