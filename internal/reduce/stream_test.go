package reduce

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestApplyStreamMatchesReference runs ApplyStream (non-temporal stores
// where the CPU has them) at every alignment of dst, out of place and in
// place, against the reference.
func TestApplyStreamMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range allDTypes {
		for _, op := range allOps {
			t.Run(fmt.Sprintf("%v/%v", dt, op), func(t *testing.T) {
				sz := dt.Size()
				for _, n := range []int{0, 1, 3, 8, 9, 33, 64, 257, 1001} {
					a, b := randomOperands(r, dt, n)
					want := refApply(dt, op, a, b)
					for shift := 0; shift < 40; shift += sz {
						buf := make([]byte, shift+n*sz+8)
						dst := buf[shift : shift+n*sz]
						ApplyStream(dt, op, dst, a, b)
						if i, ok := sameResult(dt, op, dst, want); !ok {
							t.Fatalf("n=%d shift=%d: element %d differs", n, shift, i)
						}
						if !bytes.Equal(buf[:shift], make([]byte, shift)) || !bytes.Equal(buf[shift+n*sz:], make([]byte, 8)) {
							t.Fatalf("n=%d shift=%d: wrote outside dst", n, shift)
						}
						acc := append(buf[:shift:shift], a...)
						ApplyStream(dt, op, acc[shift:], acc[shift:], b)
						if i, ok := sameResult(dt, op, acc[shift:], want); !ok {
							t.Fatalf("n=%d shift=%d in place: element %d differs", n, shift, i)
						}
					}
				}
			})
		}
	}
}

// TestCopyStream checks CopyStream against copy at every alignment of
// both slices, with unequal lengths, and that it writes nothing else.
func TestCopyStream(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	src := make([]byte, 1200)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	for _, n := range []int{0, 1, 31, 32, 33, 127, 128, 129, 160, 1000} {
		for dshift := range 34 {
			for _, sshift := range []int{0, 1, 7, 32} {
				for _, extra := range []int{0, 5} {
					buf := make([]byte, dshift+n+extra+64)
					dst := buf[dshift : dshift+n+extra]
					s := src[sshift : sshift+n]
					if got := CopyStream(dst, s); got != n {
						t.Fatalf("n=%d: copied %d", n, got)
					}
					if !bytes.Equal(dst[:n], s) {
						t.Fatalf("n=%d dshift=%d sshift=%d: wrong bytes", n, dshift, sshift)
					}
					if !bytes.Equal(buf[:dshift], make([]byte, dshift)) || !bytes.Equal(buf[dshift+n:], make([]byte, len(buf)-dshift-n)) {
						t.Fatalf("n=%d dshift=%d sshift=%d: wrote outside", n, dshift, sshift)
					}
				}
			}
		}
	}
	// A shorter src copies only its length.
	dst := make([]byte, 100)
	if got := CopyStream(dst, src[:64]); got != 64 || !bytes.Equal(dst[:64], src[:64]) {
		t.Fatalf("short src: copied %d", got)
	}
}

func TestStreamDoesNotAllocate(t *testing.T) {
	a, b := benchOperand(Float32, 1<<16, 1), benchOperand(Float32, 1<<16, 2)
	dst := make([]byte, 1<<16)
	if n := testing.AllocsPerRun(10, func() {
		ApplyStream(Float32, Sum, dst, a, b)
		CopyStream(dst, a)
	}); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}
