package hcomm

import (
	"context"

	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/wire"
	"github.com/hcomm-go/hcomm/internal/zcopy"
)

// The zero-copy path of collectives on registered memory (Comm.Alloc) is
// internal/zcopy; this is its glue: which calls are candidates, and the
// fallback to the call's program.

// zcCall fills the communicator's reusable zcopy.Call from k.
func (c *Comm) zcCall(k *call) *zcopy.Call {
	z := &c.zc
	*z = zcopy.Call{Coll: k.coll, Root: k.Root, InPlace: k.InPlace, DT: k.DT, Op: k.Op,
		In: k.In, Out: k.Out, Count: k.Count, Spec: k.Spec}
	if k.Spec != nil {
		z.InPlace = k.Spec.InPlace
	}
	return z
}

// zeroCopy reports whether k is a candidate for the zero-copy path.
func (c *Comm) zeroCopy(k *call) bool {
	return c.reg.Live() > 0 && c.reg.Candidate(c.size, c.set.zeroCopy, c.zcCall(k))
}

// runZeroCopy runs candidate k by the zero-copy path, or by prog when the
// ranks' buffers do not allow it, and tells the Observer's OpStart (ev)
// which once the ranks agree. The caller holds c.mu and has just called
// zeroCopy(k).
func (c *Comm) runZeroCopy(ctx context.Context, prog *sched.Program, fp *wire.Fingerprint, k *call, ev *OpEvent) error {
	c.reg.Mu.RLock()
	defer c.reg.Mu.RUnlock()
	c.zcPath = zcopy.Path{Rank: c.rank, Size: c.size, T: c.t, FP: fp, Min: c.set.zeroCopy}
	if c.set.observer != nil {
		c.zcPath.Clock = &c.clock
	}
	took, err := c.reg.Begin(ctx, &c.zcPath, &c.zc)
	if o := c.set.observer; o != nil && o.OpStart != nil {
		e := *ev
		if took {
			e.Algo, e.Chunks = zcopy.Algo, zcopy.Msgs(&c.zc, c.rank, c.size)
		}
		o.OpStart(e)
	}
	switch {
	case err != nil:
		return err
	case took:
		return c.reg.Finish(ctx, &c.zcPath, &c.zc)
	}
	return c.ex.Run(ctx, prog, fp, k.DT, k.Op, k.In, k.Out)
}

// zcObserved names the zero-copy path in an observed call's event if the
// call (just run by runZeroCopy) took it: the records are its messages.
func (c *Comm) zcObserved(ev *OpEvent) {
	if c.zcPath.Took {
		ev.Algo, ev.Chunks = zcopy.Algo, c.zcPath.Msgs
	}
}
