package callpath

import (
	"context"
	"sync"

	"github.com/hcomm-go/hcomm/internal/argcheck"
	"github.com/hcomm-go/hcomm/internal/opctx"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// p2pSlot is the state of Sends to, or Recvs from, one peer.
type p2pSlot struct {
	mu  sync.Mutex // one call at a time per peer and direction
	seq uint64
	fp  wire.Fingerprint
	ctx opctx.Ctx
}

// P2P runs a Send or Recv through the executor's chunking (Transfer), the
// per-call context (one per peer and direction, so concurrent Sends and
// Recvs to different peers do not wait for each other) and the flight
// recorder, like a collective.
func (p *Path) P2P(parent context.Context, name string, buf []byte, dt, peer, tag int, send bool) error {
	if parent == nil {
		return p.Err(name, -1, ErrNilCtx)
	}
	d, n, err := argcheck.CheckP2P(buf, dt, peer, tag, p.Rank, p.Size)
	if err != nil {
		return p.Err(name, -1, err)
	}
	if err := p.Usable(); err != nil {
		return p.Err(name, peer, err)
	}
	slot := 2 * peer
	if !send {
		slot++
	}
	s := &p.peers[slot]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.fp = wire.Fingerprint{Seq: s.seq, Coll: wire.CollSendRecv, DType: d, Root: int32(tag), Count: int64(n)}
	now := p.Clock.Now()
	ctx := parent
	if p.Set.Timeout > 0 {
		s.ctx.Begin(parent, now, p.Set.Timeout)
		defer s.ctx.End()
		ctx = &s.ctx
	}
	rs := p.Rec.BeginP2P(name, &s.fp, peer, now)
	if err := p.Ex.Transfer(ctx, peer, &s.fp, buf, send); err != nil {
		oe := p.Fail(&Current{Name: name, Parent: parent, Ctx: ctx, FP: &s.fp, Peer: peer}, err)
		p.Rec.End(rs, oe)
		return oe
	}
	p.Rec.End(rs, nil)
	return nil
}
