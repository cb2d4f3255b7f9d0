package hcomm

import (
	"context"
	"sync"

	"github.com/hcomm-go/hcomm/internal/argcheck"
	"github.com/hcomm-go/hcomm/internal/opctx"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// Send sends buf to rank peer, which receives it with a Recv of the same
// length and tag. Between a pair of ranks, Sends are received in the order
// they were made: the tag is checked (a different tag is a mismatch), not
// used to reorder. Send may block until the peer receives, so two ranks that
// Send to each other must not both Send first (use one goroutine per
// direction, or order the calls).
func Send[T Element](ctx context.Context, c *Comm, buf []T, peer, tag int) error {
	return c.SendBytes(ctx, bytesOf(buf), DTypeOf[T](), peer, tag)
}

// Recv receives into buf the next message rank peer sent to this rank with
// Send; its length and tag must match.
func Recv[T Element](ctx context.Context, c *Comm, buf []T, peer, tag int) error {
	return c.RecvBytes(ctx, bytesOf(buf), DTypeOf[T](), peer, tag)
}

// SendBytes is Send over a raw buffer of element type dt.
func (c *Comm) SendBytes(ctx context.Context, buf []byte, dt DType, peer, tag int) error {
	return c.p2p(ctx, "Send", buf, dt, peer, tag, true)
}

// RecvBytes is Recv over a raw buffer of element type dt.
func (c *Comm) RecvBytes(ctx context.Context, buf []byte, dt DType, peer, tag int) error {
	return c.p2p(ctx, "Recv", buf, dt, peer, tag, false)
}

// p2p runs a Send or Recv through the executor's chunking (Transfer), the
// per-call context (one per peer and direction, so concurrent Sends and
// Recvs to different peers do not wait for each other) and the flight
// recorder, like a collective.
func (c *Comm) p2p(parent context.Context, name string, buf []byte, dt DType, peer, tag int, send bool) error {
	if parent == nil {
		return c.argErr(name, errNilCtx)
	}
	d, n, err := argcheck.CheckP2P(buf, int(dt), peer, tag, c.rank, c.size)
	if err != nil {
		return c.argErr(name, err)
	}
	if err := c.usable(); err != nil {
		return &OpError{Op: name, Rank: c.rank, Peer: peer, Err: err}
	}
	slot := 2 * peer
	if !send {
		slot++
	}
	p := &c.peers[slot]
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	p.fp = wire.Fingerprint{Seq: p.seq, Coll: wire.CollSendRecv, DType: d, Root: int32(tag), Count: int64(n)}
	now := c.clock.Now()
	ctx := parent
	if c.set.timeout > 0 {
		p.ctx.Begin(parent, now, c.set.timeout)
		defer p.ctx.End()
		ctx = &p.ctx
	}
	rs := c.rec.BeginP2P(name, &p.fp, peer, now)
	if err := c.ex.Transfer(ctx, peer, &p.fp, buf, send); err != nil {
		oe := c.runErr(&current{name: name, parent: parent, ctx: ctx, fp: &p.fp, peer: peer}, err)
		c.rec.End(rs, oe)
		return oe
	}
	c.rec.End(rs, nil)
	return nil
}

// p2pSlot is the state of Sends to, or Recvs from, one peer.
type p2pSlot struct {
	mu  sync.Mutex // one call at a time per peer and direction
	seq uint64
	fp  wire.Fingerprint
	ctx opctx.Ctx
}
