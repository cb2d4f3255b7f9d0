package hcomm

import (
	"context"
	"errors"
	"fmt"

	"github.com/hcomm-go/hcomm/internal/rma"
	"github.com/hcomm-go/hcomm/internal/transport"
)

// WindowSignals is the number of signal words every rank has in every
// window (PutSignal's and WaitSignal's sig is in [0, WindowSignals)).
const WindowSignals = rma.NumSignals

// A Window is memory every rank of a communicator exposes to the others for
// one-sided access: Put writes into a peer's part, Get reads from it, and
// the peer's code takes no part. Windows are made collectively by
// Comm.NewWindow (over memory the caller owns) or Comm.AllocWindow (over
// memory hcomm allocates, which ranks on the same host map directly, so a
// Put to them is one copy).
//
// Ranks on the same host reach each other's memory directly (a copy into a
// shared mapping for AllocWindow, process_vm_writev/readv for NewWindow);
// other ranks send requests that a progress goroutine of the target
// checks against the window and applies.
//
// Ordering: Put and Get complete before they return (a Put's bytes are in
// the target's memory, a Get's in dst). To tell a peer that data arrived,
// use PutSignal, whose signal becomes visible after its bytes, and
// WaitSignal on the peer; or Fence, after which every rank sees all RMA
// issued before it. Concurrent Puts to overlapping bytes leave those bytes
// undefined (as in MPI), and a Get concurrent with a Put of the same bytes
// may see either value per byte, but no access ever touches memory outside
// the range it names: every access is checked against the target's
// registration, on the origin and again on the target.
//
// A call's ctx bounds it as a collective's does (its deadline makes
// ErrTimeout). A request to another host that its ctx cuts short while its
// bytes are under way leaves this rank's stream to that peer mid-request,
// so the window becomes unusable on this rank; a ctx already done when
// the call begins sends nothing and leaves the window as it was. Ranks on
// the same host copy without waiting, whatever the ctx.
//
// A Window is safe for concurrent use. Closing the communicator releases
// the windows still open on this rank without waiting for the peers.
type Window struct {
	c  *Comm
	w  *rma.Window
	id string
}

// windowMessages forces the message path between the ranks of a window
// (tests).
var windowMessages bool

// NewWindow exposes buf to the other ranks; every rank calls it (buf may
// be empty). buf must stay allocated and must not be resized until the
// window is closed; hcomm writes into it from Puts of other ranks.
func (c *Comm) NewWindow(ctx context.Context, buf []byte) (*Window, error) {
	return c.newWindow(ctx, "NewWindow", buf, -1)
}

// AllocWindow allocates n bytes on every rank, in memory the ranks of a
// host map directly, and exposes them as a window; every rank calls it (n
// may differ between ranks). Bytes returns this rank's part, which is
// valid until Close.
func (c *Comm) AllocWindow(ctx context.Context, n int) (*Window, error) {
	if n < 0 {
		return nil, c.argErr("AllocWindow", invalid("n = %d, want at least 0", n))
	}
	return c.newWindow(ctx, "AllocWindow", nil, n)
}

func (c *Comm) newWindow(parent context.Context, name string, buf []byte, alloc int) (*Window, error) {
	if err := c.usable(); err != nil {
		return nil, &OpError{Op: name, Rank: c.rank, Peer: -1, Err: err}
	}
	ctx, cancel := c.withTimeout(parent)
	defer cancel()
	c.path.Mu.Lock()
	c.splits++
	n := c.splits
	c.path.Mu.Unlock()
	id := fmt.Sprintf("%s/window%d", c.id, n)
	t, _, err := c.connect(ctx, id, c.rank, c.size)
	if err != nil {
		return nil, &OpError{Op: name, Rank: c.rank, Peer: -1, Err: err}
	}
	p := rma.Params{
		Rank: c.rank, Size: c.size, ID: uint32(n), T: t, Buf: buf, Alloc: alloc,
		Chunk: c.path.Ex.ChunkBytes(), Messages: windowMessages, Timeout: c.set.Timeout,
		Exchange: c.gatherRecords, Barrier: c.Barrier, Check: c.usable,
		Replies: func(ctx context.Context) (transport.Transport, error) {
			rt, _, err := c.connect(ctx, id+"/replies", c.rank, c.size)
			return rt, err
		},
	}
	if alloc >= 0 {
		// Large copies to mapped peers may be split over the copy engine.
		p.Copy = func(local int) func(dst, src []byte) {
			if s := c.eng.Splitter(c.set.copyEngine, local, c.set.pollCPUs, c.path.Ex.Pin); s != nil {
				return func(dst, src []byte) { s.Copy(dst, src) }
			}
			return nil
		}
	}
	w, err := rma.New(ctx, p)
	if err != nil {
		t.Close()
		return nil, c.windowErr(name, -1, err)
	}
	if !c.windows.Add(w) {
		// The communicator closed while the window was made: its Close
		// released the windows it had, not this one.
		w.Close()
		return nil, &OpError{Op: name, Rank: c.rank, Peer: -1, Err: ErrClosed}
	}
	return &Window{c: c, w: w, id: id}, nil
}

// gatherRecords all-gathers every rank's record (windows, buffers).
func (c *Comm) gatherRecords(ctx context.Context, rec []byte) ([]byte, error) {
	all := make([]byte, c.size*len(rec))
	return all, AllGather(ctx, c, rec, all)
}

