package reduce

import (
	"fmt"
	"math"
	"testing"
)

var benchSizes = []struct {
	name  string
	bytes int
}{
	{"4KiB", 4 << 10},
	{"256KiB", 256 << 10},
	{"16MiB", 16 << 20},
}

// BenchmarkApply measures Sum (dst = a + b) per type and size; b.SetBytes
// counts the bytes of dst, so MB/s compares directly with BenchmarkMemmove.
// The operands stay fixed, so the values summed do not drift towards
// infinity as they would with dst = dst + b repeated.
func BenchmarkApply(b *testing.B) {
	for _, dt := range []DType{Float32, Float64, Float16, BFloat16, Int32} {
		for _, sz := range benchSizes {
			b.Run(fmt.Sprintf("%v/sum/%s", dt, sz.name), func(b *testing.B) {
				a, src := benchOperand(dt, sz.bytes, 1), benchOperand(dt, sz.bytes, 2)
				dst := make([]byte, sz.bytes)
				b.SetBytes(int64(sz.bytes))
				b.ReportAllocs()
				for b.Loop() {
					Apply(dt, Sum, dst, a, src)
				}
			})
		}
	}
}

// benchOperand returns n bytes of values like a gradient's: finite,
// normal, of both signs and varied magnitudes, so that the numbers rather
// than special cases drive the measurements.
func benchOperand(dt DType, n, seed int) []byte {
	buf := make([]byte, n)
	for i := range n / dt.Size() {
		x := float64((i+seed)*7919%2001-1000) / 256
		var bits uint64
		switch dt {
		case Float16:
			bits = uint64(F16FromF32(float32(x)))
		case BFloat16:
			bits = uint64(BF16FromF32(float32(x)))
		case Float32:
			bits = uint64(math.Float32bits(float32(x)))
		case Float64:
			bits = math.Float64bits(x)
		default:
			bits = uint64(int64(x * 256))
		}
		putElem(dt, buf, i, bits)
	}
	return buf
}

// BenchmarkMemmove is the baseline for BenchmarkApply: copying a buffer of
// the same size.
func BenchmarkMemmove(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			dst, src := make([]byte, sz.bytes), make([]byte, sz.bytes)
			// Touch every page of src: an untouched one is the kernel's
			// shared zero page and reads from cache, flattering memmove.
			for i := range src {
				src[i] = byte(i)
			}
			b.SetBytes(int64(sz.bytes))
			b.ReportAllocs()
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}
