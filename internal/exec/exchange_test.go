//go:build linux

package exec

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/allocs"
	"github.com/hcomm-go/hcomm/internal/memkv"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/transport/shm"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// countingShm counts the fused exchanges of a shm transport.
type countingShm struct {
	*shm.Transport
	n atomic.Int32
}

func (c *countingShm) Exchange(ctx context.Context, peer int, fp *wire.Fingerprint, send []byte, n int, x transport.ExchangeSink) error {
	c.n.Add(1)
	return c.Transport.Exchange(ctx, peer, fp, send, n, x)
}

func shmPair(t *testing.T, cfg shm.Config) [2]*countingShm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv := memkv.New()
	var trs [2]*countingShm
	var errs [2]error
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cfg
			c.Rank, c.Size, c.Local, c.KV = r, 2, []int{0, 1}, kv
			tr, err := shm.New(ctx, c)
			trs[r], errs[r] = &countingShm{Transport: tr}, err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, tr := range trs {
			tr.Close()
		}
	})
	return trs
}

// TestFusedExchange: a two-rank ring AllReduce over shm runs its two steps
// as one fused exchange once its messages reach the threshold, in place
// and not, with even and odd counts, gives the sums, and (warm) allocates
// nothing.
func TestFusedExchange(t *testing.T) {
	trs := shmPair(t, shm.Config{SlotBytes: 4096, Slots: 2, CMAThreshold: -1})
	a, _ := algo.Lookup(sched.AllReduce, "ring")
	var es [2]*Executor
	for r := range es {
		es[r] = New(trs[r], 8192)
		es[r].xMin = 1024
		defer es[r].Close()
	}
	for _, count := range []int{100, 257, 5001, 20000} {
		for _, inPlace := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/inplace=%v", count, inPlace), func(t *testing.T) {
				fused := 4*(count+1)/2 >= es[0].xMin
				before := trs[0].n.Load()
				testFused(t, a, es, count, inPlace)
				if got := trs[0].n.Load() - before; (got > 0) != fused {
					t.Errorf("%d fused exchanges, want fused %v", got, fused)
				}
			})
		}
	}
}

func testFused(t *testing.T, a algo.Algorithm, es [2]*Executor, count int, inPlace bool) {
	s := sched.Uniform(sched.AllReduce, 2, count, 0, inPlace)
	var ins, outs [2][]byte
	var progs [2]*sched.Program
	fp := wire.Fingerprint{Seq: 1, Coll: sched.AllReduce, DType: reduce.Float32, Op: reduce.Sum, Count: int64(count)}
	for r := range 2 {
		progs[r], _ = a.Build(s, r)
		v := make([]float32, count)
		for i := range v {
			v[i] = float32(r*100000 + i)
		}
		ins[r], outs[r] = f32s(v...), make([]byte, 4*count)
		if inPlace {
			outs[r] = ins[r]
		}
	}
	run := func() {
		var wg sync.WaitGroup
		var errs [2]error
		for r := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[r] = es[r].Run(context.Background(), progs[r], &fp, reduce.Float32, reduce.Sum, ins[r], outs[r])
			}()
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
	}
	run()
	for r := range outs {
		for i := range count {
			if got, want := f32at(outs[r], i), float32(100000+2*i); got != want {
				t.Fatalf("rank %d element %d = %v, want %v", r, i, got, want)
			}
		}
	}
	if inPlace {
		return
	}
	ctx := context.Background()
	start, done := make(chan struct{}), make(chan error)
	go func() {
		for range start {
			done <- es[1].Run(ctx, progs[1], &fp, reduce.Float32, reduce.Sum, ins[1], outs[1])
		}
	}()
	defer close(start)
	n := allocs.PerRun(10, 0, func() {
		start <- struct{}{}
		if err := es[0].Run(ctx, progs[0], &fp, reduce.Float32, reduce.Sum, ins[0], outs[0]); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per run", n)
	}
}

// testMin is the copySendMin and pairMin of TestCopyRidesSend.
const testMin = 512 << 10

// countingSinkShm counts SendSink calls.
type countingSinkShm struct {
	*shm.Transport
	n, pairs atomic.Int32
}

func (c *countingSinkShm) SendSink(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte, s transport.Sink) error {
	c.n.Add(1)
	return c.Transport.SendSink(ctx, peer, fp, p, s)
}

