package reduce

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// simdBenchSizes are the lengths of dst at which BenchmarkSIMD compares the
// kernels with memmove: in L1, in L2, and two beyond the caches.
var simdBenchSizes = []struct {
	name  string
	bytes int
}{
	{"4KiB", 4 << 10},
	{"256KiB", 256 << 10},
	{"16MiB", 16 << 20},
	{"64MiB", 64 << 20},
}

// BenchmarkSIMD measures Sum through Apply (the vector kernels where the
// CPU has them), through Apply in place (dst = a, as a reduction
// accumulates), through the scalar twin, and memmove of the same size.
// b.SetBytes counts the bytes of dst in every case, so the MB/s figures
// compare directly: the kernels read two streams and write one where
// memmove reads one and writes one.
func BenchmarkSIMD(b *testing.B) {
	paths := []struct {
		name  string
		apply func(dt DType, op Op, dst, a, b []byte)
	}{
		{"vector", Apply},
		{"scalar", applyScalar},
	}
	for _, sz := range simdBenchSizes {
		b.Run(fmt.Sprintf("memmove/%s", sz.name), func(b *testing.B) {
			// The source is written first: a never-written allocation
			// reads from the kernel's shared zero page, which stays in the
			// cache and makes memmove look faster than memory is.
			dst, src := make([]byte, sz.bytes), benchOperand(Float32, sz.bytes, 1)
			b.SetBytes(int64(sz.bytes))
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
	for _, dt := range []DType{Float32, Float16, BFloat16, Float64, Int32} {
		for _, sz := range simdBenchSizes {
			a, src := benchOperand(dt, sz.bytes, 1), benchOperand(dt, sz.bytes, 2)
			dst := make([]byte, sz.bytes)
			b.Run(fmt.Sprintf("%v/sum/vector-in-place/%s", dt, sz.name), func(b *testing.B) {
				acc := bytes.Clone(a)
				b.SetBytes(int64(sz.bytes))
				for b.Loop() {
					Apply(dt, Sum, acc, acc, src)
				}
			})
			for _, p := range paths {
				b.Run(fmt.Sprintf("%v/sum/%s/%s", dt, p.name, sz.name), func(b *testing.B) {
					b.SetBytes(int64(sz.bytes))
					b.ReportAllocs()
					for b.Loop() {
						p.apply(dt, Sum, dst, a, src)
					}
				})
			}
		}
	}
}

// BenchmarkSIMDOps measures every operator's vector kernel on 256 KiB,
// where the data stays in L2 and the arithmetic rather than memory bounds
// the speed.
func BenchmarkSIMDOps(b *testing.B) {
	const size = 256 << 10
	for _, dt := range allDTypes {
		a, src := benchOperand(dt, size, 1), benchOperand(dt, size, 2)
		dst := make([]byte, size)
		for _, op := range []Op{Sum, Prod, Min, Max} {
			b.Run(fmt.Sprintf("%v/%v", dt, op), func(b *testing.B) {
				b.SetBytes(size)
				for b.Loop() {
					Apply(dt, op, dst, a, src)
				}
			})
		}
	}
}

// BenchmarkSIMDRatio measures Sum against memmove in alternating batches
// and reports the ratios of their speeds in bytes of dst per second
// ("vector/memmove", "scalar/memmove"), which stay meaningful on a shared,
// noisy machine where separate benchmarks see different loads.
func BenchmarkSIMDRatio(b *testing.B) {
	for _, dt := range []DType{Float32, Float16, BFloat16} {
		for _, sz := range simdBenchSizes {
			b.Run(fmt.Sprintf("%v/sum/%s", dt, sz.name), func(b *testing.B) {
				a, src := benchOperand(dt, sz.bytes, 1), benchOperand(dt, sz.bytes, 2)
				dst := make([]byte, sz.bytes)
				mdst, msrc := make([]byte, sz.bytes), benchOperand(dt, sz.bytes, 3)
				reps := max(1, (1<<20)/sz.bytes) // batches of at least 1 MiB
				var tMove, tVec, tScalar time.Duration
				timed := func(f func()) time.Duration {
					t0 := time.Now()
					for range reps {
						f()
					}
					return time.Since(t0)
				}
				for b.Loop() {
					tMove += timed(func() { copy(mdst, msrc) })
					tVec += timed(func() { Apply(dt, Sum, dst, a, src) })
					tScalar += timed(func() { applyScalar(dt, Sum, dst, a, src) })
				}
				b.ReportMetric(float64(tMove)/float64(tVec), "vector/memmove")
				b.ReportMetric(float64(tMove)/float64(tScalar), "scalar/memmove")
				b.ReportMetric(float64(sz.bytes*reps*b.N)/tVec.Seconds()/1e9, "vector-GB/s")
				b.ReportMetric(float64(sz.bytes*reps*b.N)/tMove.Seconds()/1e9, "memmove-GB/s")
			})
		}
	}
}
