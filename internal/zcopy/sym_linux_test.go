package zcopy

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// BenchmarkSymmetric runs the zero-copy AllGather and AllToAll of 2 ranks
// (goroutines of this process, the shm transport, registered buffers:
// the records, the copies and the done round of the real path), with
// large blocks written around the caches (stores=bypass, as the calls
// do) or with plain stores. Besides the mean it reports rank 0's fastest
// call (min-µs) and its median (med-µs): under load the mean is mostly
// the ranks waiting for each other's time slices, the minimum is what
// the path costs. B/s counts the whole output (hcomm perf's bytes).
//
//	go test -run '^$' -bench Symmetric -count 3 ./internal/zcopy
func BenchmarkSymmetric(b *testing.B) {
	for _, coll := range []sched.Coll{sched.AllGather, sched.AllToAll} {
		for _, n := range []int{512 << 10, 2 << 20, 8 << 20, 32 << 20} {
			for _, plain := range []bool{false, true} {
				stores := "bypass"
				if plain {
					stores = "plain"
				}
				b.Run(fmt.Sprintf("%v/%dKiB/stores=%s", coll, n>>10, stores), func(b *testing.B) {
					symmetric1(b, coll, n, plain)
				})
			}
		}
	}
}

func symmetric1(b *testing.B, coll sched.Coll, n int, plain bool) {
	ctx := context.Background()
	ts, rs, bs := shmPair(b, ctx, 2*n)
	defer func(v int) { symStreamMin = v }(symStreamMin)
	if plain {
		symStreamMin = math.MaxInt
	}
	var calls [2]*Call
	for r := range 2 {
		m := bs[r].B.Bytes()
		calls[r] = &Call{Coll: coll, DT: reduce.Uint8, In: m[:n/2], Out: m[n : 2*n], Count: n / 2}
		if coll == sched.AllToAll {
			calls[r].In = m[:n]
		}
	}
	run := func(r int, seq uint64) error {
		fp := wire.Fingerprint{Seq: seq, Coll: coll}
		z := Path{Rank: r, Size: 2, T: ts[r], FP: &fp, Min: 1}
		took, err := rs[r].Begin(ctx, &z, calls[r])
		if err == nil && !took {
			err = fmt.Errorf("the path was not taken")
		}
		if err == nil {
			err = rs[r].Finish(ctx, &z, calls[r])
		}
		return err
	}
	// Warm: the first calls fault the peers' pages in.
	for i := range 3 {
		errc := make(chan error, 1)
		go func() { errc <- run(1, uint64(i+1)) }()
		if err := run(0, uint64(i+1)); err != nil {
			b.Fatal(err)
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	took := make([]time.Duration, b.N)
	errc := make(chan error, 1)
	b.SetBytes(int64(n))
	b.ResetTimer()
	go func() {
		for i := range b.N {
			if err := run(1, uint64(i+4)); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i := range b.N {
		t0 := time.Now()
		if err := run(0, uint64(i+4)); err != nil {
			b.Fatal(err)
		}
		took[i] = time.Since(t0)
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[0].Nanoseconds())/1e3, "min-µs")
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "med-µs")
}