// windowErr wraps an error of a window operation.
func (c *Comm) windowErr(op string, target int, err error) error {
	if err == nil {
		return nil
	}
	if p := peerOf(err); p >= 0 {
		target = p
	}
	var te rma.TimeoutError
	switch {
	case errors.As(err, &te):
		err = &timeoutError{After: te.After}
	case err == context.DeadlineExceeded:
		err = &timeoutError{} // the ctx's deadline: ErrTimeout too, as for collectives
	}
	return &OpError{Op: op, Rank: c.rank, Peer: target, Err: err}
}

// ready returns why the window's communicator cannot be used, or nil.
func (w *Window) ready(op string, target int) error {
	if err := w.c.usable(); err != nil {
		return &OpError{Op: op, Rank: w.c.rank, Peer: target, Err: err}
	}
	return nil
}

// Size returns the number of bytes rank exposes (0 for a rank out of
// range).
func (w *Window) Size(rank int) int { return w.w.Size(rank) }

// Bytes returns this rank's exposed memory: the buffer given to NewWindow,
// or the memory AllocWindow allocated.
func (w *Window) Bytes() []byte { return w.w.Bytes() }

// Put writes src into target's part of the window at byte offset off. It
// returns when src may be reused; the bytes are then in target's memory.
func (w *Window) Put(ctx context.Context, target, off int, src []byte) error {
	return w.put(ctx, "Put", target, off, src, rma.Shape{Len: len(src)}, -1, 0)
}

// PutSignal is Put followed by an atomic add of add to target's signal
// word sig, which becomes visible after the bytes: a WaitSignal on target
// that sees the new value sees the bytes.
func (w *Window) PutSignal(ctx context.Context, target, off int, src []byte, sig int, add uint64) error {
	return w.put(ctx, "PutSignal", target, off, src, rma.Shape{Len: len(src)}, sig, add)
}

// PutStrided writes a 2-D block of rows rows of rowLen bytes: row i is read
// from src[i*srcPitch:] and written at off+i*dstPitch in target's part of
// the window, so a sub-matrix moves without packing.
func (w *Window) PutStrided(ctx context.Context, target, off int, src []byte, rows, rowLen, srcPitch, dstPitch int) error {
	s, err := rma.Strided(rows, rowLen, dstPitch, srcPitch)
	if err != nil {
		return w.c.windowErr("PutStrided", target, err)
	}
	return w.put(ctx, "PutStrided", target, off, src, s, -1, 0)
}

func (w *Window) put(ctx context.Context, op string, target, off int, src []byte, s rma.Shape, sig int, add uint64) error {
	if err := w.ready(op, target); err != nil {
		return err
	}
	if op == "PutSignal" { // the message path applies the configured timeout
		return w.c.windowErr(op, target, w.w.PutSignal(ctx, target, off, src, s, sig, add))
	}
	return w.c.windowErr(op, target, w.w.Put(ctx, target, off, src, s))
}

// Get reads len(dst) bytes at byte offset off of target's part of the
// window into dst. It returns when dst holds them.
func (w *Window) Get(ctx context.Context, target, off int, dst []byte) error {
	return w.get(ctx, "Get", target, off, dst, rma.Shape{Len: len(dst)})
}

// GetStrided reads a 2-D block of rows rows of rowLen bytes: row i is read
// at off+i*srcPitch in target's part of the window and written to
// dst[i*dstPitch:].
func (w *Window) GetStrided(ctx context.Context, target, off int, dst []byte, rows, rowLen, srcPitch, dstPitch int) error {
	s, err := rma.Strided(rows, rowLen, srcPitch, dstPitch)
	if err != nil {
		return w.c.windowErr("GetStrided", target, err)
	}
	return w.get(ctx, "GetStrided", target, off, dst, s)
}

func (w *Window) get(parent context.Context, op string, target, off int, dst []byte, s rma.Shape) error {
	if err := w.ready(op, target); err != nil {
		return err
	}
	return w.c.windowErr(op, target, w.w.Get(parent, target, off, dst, s))
}

// Flush returns once every Put this rank issued to target (-1: to every
// rank) before the call is visible there. Puts complete before they
// return, so Flush reports only whether the targets are still reachable.
func (w *Window) Flush(ctx context.Context, target int) error {
	if err := w.ready("Flush", target); err != nil {
		return err
	}
	return w.c.windowErr("Flush", target, w.w.Flush(ctx, target))
}

// Fence is collective: all RMA any rank issued on the window before its
// Fence is complete and visible on every rank after it.
func (w *Window) Fence(ctx context.Context) error {
	if err := w.Flush(ctx, -1); err != nil {
		return err
	}
	if err := w.c.Barrier(ctx); err != nil {
		return w.c.windowErr("Fence", -1, err)
	}
	w.w.Synced()
	return nil
}

// WaitSignal waits until this rank's signal word sig is at least atLeast
// and returns its value. It polls briefly, then sleeps until a PutSignal
// changes a signal of this rank, ctx ends or the window is closed.
func (w *Window) WaitSignal(ctx context.Context, sig int, atLeast uint64) (uint64, error) {
	if err := w.ready("WaitSignal", -1); err != nil {
		return 0, err
	}
	v, err := w.w.WaitSignal(ctx, sig, atLeast)
	return v, w.c.windowErr("WaitSignal", -1, err)
}

// Close is collective: once every rank has called it the window's memory
// is released (AllocWindow's Bytes becomes invalid). Later calls on the
// window return ErrClosed.
func (w *Window) Close(ctx context.Context) error {
	if w.w.Closed() {
		return w.c.windowErr("Close", -1, ErrClosed)
	}
	berr := w.c.Barrier(ctx)
	w.c.windows.Remove(w.w)
	err := w.w.Close()
	if berr != nil {
		return w.c.windowErr("Close", -1, berr)
	}
	return w.c.windowErr("Close", -1, err)
}
