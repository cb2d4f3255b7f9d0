package callpath

import (
	"context"

	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/wire"
	"github.com/hcomm-go/hcomm/internal/zcopy"
)

// The zero-copy path of collectives on registered memory (Comm.Alloc) is
// internal/zcopy; this is its glue: which calls are candidates, and the
// fallback to the call's program.

// zcCall fills the path's reusable zcopy.Call from k.
func (p *Path) zcCall(k *Call) *zcopy.Call {
	z := &p.zc
	*z = zcopy.Call{Coll: k.Coll, Root: k.Root, InPlace: k.InPlace, DT: k.DT, Op: k.Op,
		In: k.In, Out: k.Out, Count: k.Count, Spec: k.Spec}
	if k.Spec != nil {
		z.InPlace = k.Spec.InPlace
	}
	return z
}

// zeroCopy reports whether k is a candidate for the zero-copy path.
func (p *Path) zeroCopy(k *Call) bool {
	return p.Reg.Live() > 0 && p.Reg.Candidate(p.Size, p.Set.ZeroCopy, !p.Set.ZeroCopyFixed, p.zcCall(k))
}

// runZeroCopy runs candidate k by the zero-copy path, or by prog when the
// ranks' buffers do not allow it, and tells Start (the observed call's
// event) which once the ranks agree. The caller holds p.Mu and has just
// called zeroCopy(k).
func (p *Path) runZeroCopy(ctx context.Context, prog *sched.Program, fp *wire.Fingerprint, k *Call) error {
	p.Reg.Mu.RLock()
	defer p.Reg.Mu.RUnlock()
	p.zcPath = zcopy.Path{Rank: p.Rank, Size: p.Size, T: p.T, FP: fp, Min: p.Set.ZeroCopy}
	if p.ZeroCopyT != nil {
		p.zcPath.T = p.ZeroCopyT
	}
	if p.Start != nil {
		p.zcPath.Clock = &p.Clock
	}
	took, err := p.Reg.Begin(ctx, &p.zcPath, &p.zc)
	if p.Start != nil {
		if took {
			p.op.Algo, p.op.Chunks = zcopy.Algo, zcopy.Msgs(&p.zc, p.Rank, p.Size)
		}
		p.Start(&p.op)
	}
	switch {
	case err != nil:
		return err
	case took:
		return p.Reg.Finish(ctx, &p.zcPath, &p.zc)
	}
	return p.Ex.Run(ctx, prog, fp, k.DT, k.Op, k.In, k.Out)
}

// zcObserved names the zero-copy path in an observed call's event if the
// call (just run by runZeroCopy) took it: the records are its messages.
func (p *Path) zcObserved() {
	if p.zcPath.Took {
		p.op.Algo, p.op.Chunks = zcopy.Algo, p.zcPath.Msgs
	}
}