// SendRecv counts the pairs moved with a sink on the send (in n) and
// every pair moved on one goroutine (in pairs).
func (c *countingSinkShm) SendRecv(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte, ps transport.Sink, n int, rs transport.Sink) (bool, error) {
	ok, err := c.Transport.SendRecv(ctx, peer, fp, p, ps, n, rs)
	if ok && ps != nil {
		c.n.Add(1)
	}
	if ok {
		c.pairs.Add(1)
	}
	return ok, err
}

// TestCopyRidesSend: a ring AllGather's own-block copy is done by the
// send of the same block over shm (a piece at a time from the ring slot)
// from testMin on (as from copySendMin), with the results of the plain copy, in place and
// not; below it the copy stays a copy. Without single copy the step's
// send and receive move on one goroutine (SendRecv); with it (chunks of
// 1 MiB go by single copy) they do not, and the send alone carries the
// copy. Both ranks' runs allocate nothing.
func TestCopyRidesSend(t *testing.T) {
	for _, cma := range []int{-1, 0} {
		t.Run(fmt.Sprintf("cma=%d", cma), func(t *testing.T) { testCopyRidesSend(t, cma) })
	}
}

func testCopyRidesSend(t *testing.T, cma int) {
	pair := shmPair(t, shm.Config{CMAThreshold: cma})
	a, _ := algo.Lookup(sched.AllGather, "ring")
	var trs [2]*countingSinkShm
	var es [2]*Executor
	for r := range es {
		trs[r] = &countingSinkShm{Transport: pair[r].Transport}
		es[r] = New(trs[r], 0)
		es[r].pMin, es[r].cMin = testMin, testMin
		defer es[r].Close()
	}
	for _, count := range []int{1000, testMin, testMin + 3, 3 << 19} {
		for _, inPlace := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/inplace=%v", count, inPlace), func(t *testing.T) {
				before, pairs := trs[0].n.Load(), trs[0].pairs.Load()
				s := sched.Uniform(sched.AllGather, 2, count, 0, inPlace)
				var ins, outs [2][]byte
				var progs [2]*sched.Program
				fp := wire.Fingerprint{Seq: 1, Coll: sched.AllGather, DType: reduce.Uint8, Count: int64(count)}
				for r := range 2 {
					progs[r], _ = a.Build(s, r)
					outs[r] = make([]byte, 2*count)
					ins[r] = make([]byte, count)
					for i := range ins[r] {
						ins[r][i] = byte(r*7 + i*13 + i>>8)
					}
					if inPlace {
						copy(outs[r][r*count:], ins[r])
						ins[r] = outs[r][r*count : (r+1)*count]
					}
				}
				run := func() {
					var wg sync.WaitGroup
					var errs [2]error
					for r := range 2 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							errs[r] = es[r].Run(context.Background(), progs[r], &fp, reduce.Uint8, reduce.Sum, ins[r], outs[r])
						}()
					}
					wg.Wait()
					for r, err := range errs {
						if err != nil {
							t.Fatalf("rank %d: %v", r, err)
						}
					}
				}
				run()
				for r := range 2 {
					for b := range 2 {
						for i := range count {
							if got, want := outs[r][b*count+i], byte(b*7+i*13+i>>8); got != want {
								t.Fatalf("rank %d block %d byte %d = %d, want %d", r, b, i, got, want)
							}
						}
					}
				}
				rides := !inPlace && count >= testMin
				if got := trs[0].n.Load() - before; (got > 0) != rides {
					t.Errorf("%d sends with a sink, want them %v", got, rides)
				}
				moved := count >= testMin && cma < 0
				if got := trs[0].pairs.Load() - pairs; (got > 0) != moved {
					t.Errorf("%d pairs moved on one goroutine, want them %v", got, moved)
				}
				ctx := context.Background()
				start, done := make(chan struct{}), make(chan error)
				go func() {
					for range start {
						done <- es[1].Run(ctx, progs[1], &fp, reduce.Uint8, reduce.Sum, ins[1], outs[1])
					}
				}()
				defer close(start)
				runs := 10
				if count > 1<<20 {
					runs = 3
				}
				n := allocs.PerRun(runs, 0, func() {
					start <- struct{}{}
					if err := es[0].Run(ctx, progs[0], &fp, reduce.Uint8, reduce.Sum, ins[0], outs[0]); err != nil {
						t.Fatal(err)
					}
					if err := <-done; err != nil {
						t.Fatal(err)
					}
				})
				if n != 0 {
					t.Errorf("%v allocations per run", n)
				}
			})
		}
	}
}
