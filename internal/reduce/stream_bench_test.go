package reduce

import (
	"fmt"
	"testing"
)

// BenchmarkPieces fills a 64 MiB destination piece by piece (256 KiB)
// from a small, cache-resident ring, as a shared-memory receive does:
// reducing with plain and non-temporal stores (ApplyStream), copying out
// with memmove and CopyStream, and, for reference, copying in (the
// sender's side). The destination is beyond the caches, so non-temporal
// stores save reading each of its lines first.
func BenchmarkPieces(b *testing.B) {
	const total = 64 << 20
	const piece = 256 << 10
	in := benchOperand(Float32, total, 1)
	out := benchOperand(Float32, total, 3)
	ring := benchOperand(Float32, 4*piece, 2)
	for _, nt := range []bool{false, true} {
		b.Run(fmt.Sprintf("reduce/nt=%v", nt), func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				for off, j := 0, 0; off < total; off, j = off+piece, (j+1)%4 {
					applyVectorNT(Float32, Sum, out[off:off+piece], in[off:off+piece], ring[j*piece:(j+1)*piece], nt)
				}
			}
		})
	}
	b.Run("copy/memmove", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			for off, j := 0, 0; off < total; off, j = off+piece, (j+1)%4 {
				copy(out[off:off+piece], ring[j*piece:(j+1)*piece])
			}
		}
	})
	b.Run("copy/stream", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			for off, j := 0, 0; off < total; off, j = off+piece, (j+1)%4 {
				CopyStream(out[off:off+piece], ring[j*piece:(j+1)*piece])
			}
		}
	})
	b.Run("copyin/memmove", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			for off, j := 0, 0; off < total; off, j = off+piece, (j+1)%4 {
				copy(ring[j*piece:(j+1)*piece], in[off:off+piece])
			}
		}
	})
}
