package main

import (
	"context"
	"sync"
	"unsafe"

	"github.com/hcomm-go/hcomm"
)

// With -registered, a point's buffers are carved from registered memory
// (Comm.Alloc) allocated for that point, so that the collectives can take
// the zero-copy path; otherwise they are ordinary Go memory.

// arena is the registered memory of one rank's current point.
type arena struct {
	buf  *hcomm.Buffer
	used int
}

var arenas sync.Map // *hcomm.Comm → *arena

// arenaBytes bounds what any setup allocates for a point of size bytes
// over n ranks (two buffers of at most size rounded up to whole elements
// per rank, each aligned).
func arenaBytes(size int64, n int) int {
	return int(2*size) + 2*8*n + 4*64
}

// beginArena allocates c's registered memory for one point (collective).
func beginArena(ctx context.Context, c *hcomm.Comm, size int64) error {
	b, err := c.Alloc(ctx, arenaBytes(size, c.Size()))
	if err != nil {
		return err
	}
	arenas.Store(c, &arena{buf: b})
	return nil
}

// endArena frees c's registered memory of the point (collective).
func endArena(ctx context.Context, c *hcomm.Comm) error {
	a, ok := arenas.LoadAndDelete(c)
	if !ok {
		return nil
	}
	return a.(*arena).buf.Free(ctx)
}

// newBytes returns n zeroed bytes for c's point: registered when an
// arena is open, else ordinary memory.
func newBytes(c *hcomm.Comm, n int64) []byte {
	v, ok := arenas.Load(c)
	if !ok {
		return make([]byte, n)
	}
	a := v.(*arena)
	mem := a.buf.Bytes()
	if a.used+int(n) > len(mem) {
		return make([]byte, n) // cannot happen with arenaBytes; stay correct
	}
	p := mem[a.used : a.used+int(n) : a.used+int(n)]
	a.used = (a.used + int(n) + 63) &^ 63
	clear(p)
	return p
}

// newElems is newBytes for n elements of T.
func newElems[T hcomm.Element](c *hcomm.Comm, n int64) []T {
	var zero T
	es := int64(unsafe.Sizeof(zero))
	b := newBytes(c, n*es)
	if len(b) == 0 {
		return make([]T, 0)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}
