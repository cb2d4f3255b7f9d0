package hcomm

import "context"

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
	return c.path.P2P(ctx, "Send", buf, int(dt), peer, tag, true)
}

// RecvBytes is Recv over a raw buffer of element type dt.
func (c *Comm) RecvBytes(ctx context.Context, buf []byte, dt DType, peer, tag int) error {
	return c.path.P2P(ctx, "Recv", buf, int(dt), peer, tag, false)
}
