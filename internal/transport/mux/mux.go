// Package mux combines several transports into one, routing each peer to
// the transport that reaches it (shared memory within a host, TCP between
// hosts).
package mux

import (
	"context"
	"errors"
	"fmt"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// Mux is a transport.Transport that routes by peer.
type Mux struct {
	rank, size int
	route      []transport.Transport // route[peer]; nil for this rank
	parts      []transport.Transport
}

// New returns a transport for rank of size that reaches peer p through
// route[p]. Every transport in route must serve the same rank and size.
func New(rank, size int, route []transport.Transport) (*Mux, error) {
	if len(route) != size {
		return nil, fmt.Errorf("mux: %d routes for %d ranks", len(route), size)
	}
	m := &Mux{rank: rank, size: size, route: route}
	for p, t := range route {
		if p == rank {
			continue
		}
		if t == nil {
			return nil, fmt.Errorf("mux: no transport reaches rank %d", p)
		}
		dup := false
		for _, q := range m.parts {
			dup = dup || q == t
		}
		if !dup {
			m.parts = append(m.parts, t)
		}
	}
	return m, nil
}

// Rank returns this rank.
func (m *Mux) Rank() int { return m.rank }

// Size returns the number of ranks.
func (m *Mux) Size() int { return m.size }

func (m *Mux) to(peer int) (transport.Transport, error) {
	if peer < 0 || peer >= m.size || peer == m.rank {
		return nil, fmt.Errorf("%w: peer %d", errs.ErrInvalidArgument, peer)
	}
	return m.route[peer], nil
}

// Send sends through the transport that reaches peer.
func (m *Mux) Send(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error {
	t, err := m.to(peer)
	if err != nil {
		return err
	}
	return t.Send(ctx, peer, fp, p)
}

// TrySend sends at once through the transport that reaches peer, if that
// transport can (transport.Eager).
func (m *Mux) TrySend(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) (bool, error) {
	t, err := m.to(peer)
	if err != nil {
		return false, err
	}
	if e, ok := t.(transport.Eager); ok {
		return e.TrySend(ctx, peer, fp, p)
	}
	return false, nil
}

// Arrived reports whether the next message from peer has arrived, where
// the transport that reaches peer can tell (transport.Prober).
func (m *Mux) Arrived(peer int) bool {
	t, err := m.to(peer)
	if err != nil {
		return false
	}
	p, ok := t.(transport.Prober)
	return ok && p.Arrived(peer)
}

// RecvSink receives through the transport that reaches peer, straight
// into s if that transport can (transport.SinkReceiver), else through s's
// staging buffer.
func (m *Mux) RecvSink(ctx context.Context, peer int, fp *wire.Fingerprint, n int, s transport.Sink) error {
	t, err := m.to(peer)
	if err != nil {
		return err
	}
	if r, ok := t.(transport.SinkReceiver); ok {
		return r.RecvSink(ctx, peer, fp, n, s)
	}
	b := s.Staging()[:n]
	if err := t.Recv(ctx, peer, fp, b); err != nil {
		return err
	}
	s.Consume(0, b)
	return nil
}

// SendSink sends through the transport that reaches peer, handing s the
// pieces of p as that transport copies them (transport.SinkSender), or p
// whole after a plain Send.
func (m *Mux) SendSink(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte, s transport.Sink) error {
	t, err := m.to(peer)
	if err != nil {
		return err
	}
	if ss, ok := t.(transport.SinkSender); ok {
		return ss.SendSink(ctx, peer, fp, p, s)
	}
	if err := t.Send(ctx, peer, fp, p); err != nil {
		return err
	}
	s.Consume(0, p)
	return nil
}

// SendRecv moves a send and a receive with peer on one goroutine where the
// transport that reaches it can (transport.SendReceiver); it reports false
// otherwise, having done nothing.
func (m *Mux) SendRecv(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte, ps transport.Sink, n int, rs transport.Sink) (bool, error) {
	t, err := m.to(peer)
	if err != nil {
		return false, err
	}
	if sr, ok := t.(transport.SendReceiver); ok {
		return sr.SendRecv(ctx, peer, fp, p, ps, n, rs)
	}
	return false, nil
}

// ExchangesWith reports whether the transport that reaches peer runs
// fused exchanges with it (transport.Exchanger).
func (m *Mux) ExchangesWith(peer int) bool {
	t, err := m.to(peer)
	if err != nil {
		return false
	}
	x, ok := t.(transport.Exchanger)
	return ok && x.ExchangesWith(peer)
}

// Exchange runs a fused exchange through the transport that reaches peer;
// the caller has checked ExchangesWith.
func (m *Mux) Exchange(ctx context.Context, peer int, fp *wire.Fingerprint, send []byte, n int, x transport.ExchangeSink) error {
	t, err := m.to(peer)
	if err != nil {
		return err
	}
	xt, ok := t.(transport.Exchanger)
	if !ok {
		return fmt.Errorf("mux: the transport to rank %d has no fused exchange: %w", peer, errs.ErrInvalidArgument)
	}
	return xt.Exchange(ctx, peer, fp, send, n, x)
}

// SinksTo reports whether the transport that reaches peer receives into
// sinks straight from its own buffers (transport.SinkPeers).
func (m *Mux) SinksTo(peer int) bool {
	t, err := m.to(peer)
	if err != nil {
		return false
	}
	if sp, ok := t.(transport.SinkPeers); ok {
		return sp.SinksTo(peer)
	}
	_, ok := t.(transport.SinkReceiver)
	return ok
}

// Recv receives through the transport that reaches peer.
func (m *Mux) Recv(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error {
	t, err := m.to(peer)
	if err != nil {
		return err
	}
	return t.Recv(ctx, peer, fp, p)
}

// Abort aborts every underlying transport.
func (m *Mux) Abort(cause error) {
	for _, t := range m.parts {
		t.Abort(cause)
	}
}

// Close closes every underlying transport.
func (m *Mux) Close() error {
	var all []error
	for _, t := range m.parts {
		all = append(all, t.Close())
	}
	return errors.Join(all...)
}

// Route returns the transport that reaches peer (nil for this rank).
func (m *Mux) Route(peer int) transport.Transport { return m.route[peer] }

// Group returns the one transport that reaches every peer when it can run
// group calls (transport.Group), else nil.
func (m *Mux) Group() transport.Group {
	if len(m.parts) != 1 {
		return nil
	}
	g, _ := m.parts[0].(transport.Group)
	return g
}
