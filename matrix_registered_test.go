package hcomm

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"unsafe"
)

// regMem holds the registered memory of each communicator the matrix runs
// on registered buffers (TestMatrixRegistered): the matrix's collectives
// then get their buffers from it (mem, reg).
var regMem sync.Map // *Comm → *regArena

type regArena struct {
	b    *Buffer
	used int
}

// mem returns n zeroed elements for a collective of c: registered memory
// when the matrix runs on it, else ordinary memory. The arena wraps
// around: a call's buffers are no longer used once it has returned
// (nobody touches a zero-copy call's buffers after it), and the arena
// holds many calls' worth.
func mem[T Element](c *Comm, n int) []T {
	v, ok := regMem.Load(c)
	if !ok || n == 0 {
		return make([]T, n)
	}
	a := v.(*regArena)
	var zero T
	need := n * int(unsafe.Sizeof(zero))
	m := a.b.Bytes()
	if need > len(m)/4 {
		panic(fmt.Sprintf("matrix arena of %d bytes too small for %d", len(m), need))
	}
	if a.used+need > len(m) {
		a.used = 0
	}
	p := m[a.used : a.used+need]
	a.used = (a.used + need + 63) &^ 63
	clear(p)
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(p))), n)
}

// reg returns s in memory from mem.
func reg[T Element](c *Comm, s []T) []T {
	out := mem[T](c, len(s))
	copy(out, s)
	return out
}

// TestMatrixRegistered runs the correctness matrix with every buffer of
// the collectives the zero-copy path serves in registered memory
// (Comm.Alloc) and HCOMM_ZERO_COPY at 1 byte: every such call with data
// takes the path, and every result is checked against the reference.
func TestMatrixRegistered(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprint("n=", n), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			comms := newLocal(t, n, &Config{ZeroCopy: 1})
			noErrs(t, "Alloc", par(comms, func(c *Comm) error {
				b, err := c.Alloc(ctx, 1<<20)
				if err == nil {
					regMem.Store(c, &regArena{b: b})
				}
				return err
			}))
			defer func() {
				for _, c := range comms {
					regMem.Delete(c)
				}
			}()
			forEachType(t, comms, "")
			for _, c := range comms {
				if c.ZeroCopyCalls() == 0 {
					t.Errorf("rank %d: no call took the zero-copy path", c.Rank())
				}
			}
		})
	}
}
