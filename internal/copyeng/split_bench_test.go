package copyeng

import (
	"fmt"
	"testing"

	"github.com/hcomm-go/hcomm/internal/reduce"
)

// sumJob is a float32 Sum of two inputs into dst, done in parts (what the
// zero-copy path's reductions split over the engine).
type sumJob struct{ dst, a, b []byte }

func (j *sumJob) Part(lo, hi int) {
	reduce.Apply(reduce.Float32, reduce.Sum, j.dst[lo:hi], j.a[lo:hi], j.b[lo:hi])
}

// BenchmarkSplitReduce measures a reduction done by the caller alone
// (workers=0) against one split with engine workers, which pays only
// where the workers have CPUs of their own: run it on an otherwise idle
// machine with more CPUs than workers.
//
//	go test -run '^$' -bench SplitReduce -count 3 ./internal/copyeng
func BenchmarkSplitReduce(b *testing.B) {
	for _, n := range []int{1 << 20, 4 << 20, 16 << 20} {
		for _, w := range []int{0, 1, 3} {
			b.Run(fmt.Sprintf("workers=%d/%dKiB", w, n>>10), func(b *testing.B) {
				j := &sumJob{dst: make([]byte, n), a: make([]byte, n), b: make([]byte, n)}
				var s *Splitter
				if w > 0 {
					e := New(&Config{Workers: w, Depth: 64})
					defer e.Close()
					s = NewSplitter(e, 1, w, nil)
				}
				j.Part(0, n) // no page faults in the loop
				b.SetBytes(int64(n))
				b.ResetTimer()
				for range b.N {
					s.Run(n, j)
				}
			})
		}
	}
}
