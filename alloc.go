package hcomm

import (
	"context"
	"github.com/hcomm-go/hcomm/internal/rma"
	"github.com/hcomm-go/hcomm/internal/zcopy"
)

// A Buffer is memory registered with a communicator: Comm.Alloc allocates
// it in shared memory that the other ranks on the same host map, so that
// collectives whose buffers lie in registered memory on every rank move
// the data directly between the ranks' buffers (one copy, or none through
// a staging area) instead of through the transport. Use Bytes (or slices
// of it, reinterpreted as any Element type) as the send and receive
// buffers of collectives; the path is chosen per call, by every rank
// alike, and calls with ordinary memory work as before.
//
// Lifetime: the memory is valid from Alloc until Free (or the
// communicator's Close) on this rank. Free is collective and returns once
// no rank can still be reading or writing it; after Free, Bytes returns
// nil, a second Free returns ErrClosed, and the memory must no longer be
// used — slices obtained from Bytes then point to unmapped memory. The
// shared-memory file is removed from /dev/shm before Alloc returns, so a
// rank that dies leaves nothing behind, and a peer's death does not
// invalidate this rank's mapping of its buffer.
type Buffer struct {
	c *Comm
	b *zcopy.Buf
}

// Alloc allocates n bytes of registered memory on this rank; every rank
// calls it (n may differ between ranks). See Buffer for what registered
// memory is for and its lifetime.
func (c *Comm) Alloc(parent context.Context, n int) (*Buffer, error) {
	if parent == nil {
		return nil, c.argErr("Alloc", errNilCtx)
	}
	if n < 0 {
		return nil, c.argErr("Alloc", invalid("n = %d, want at least 0", n))
	}
	if err := c.usable(); err != nil {
		return nil, &OpError{Op: "Alloc", Rank: c.rank, Peer: peerOf(err), Err: err}
	}
	ctx, cancel := c.withTimeout(parent)
	defer cancel()
	rb, err := rma.NewBuffer(ctx, rma.BufferParams{
		Rank: c.rank, Size: c.size, N: n, Exchange: c.gatherRecords})
	if err != nil {
		return nil, c.windowErr("Alloc", -1, err)
	}
	c.path.Reg.Mu.Lock()
	defer c.path.Reg.Mu.Unlock()
	if c.path.State.Load() == stateClosed {
		rb.Close()
		return nil, &OpError{Op: "Alloc", Rank: c.rank, Peer: -1, Err: ErrClosed}
	}
	if rb.Shared && c.path.Reg.Split == nil {
		// Every rank of the communicator is on this host.
		c.path.Reg.Split = c.eng.Splitter(c.set.copyEngine, c.size, c.set.pollCPUs, c.path.Ex.Pin)
	}
	return &Buffer{c: c, b: c.path.Reg.Add(c.size, rb)}, nil
}

// ZeroCopyCalls returns how many collectives this rank has run by the
// zero-copy path on registered memory, so that a program can check that
// its buffers qualify (hcomm perf -registered names the path this way).
func (c *Comm) ZeroCopyCalls() uint64 { return c.path.Reg.Hits.Load() }

// Bytes returns this rank's registered memory (nil after Free).
func (b *Buffer) Bytes() []byte {
	if b == nil || b.b.Freed.Load() {
		return nil
	}
	return b.b.B.Bytes()
}

// Shared reports whether every rank maps every other rank's part of the
// buffer, which the zero-copy path needs: false when some ranks are on
// other hosts (their collectives then use the transport).
func (b *Buffer) Shared() bool { return b != nil && !b.b.Freed.Load() && b.b.B.Shared }

// Free is collective: once every rank has called it the memory is
// released. A second Free returns ErrClosed. The memory is released on
// this rank even when the collective part fails (the error is returned).
func (b *Buffer) Free(ctx context.Context) error {
	if b == nil || b.b.Freed.Load() {
		return &OpError{Op: "Free", Rank: -1, Peer: -1, Err: ErrClosed}
	}
	if ctx == nil {
		return b.c.argErr("Free", errNilCtx)
	}
	c := b.c
	var err error
	if c.path.State.Load() != stateClosed {
		// Every collective that used the buffer has ended on every rank
		// (each ends with its ranks agreeing that it did) once all of
		// them reach this barrier.
		err = c.Barrier(ctx)
	}
	c.path.Reg.Mu.Lock()
	c.path.Reg.Release(b.b)
	c.path.Reg.Mu.Unlock()
	if err != nil {
		return c.windowErr("Free", -1, err)
	}
	return nil
}

// closeBuffers releases the buffers still allocated when the
// communicator closes, without waiting for peers.
func (c *Comm) closeBuffers() {
	c.path.Reg.ReleaseAll()
	c.eng.Close()
}
